"""The post-2018 knobs of BertConfig (docs/variants.md): each one's shapes, masks, parameter count,
sparse paths and a toy learning check, and the one-line errors of the combinations that cannot work."""

from __future__ import annotations

import functools

import pytest
import torch

from bertlab import BertForMaskedLM, BertForPreTraining, BertForSequenceClassification, BertModel
from bertlab.errors import ConfigError
from bertlab.model import BertHeadPooler, BertPooler
from tests import factories
from tests.factories import perturbed

VOCAB, LENGTH = 120, 24
MODERNBERT = dict(position_embedding_type="rotary", type_vocab_size=0, norm_position="pre",
                  first_attention_norm=False, gated_ffn=True, attention_bias=False, ffn_bias=False,
                  norm_bias=False, head_bias=False, local_attention_window=8, global_attention_every_n_layers=3,
                  rope_theta=160000.0, local_rope_theta=10000.0, classifier_pooling="cls", layer_norm_eps=1e-5)
KNOBS = {
    "rotary": dict(position_embedding_type="rotary"),
    "no positions": dict(position_embedding_type="none"),
    "pre-norm": dict(norm_position="pre"),
    "pre-norm without layer 0's attention norm": dict(norm_position="pre", first_attention_norm=False),
    "RMSNorm": dict(norm_type="rms_norm", norm_bias=False),
    "no embedding norm": dict(embedding_norm=False),
    "GeGLU": dict(gated_ffn=True),
    "SwiGLU": dict(gated_ffn=True, hidden_act="silu"),
    "no biases": dict(attention_bias=False, ffn_bias=False, norm_bias=False, head_bias=False, decoder_bias=False),
    "local and global layers": dict(local_attention_window=8, global_attention_every_n_layers=2),
    "no token types": dict(type_vocab_size=0),
    "ModernBERT's head": dict(head_act="silu", head_bias=False, classifier_pooling="cls"),
    "mean pooling": dict(classifier_pooling="mean"),
    "ModernBERT": MODERNBERT,
}


small_config = functools.partial(factories.small_config, vocab_size=VOCAB, num_hidden_layers=3, intermediate_size=48,
                                 num_labels=3, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def padded_batch(seed: int = 0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, VOCAB, (3, LENGTH), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 15:] = attention_mask[2, 7:] = 0
    input_ids[attention_mask == 0] = 0
    labels = torch.full_like(input_ids, -100)
    labelled = (torch.rand(input_ids.shape, generator=generator) < 0.3) & attention_mask.bool()
    labels[labelled] = input_ids[labelled]
    return dict(input_ids=input_ids, attention_mask=attention_mask, labels=labels)


@pytest.mark.parametrize("knob", KNOBS)
@pytest.mark.parametrize("model_class", (BertModel, BertForMaskedLM, BertForPreTraining,
                                         BertForSequenceClassification))
def test_every_knob_builds_every_model_class_with_the_configs_parameter_count_and_output_shapes(model_class, knob):
    cfg = small_config(**KNOBS[knob])
    model = model_class(cfg).eval()
    if model_class is BertForPreTraining:
        assert model.num_parameters == cfg.parameter_count()
    batch = padded_batch()
    out = model(batch["input_ids"], batch["attention_mask"])
    if model_class is BertModel:
        assert out.last_hidden_state.shape == (3, LENGTH, 32) and out.pooler_output.shape == (3, 32)
    elif model_class is BertForMaskedLM:
        assert out.logits.shape == (3, LENGTH, VOCAB)
    elif model_class is BertForPreTraining:
        assert out.prediction_logits.shape == (3, LENGTH, VOCAB) and out.seq_relationship_logits.shape == (3, 2)
    else:
        assert out.logits.shape == (3, 3)


@pytest.mark.parametrize("knob", KNOBS)
def test_padding_changes_no_output_at_the_real_positions(knob):
    torch.manual_seed(0)
    model = perturbed(BertForMaskedLM(small_config(**KNOBS[knob])), seed=1, scale=0.1).eval()
    batch = padded_batch()
    padded = model(batch["input_ids"], batch["attention_mask"]).logits
    for row, length in ((1, 15), (2, 7)):
        alone = model(batch["input_ids"][row:row + 1, :length]).logits
        torch.testing.assert_close(padded[row:row + 1, :length], alone, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("knob", KNOBS)
@pytest.mark.parametrize("model_class", (BertForMaskedLM, BertForPreTraining, BertForSequenceClassification))
def test_the_sparse_last_layer_gives_the_losses_of_every_position(model_class, knob):
    """The fast paths (the last layer at the predicted positions or [CLS] only, the static prediction
    block, the loss-only head) give the loss that every position's outputs give."""
    torch.manual_seed(0)
    model = perturbed(model_class(small_config(**KNOBS[knob])), seed=1, scale=0.1).eval()
    batch = padded_batch()
    if model_class is BertForSequenceClassification:
        batch["labels"] = torch.tensor([0, 2, 1])
        sparse, full = (model(**batch, output_hidden_states=every).loss for every in (False, True))
        torch.testing.assert_close(sparse, full)
        return
    extra = dict(next_sentence_label=torch.tensor([0, 1, 1])) if model_class is BertForPreTraining else {}
    full = model(**batch, **extra, output_hidden_states=True).loss
    for kwargs in (dict(), dict(predictions_per_row=10), dict(predictions_per_row=10, return_logits=False)):
        torch.testing.assert_close(model(**batch, **extra, **kwargs).loss, full, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("knob", KNOBS)
def test_every_knob_learns_a_toy_masked_lm_task(knob):
    """Twenty full-batch steps on one batch: the loss falls to below half its start."""
    torch.manual_seed(0)
    model = BertForMaskedLM(small_config(**KNOBS[knob])).train()
    batch = padded_batch()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(20):
        loss = model(**batch, predictions_per_row=10, return_logits=False).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses


def test_rotary_positions_depend_only_on_distances():
    torch.manual_seed(0)
    model = perturbed(BertModel(small_config(position_embedding_type="rotary", type_vocab_size=0)), seed=1,
                      scale=0.1).eval()
    input_ids = padded_batch()["input_ids"]
    positions = torch.arange(LENGTH)[None]
    torch.testing.assert_close(model(input_ids, position_ids=positions + 7).last_hidden_state,
                               model(input_ids, position_ids=positions).last_hidden_state, rtol=1e-4, atol=1e-5)
    swapped = input_ids.clone()
    swapped[:, [3, 4]] = swapped[:, [4, 3]]
    assert not torch.allclose(model(swapped).last_hidden_state[:, 0], model(input_ids).last_hidden_state[:, 0])


def test_without_position_embeddings_the_encoder_is_blind_to_order():
    torch.manual_seed(0)
    model = perturbed(BertModel(small_config(position_embedding_type="none", type_vocab_size=0)), seed=1,
                      scale=0.1).eval()
    assert not hasattr(model.embeddings, "position_embeddings")
    input_ids = padded_batch()["input_ids"]
    order = torch.randperm(LENGTH)
    torch.testing.assert_close(model(input_ids[:, order]).last_hidden_state,
                               model(input_ids).last_hidden_state[:, order], rtol=1e-4, atol=1e-5)


def test_local_layers_attend_within_the_window_and_global_ones_everywhere():
    model = BertModel(small_config(num_hidden_layers=4, local_attention_window=8, global_attention_every_n_layers=3,
                             attn_implementation="eager"))
    batch = padded_batch()
    probs = model(batch["input_ids"], batch["attention_mask"], output_attentions=True).attentions
    distance = (torch.arange(LENGTH)[:, None] - torch.arange(LENGTH)[None, :]).abs()
    mask = batch["attention_mask"].bool()
    padded_key_of_a_real_query = mask[:, None, :, None] & ~mask[:, None, None, :]
    for index, layer_probs in enumerate(probs):
        assert layer_probs.masked_select(padded_key_of_a_real_query).abs().max() == 0
        outside = layer_probs[(mask[:, None, :, None] & (distance > 4)).expand_as(layer_probs)]
        assert (outside.abs().max() == 0) == (index in (1, 2)), index  # layers 0 and 3 are global


@pytest.mark.parametrize("attention", ("sdpa", "eager"))
def test_inputs_embeds_and_3d_masks_work_on_a_rotary_model_with_local_layers(attention):
    """Layers 1 and 2 of 3 are local, so the sparse last layer reads the window's rows too: inputs_embeds
    give the ids path's outputs, a [B, L, L] mask repeating the key mask (or its 4-D bias) the 2-D mask's,
    and a per-query mask combines with the window (no attention outside either) and with the sparse path."""
    torch.manual_seed(0)
    model = perturbed(BertForMaskedLM(small_config(position_embedding_type="rotary", type_vocab_size=0,
                                             local_attention_window=8, global_attention_every_n_layers=3,
                                             attn_implementation=attention)), seed=1, scale=0.1).eval()
    batch = padded_batch()
    input_ids, mask, labels = batch["input_ids"], batch["attention_mask"], batch["labels"]
    embeds = model.bert.embeddings.word_embeddings(input_ids)
    by_ids = model(input_ids, mask)
    torch.testing.assert_close(model(attention_mask=mask, inputs_embeds=embeds).logits, by_ids.logits)
    torch.testing.assert_close(model(attention_mask=mask, inputs_embeds=embeds, labels=labels).loss,
                               model(input_ids, mask, labels=labels).loss)

    repeated = mask[:, None, :].expand(-1, LENGTH, -1)
    torch.testing.assert_close(model(input_ids, repeated).logits, by_ids.logits)
    extended = model.get_extended_attention_mask(repeated, tuple(input_ids.shape))
    torch.testing.assert_close(model(input_ids, extended).logits, by_ids.logits)

    causal = repeated * torch.ones(LENGTH, LENGTH, dtype=mask.dtype).tril()
    out = model(input_ids, causal, output_attentions=True)
    distance = (torch.arange(LENGTH)[:, None] - torch.arange(LENGTH)[None, :]).abs()
    real_query = mask.bool()[:, :, None]  # a padded query past the window has no key left, and attends evenly
    for index, probs in enumerate(out.attentions):
        masked = (causal == 0) | (distance > 4) if index in (1, 2) else causal == 0
        assert probs.masked_select((real_query & masked)[:, None].expand_as(probs)).abs().max() == 0, index
    assert not torch.allclose(out.logits, by_ids.logits)
    real = labels != -100
    every_position = torch.nn.functional.cross_entropy(out.logits[real], labels[real])
    for kwargs in (dict(), dict(predictions_per_row=10, return_logits=False)):
        torch.testing.assert_close(model(inputs_embeds=embeds, attention_mask=causal, labels=labels, **kwargs).loss,
                                   every_position, rtol=1e-5, atol=1e-6)


def test_local_layers_take_their_own_rotary_base():
    model = BertModel(small_config(**MODERNBERT))
    thetas = [layer.attention.self.rotary.theta for layer in model.encoder.layer]
    assert thetas == [160000.0, 10000.0, 10000.0]


def test_pre_norm_has_a_final_norm_and_modernberts_layer_0_no_attention_norm():
    model = BertModel(small_config(norm_position="pre", first_attention_norm=False))
    layers = model.encoder.layer
    assert layers[0].attention.input_norm is None and layers[1].attention.input_norm is not None
    assert all(isinstance(layer.output.LayerNorm, torch.nn.Identity) for layer in layers)
    assert hasattr(model.encoder, "final_norm")
    post = BertModel(small_config())
    assert post.encoder.layer[0].attention.input_norm is None and not hasattr(post.encoder, "final_norm")


def test_the_bias_flags_remove_exactly_their_biases():
    model = BertForMaskedLM(small_config(attention_bias=False, ffn_bias=False, norm_bias=False, head_bias=False,
                                   decoder_bias=False))
    names = {name for name, _ in model.named_parameters()}
    assert not any(name.endswith(".bias") for name in names), sorted(n for n in names if n.endswith("bias"))
    assert "cls.predictions.bias" not in model.state_dict()
    with_biases = {name for name, _ in BertForMaskedLM(small_config(attention_bias=False)).named_parameters()}
    assert "bert.encoder.layer.0.intermediate.dense.bias" in with_biases
    assert "bert.encoder.layer.0.attention.self.query.bias" not in with_biases


def test_a_gated_ffn_computes_activation_of_the_input_times_the_gate():
    model = BertModel(small_config(gated_ffn=True, hidden_act="silu"))
    intermediate = model.encoder.layer[0].intermediate
    assert intermediate.dense.out_features == 2 * 48
    x = torch.randn(2, 5, 32)
    inputs, gate = intermediate.dense(x).chunk(2, dim=-1)
    torch.testing.assert_close(intermediate(x), torch.nn.functional.silu(inputs) * gate)


def test_mean_pooling_reads_only_the_unmasked_positions():
    torch.manual_seed(0)
    model = perturbed(BertForSequenceClassification(small_config(classifier_pooling="mean", type_vocab_size=0)),
                      seed=1, scale=0.1).eval()
    batch = padded_batch()
    logits = model(batch["input_ids"], batch["attention_mask"]).logits
    torch.testing.assert_close(logits[2:], model(batch["input_ids"][2:, :7]).logits, rtol=1e-5, atol=1e-5)


def test_a_masked_lm_checkpoint_fine_tunes_through_the_classifier_input_chosen_at_loading(tmp_path):
    torch.manual_seed(0)
    BertForMaskedLM(small_config(norm_position="pre", norm_type="rms_norm", norm_bias=False)).save_pretrained(tmp_path)
    pooled = BertForSequenceClassification.from_pretrained(tmp_path)
    normed = BertForSequenceClassification.from_pretrained(tmp_path, classifier_pooling="cls")
    assert isinstance(pooled.bert.pooler, BertPooler) and isinstance(normed.bert.pooler, BertHeadPooler)
    encoder = {k: v for k, v in normed.state_dict().items() if ".encoder." in k or ".embeddings." in k}
    assert encoder and all(torch.equal(v, pooled.state_dict()[k]) for k, v in encoder.items())


def test_mean_pooling_refuses_a_3d_mask_in_one_line_as_it_names_no_positions_to_average():
    model = BertForSequenceClassification(small_config(classifier_pooling="mean"))
    batch = padded_batch()
    with pytest.raises(ValueError, match="classifier_pooling 'mean' averages .* got a 3-D mask"):
        model(batch["input_ids"], batch["attention_mask"][:, None, :].expand(-1, LENGTH, -1))


def test_pruned_heads_without_attention_biases_train():
    model = BertForMaskedLM(small_config(attention_bias=False, gated_ffn=True, position_embedding_type="rotary"))
    model.prune_heads({0: [1, 2]})
    assert model.bert.encoder.layer[0].attention.self.query.weight.shape == (16, 32)
    assert model.num_parameters == model.config.parameter_count() - (32 * 32 + 32 + 2 * 32 + 2)  # no pooler, NSP
    model(**padded_batch()).loss.backward()


@pytest.mark.parametrize(("overrides", "message"), [
    (dict(norm_position="sandwich"), r"unknown norm_position 'sandwich'; expected one of post, pre"),
    (dict(norm_type="batch_norm"), r"unknown norm_type 'batch_norm'"),
    (dict(classifier_pooling="max"), r"unknown classifier_pooling 'max'; expected one of pooler, cls, mean"),
    (dict(head_act="mish"), r"unknown head_act 'mish'"),
    (dict(rope_theta=0), r"rope_theta must be positive, got 0"),
    (dict(norm_type="rms_norm"), r"norm_type 'rms_norm' has no bias; set norm_bias: false"),
    (dict(first_attention_norm=False), r"first_attention_norm: false needs norm_position 'pre'"),
    (dict(local_attention_window=128), r"local_attention_window \(128\) and global_attention_every_n_layers \(1\)"),
    (dict(global_attention_every_n_layers=3), r"local_attention_window \(0\) and global_attention_every_n_layers"),
    (dict(local_attention_window=-2, global_attention_every_n_layers=3), r"local_attention_window must be an integer"),
    (dict(local_rope_theta=1e4), r"local_rope_theta applies to rotary local layers"),
    (dict(position_embedding_type="rotary", hidden_size=36), r"'rotary' needs an even head size, got .* = 9"),
])
def test_impossible_combinations_are_one_line_errors_naming_the_keys(overrides, message):
    with pytest.raises(ConfigError, match=message) as error:
        small_config(**overrides)
    assert "\n" not in str(error.value)
