"""The scratch BERT: seeded init, init statistics, gradient checkpointing, sparse MLM, tied decoder,
head masks and pruned heads, bf16 autocast."""

from __future__ import annotations

import copy
import functools

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.core_step_time import activation_bytes, sparse_loss
from bertlab import BertForMaskedLM, BertForPreTraining, BertForSequenceClassification
from bertlab.errors import ConfigError
from bertlab.losses import IGNORE_INDEX, predicted_positions
from tests import factories

VOCAB = 200


small_config = functools.partial(factories.small_config, vocab_size=VOCAB, hidden_size=64, intermediate_size=256)


def mlm_batch(batch: int = 4, length: int = 32, seed: int = 0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, VOCAB, (batch, length), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1:, length * 3 // 4:] = 0
    input_ids[attention_mask == 0] = 0
    labels = torch.full_like(input_ids, -100)
    labelled = (torch.rand(input_ids.shape, generator=generator) < 0.15) & attention_mask.bool()
    labelled[0, 0] = True
    labels[labelled] = input_ids[labelled]
    return dict(input_ids=input_ids, attention_mask=attention_mask, labels=labels)


# --- initialisation ------------------------------------------------------------------------------


@pytest.mark.parametrize("position_type", ("absolute", "relative_key_query"))
def test_seeded_init_is_bitwise_reproducible(position_type):
    config = small_config(position_embedding_type=position_type)
    states = []
    for seed in (0, 0, 1):
        torch.manual_seed(seed)
        states.append(BertForPreTraining(config).state_dict())
    assert states[0].keys() == states[1].keys()
    assert all(torch.equal(states[0][key], states[1][key]) for key in states[0])
    assert not torch.equal(states[0]["bert.encoder.layer.0.attention.self.query.weight"],
                           states[2]["bert.encoder.layer.0.attention.self.query.weight"])


@pytest.mark.parametrize("initializer_range", (0.02, 0.05))
def test_init_statistics(initializer_range):
    torch.manual_seed(0)
    model = BertForSequenceClassification(small_config(initializer_range=initializer_range,
                                                       position_embedding_type="relative_key"))
    checked = set()
    for name, module in model.named_modules():
        if isinstance(module, (nn.Linear, nn.Embedding)):
            weight = module.weight.detach()
            if isinstance(module, nn.Embedding) and module.padding_idx is not None:
                assert torch.all(weight[module.padding_idx] == 0), name
                weight = torch.cat((weight[:module.padding_idx], weight[module.padding_idx + 1:]))
            assert weight.std().item() == pytest.approx(initializer_range, rel=0.15), name
            assert abs(weight.mean().item()) < initializer_range / 5, name
            if getattr(module, "bias", None) is not None:
                assert torch.all(module.bias == 0), name
            checked.add(type(module))
        elif isinstance(module, nn.LayerNorm):
            assert torch.all(module.weight == 1) and torch.all(module.bias == 0), name
            checked.add(nn.LayerNorm)
    assert checked == {nn.Linear, nn.Embedding, nn.LayerNorm}
    assert model.bert.embeddings.word_embeddings.padding_idx == 0


def test_mlm_bias_starts_at_zero():
    model = BertForPreTraining(small_config())
    assert torch.all(model.cls.predictions.bias == 0)


# --- gradient checkpointing --------------------------------------------------------------------------


def loss_and_grads(model: nn.Module, batch: dict, seed: int):
    model.zero_grad()
    torch.manual_seed(seed)
    loss = model(**batch).loss
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize(("dropout", "position_type"),
                         [(0.0, "absolute"), (0.1, "absolute"), (0.1, "relative_key_query")])
def test_gradient_checkpointing_gives_the_same_loss_and_gradients(dropout, position_type):
    torch.manual_seed(0)
    model = BertForMaskedLM(small_config(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
                                         position_embedding_type=position_type)).train()
    batch = mlm_batch()
    plain_loss, plain_grads = loss_and_grads(model, batch, seed=7)
    model.gradient_checkpointing_enable()
    assert model.bert.encoder.gradient_checkpointing
    checkpointed_loss, checkpointed_grads = loss_and_grads(model, batch, seed=7)
    torch.testing.assert_close(checkpointed_loss, plain_loss, rtol=0, atol=1e-6)
    for name, grad in plain_grads.items():
        torch.testing.assert_close(checkpointed_grads[name], grad, rtol=0, atol=1e-6, msg=name)
    if dropout:  # the equality above is not an accident of dropout being inactive
        _, other_seed_grads = loss_and_grads(model, batch, seed=8)
        assert not torch.allclose(other_seed_grads["bert.embeddings.word_embeddings.weight"],
                                  plain_grads["bert.embeddings.word_embeddings.weight"])


def test_gradient_checkpointing_lowers_activation_memory():
    torch.manual_seed(0)
    model = BertForMaskedLM(small_config(num_hidden_layers=3)).train()
    batch = mlm_batch(batch=4, length=48)
    without = activation_bytes(model, sparse_loss, batch)
    model.gradient_checkpointing_enable()
    with_checkpointing = activation_bytes(model, sparse_loss, batch)
    model.gradient_checkpointing_disable()
    assert activation_bytes(model, sparse_loss, batch) == without
    assert with_checkpointing < without / 4, (with_checkpointing, without)


def test_gradient_checkpointing_is_off_in_eval_and_without_grad(monkeypatch):
    model = BertForMaskedLM(small_config(gradient_checkpointing=True))
    calls = []
    monkeypatch.setattr("bertlab.model.checkpoint", lambda *args, **kwargs: calls.append(1))
    model.eval()(**mlm_batch())
    with torch.no_grad():
        model.train()(**mlm_batch())
    assert calls == []


# --- sparse masked-LM prediction ---------------------------------------------------------------------


def test_mlm_logits_are_computed_only_at_labelled_positions():
    torch.manual_seed(0)
    model = BertForMaskedLM(small_config()).eval()
    batch = mlm_batch()
    labels = batch["labels"]
    rows_seen = []
    model.cls.predictions.transform.register_forward_hook(lambda m, args, out: rows_seen.append(args[0].shape))
    with torch.no_grad():
        sparse = model(**batch)
        full = model(batch["input_ids"], batch["attention_mask"])
    selected = labels != -100
    assert rows_seen[0] == (int(selected.sum()), 64)  # the head never saw unlabelled positions
    assert rows_seen[1] == (4, 32, 64)
    assert sparse.logits.shape == (int(selected.sum()), VOCAB)
    assert full.logits.shape == (4, 32, VOCAB)
    torch.testing.assert_close(sparse.logits, full.logits[selected])  # row-major order of labels != -100
    expected = F.cross_entropy(full.logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
    torch.testing.assert_close(sparse.loss, expected)


def last_layer_rows_asserting_the_full_layers_results(model: nn.Module, forward) -> list[tuple[int, ...]]:
    """Runs `forward(output_hidden_states)` (→ output, logits) with the last layer only where the loss reads it
    (False) and everywhere (True: every layer's hidden states asked for), asserts the same loss, logits and
    gradients, and returns the shapes the last layer's feed-forward saw."""
    rows_seen = []
    model.bert.encoder.layer[-1].intermediate.register_forward_hook(
        lambda module, args, out: rows_seen.append(tuple(args[0].shape)))
    results = []
    for every_position in (False, True):
        model.zero_grad()
        out, logits = forward(every_position)
        out.loss.backward()
        grads = {name: p.grad.clone() for name, p in model.named_parameters()}
        results.append((out.loss.detach(), logits.detach(), grads))
    (loss, logits, grads), (full_loss, full_logits, full_grads) = results
    torch.testing.assert_close(loss, full_loss)
    torch.testing.assert_close(logits, full_logits)
    for name, grad in full_grads.items():
        torch.testing.assert_close(grads[name], grad, rtol=1e-5, atol=1e-7, msg=name)
    return rows_seen


@pytest.mark.parametrize("position_type", ("absolute", "relative_key", "relative_key_query"))
@pytest.mark.parametrize("predictions_per_row", (None, 9))
@pytest.mark.parametrize("model_class", (BertForMaskedLM, BertForPreTraining))
def test_the_last_layer_runs_only_where_the_head_predicts_and_changes_nothing(model_class, predictions_per_row,
                                                                             position_type):
    torch.manual_seed(0)
    model = model_class(small_config(position_embedding_type=position_type, hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0)).train()
    batch = mlm_batch()
    if model_class is BertForPreTraining:
        batch["next_sentence_label"] = torch.tensor([0, 1, 1, 0])

    def forward(every_position: bool):
        out = model(**batch, predictions_per_row=predictions_per_row, output_hidden_states=every_position)
        return out, out.logits if model_class is BertForMaskedLM else out.prediction_logits

    rows_seen = last_layer_rows_asserting_the_full_layers_results(model, forward)
    per_row = predictions_per_row or int((batch["labels"] != -100).sum(dim=1).max())
    with_cls = int(model_class is BertForPreTraining)  # the pooler's [CLS]
    assert rows_seen == [(4, per_row + with_cls, 64), (4, 32, 64)]


@pytest.mark.parametrize("position_type", ("absolute", "relative_key_query"))
def test_a_classifiers_last_layer_runs_only_at_cls_and_changes_nothing(position_type):
    torch.manual_seed(0)
    model = BertForSequenceClassification(small_config(position_embedding_type=position_type, num_labels=3,
                                                       hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    batch = mlm_batch()

    def forward(every_position: bool):
        out = model(batch["input_ids"], batch["attention_mask"], labels=torch.tensor([0, 2, 1, 1]),
                    output_hidden_states=every_position)
        return out, out.logits

    assert last_layer_rows_asserting_the_full_layers_results(model, forward) == [(4, 1, 64), (4, 32, 64)]


@pytest.mark.parametrize("model_class", (BertForMaskedLM, BertForPreTraining))
def test_batch_without_labelled_positions_gives_zero_loss_not_nan(model_class):
    model = model_class(small_config()).train()
    batch = mlm_batch()
    batch["labels"] = torch.full_like(batch["labels"], -100)
    out = model(**batch)
    logits = out.logits if model_class is BertForMaskedLM else out.prediction_logits
    loss = out.loss if model_class is BertForMaskedLM else out.mlm_loss
    assert logits.shape == (0, VOCAB)
    assert loss.item() == 0.0 and loss.requires_grad
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


@pytest.mark.parametrize("model_class", (BertForMaskedLM, BertForPreTraining))
def test_loss_only_forward_gives_the_loss_and_gradients_of_the_logits_path(model_class):
    torch.manual_seed(0)
    model = model_class(small_config()).train()
    batch = mlm_batch()
    results = []
    for return_logits in (True, False):
        model.zero_grad()
        torch.manual_seed(1)  # the same dropout masks
        out = model(**batch, next_sentence_label=torch.tensor([0, 1, 1, 0]), return_logits=return_logits) \
            if model_class is BertForPreTraining else model(**batch, return_logits=return_logits)
        out.loss.backward()
        logits = out.logits if model_class is BertForMaskedLM else out.prediction_logits
        assert (logits is None) != return_logits
        grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
        results.append((out.loss.detach(), grads))
    (loss, grads), (loss_only, grads_only) = results
    torch.testing.assert_close(loss_only, loss)
    assert grads_only.keys() == grads.keys() == {name for name, _ in model.named_parameters()}
    for name, grad in grads.items():
        torch.testing.assert_close(grads_only[name], grad, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("return_logits", (True, False))
@pytest.mark.parametrize("model_class", (BertForMaskedLM, BertForPreTraining))
def test_a_static_prediction_block_gives_the_loss_and_gradients_of_the_labelled_positions(model_class, return_logits):
    torch.manual_seed(0)
    # No dropout: the last layer's masks are drawn for the block, whose width differs between the two.
    model = model_class(small_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)).train()
    batch = mlm_batch()
    labelled = batch["labels"] != -100
    per_row = int(labelled.sum(dim=1).max()) + 2  # filler positions in every row
    results = []
    for predictions_per_row in (None, per_row):
        model.zero_grad()
        out = model(**batch, return_logits=return_logits, predictions_per_row=predictions_per_row)
        loss = out.loss if model_class is BertForMaskedLM else out.mlm_loss
        loss.backward()
        logits = out.logits if model_class is BertForMaskedLM else out.prediction_logits
        grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
        results.append((loss.detach(), logits, grads))
    (loss, logits, grads), (static_loss, static_logits, static_grads) = results
    torch.testing.assert_close(static_loss, loss)
    assert static_grads.keys() == grads.keys()
    for name, grad in grads.items():
        torch.testing.assert_close(static_grads[name], grad, rtol=1e-5, atol=1e-7, msg=name)
    if return_logits:
        assert static_logits.shape == (4 * per_row, VOCAB)
        targets = batch["labels"].gather(1, predicted_positions(batch["labels"], per_row)).flatten()
        torch.testing.assert_close(static_logits[targets != -100], logits)  # each row's labels first, in order


def test_pretraining_loss_is_mlm_plus_nsp():
    model = BertForPreTraining(small_config()).eval()
    batch = mlm_batch()
    nsp = torch.tensor([0, 1, 1, 0])
    out = model(**batch, next_sentence_label=nsp)
    torch.testing.assert_close(out.loss, out.mlm_loss + out.nsp_loss)
    torch.testing.assert_close(out.nsp_loss, F.cross_entropy(out.seq_relationship_logits, nsp))
    assert model(**batch).nsp_loss is None
    without_labels = model(batch["input_ids"], batch["attention_mask"])
    assert without_labels.loss is None and without_labels.prediction_logits.shape == (4, 32, VOCAB)


# --- tied decoder ---------------------------------------------------------------------------------------


def test_decoder_is_tied_to_word_embeddings_and_gradients_flow_through_both_uses():
    torch.manual_seed(0)
    model = BertForMaskedLM(small_config()).train()
    names = {name for name, _ in model.named_parameters()}
    assert not any("decoder" in name for name in names)
    assert "cls.predictions.bias" in names
    embeddings = model.bert.embeddings.word_embeddings.weight
    assert model.num_parameters == sum(p.numel() for p in model.parameters())

    batch = mlm_batch()
    unused_token = 3  # never an input id (inputs are >= 5 or padding 0); only the decoder reads its row
    batch["labels"][0, 0] = unused_token
    model(**batch).loss.backward()
    assert embeddings.grad[unused_token].abs().sum() > 0
    assert model.cls.predictions.bias.grad[unused_token] < 0  # a target: descent raises its logit

    with torch.no_grad():
        before = model.eval()(batch["input_ids"]).logits
        embeddings[unused_token] += torch.randn(64)  # not a constant: LayerNorm outputs sum to 0
        after = model(batch["input_ids"]).logits
    changed = (before - after).abs().amax(dim=(0, 1)) > 1e-6
    assert changed.nonzero().flatten().tolist() == [unused_token]  # the decoder reads the live table


def test_multi_label_problem_type_uses_binary_cross_entropy():
    torch.manual_seed(0)
    model = BertForSequenceClassification(small_config(num_labels=3, problem_type="multi_label_classification"))
    batch = mlm_batch()
    targets = torch.tensor([[1, 0, 1], [0, 0, 0], [1, 1, 1], [0, 1, 0]], dtype=torch.float)
    out = model.eval()(batch["input_ids"], batch["attention_mask"], labels=targets)
    torch.testing.assert_close(out.loss, F.binary_cross_entropy_with_logits(out.logits, targets))


def test_deepcopy_and_dtype_conversion_keep_the_decoder_tied():
    torch.manual_seed(0)
    model = BertForMaskedLM(small_config()).eval()
    input_ids = mlm_batch()["input_ids"]
    clone = copy.deepcopy(model).double()
    with torch.no_grad():
        before = model(input_ids).logits
        clone.bert.embeddings.word_embeddings.weight[3] += torch.randn(64, dtype=torch.float64)  # never an input
        after = clone(input_ids).logits
    assert after.dtype == torch.float64
    assert torch.equal(model(input_ids).logits, before)  # the original is untouched
    changed = (after - before.double()).abs().amax(dim=(0, 1)) > 1e-6
    assert changed.nonzero().flatten().tolist() == [3]


def test_layers_do_not_share_activation_modules():
    model = BertForMaskedLM(small_config(num_hidden_layers=3))
    activations = [layer.intermediate.activation for layer in model.bert.encoder.layer]
    activations.append(model.cls.predictions.transform.activation)
    assert len({id(module) for module in activations}) == 4


# --- head_mask and pruned heads -----------------------------------------------------------------------


@pytest.mark.parametrize(("shape", "expected"), [((3,), r"\[3\]"), ((2, 4, 1), r"\[2, 4, 1\]"), ((3, 4), r"\[3, 4\]")])
def test_a_head_mask_of_the_wrong_shape_names_the_expected_shapes(shape, expected):
    model = BertForSequenceClassification(small_config())
    message = (r"head_mask must have shape \[num_attention_heads\] = \[4\] or \[num_hidden_layers, "
               rf"num_attention_heads\] = \[2, 4\], got {expected}")
    with pytest.raises(ValueError, match=message):
        model(mlm_batch()["input_ids"], head_mask=torch.ones(shape))


@pytest.mark.parametrize("model_class", (BertForMaskedLM, BertForPreTraining, BertForSequenceClassification))
def test_every_model_class_takes_a_head_mask(model_class):
    torch.manual_seed(0)
    model = model_class(small_config()).eval()
    input_ids = mlm_batch()["input_ids"]
    head_mask = torch.tensor([1.0, 0.0, 0.5, 1.0])
    with torch.no_grad():
        plain, ones, masked = (model(input_ids, head_mask=mask, output_hidden_states=True).hidden_states[-1]
                               for mask in (None, torch.ones(4), head_mask))
        assert torch.equal(masked, model.bert(input_ids, head_mask=head_mask).last_hidden_state)
    torch.testing.assert_close(ones, plain, rtol=0, atol=1e-6)
    assert (masked - plain).abs().max() > 1e-2


@pytest.mark.parametrize("position_type", ("absolute", "relative_key"))
def test_head_mask_gradient_is_the_same_with_gradient_checkpointing(position_type):
    torch.manual_seed(0)
    model = BertForMaskedLM(small_config(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                                         position_embedding_type=position_type)).train()
    batch = mlm_batch()
    results = []
    for enabled in (False, True):
        model.gradient_checkpointing_enable(enabled)
        model.zero_grad()
        head_mask = torch.ones(2, 4, requires_grad=True)
        torch.manual_seed(7)  # the same dropout masks
        model(**batch, head_mask=head_mask).loss.backward()
        results.append((head_mask.grad, model.bert.embeddings.word_embeddings.weight.grad.clone()))
    (plain_mask, plain_embeddings), (checkpointed_mask, checkpointed_embeddings) = results
    assert plain_mask.abs().min() > 0
    torch.testing.assert_close(checkpointed_mask, plain_mask, rtol=0, atol=1e-6)
    torch.testing.assert_close(checkpointed_embeddings, plain_embeddings, rtol=0, atol=1e-6)


@pytest.mark.parametrize("position_type", ("absolute", "relative_key", "relative_key_query"))
@pytest.mark.parametrize("fused_qkv", (True, False))
def test_pruned_heads_are_removed_from_the_matrices_and_equal_a_zero_head_mask(position_type, fused_qkv):
    config = small_config(position_embedding_type=position_type, fused_qkv=fused_qkv)
    torch.manual_seed(0)
    model = BertForSequenceClassification(config).eval()
    input_ids, attention_mask = mlm_batch()["input_ids"], mlm_batch()["attention_mask"]
    head_mask = torch.tensor([[1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]])  # layer 1 loses every head
    with torch.no_grad():
        masked = model(input_ids, attention_mask, head_mask=head_mask, output_attentions=True)
    model.prune_heads({0: [1, 3], 1: [0, 1, 2, 3]})
    assert config.pruned_heads == {0: [1, 3], 1: [0, 1, 2, 3]}
    layers = [layer.attention for layer in model.bert.encoder.layer]
    assert [attention.self.num_heads for attention in layers] == [2, 0]
    assert [attention.pruned_heads for attention in layers] == [{1, 3}, {0, 1, 2, 3}]
    assert layers[0].self.query.weight.shape == (32, 64) and layers[0].self.value.bias.shape == (32,)
    assert layers[0].output.dense.weight.shape == (64, 32) and layers[1].output.dense.weight.shape == (64, 0)
    if position_type != "absolute":
        assert layers[1].self.distance_embedding.weight.shape == (127, 16)  # head_size, unchanged
    with torch.no_grad():
        pruned = model(input_ids, attention_mask, output_attentions=True)
    torch.testing.assert_close(pruned.logits, masked.logits, rtol=0, atol=1e-6)
    torch.testing.assert_close(pruned.attentions[0], masked.attentions[0][:, [0, 2]], rtol=0, atol=1e-6)
    assert pruned.attentions[1].shape == (4, 0, 32, 32)


@pytest.mark.parametrize("position_type", ("absolute", "relative_key_query"))
def test_the_config_parameter_count_is_the_pruned_models(position_type):
    config = small_config(position_embedding_type=position_type)
    model = BertForPreTraining(config)
    assert model.num_parameters == config.parameter_count()
    model.prune_heads({0: [2], 1: [0, 1, 2, 3]})
    assert model.num_parameters == config.parameter_count()
    assert BertForPreTraining(config).num_parameters == config.parameter_count()  # built pruned from the config


def test_pruning_again_numbers_heads_as_in_the_unpruned_model_and_keeps_the_union():
    torch.manual_seed(0)
    once = BertForMaskedLM(small_config()).eval()
    twice = copy.deepcopy(once)
    once.prune_heads({0: [1, 2], 1: [3]})
    twice.prune_heads({0: [1]})
    twice.prune_heads({0: [1, 2], 1: [3]})  # head 1 again is skipped; 2 is the unpruned model's head 2
    assert once.config.pruned_heads == twice.config.pruned_heads == {0: [1, 2], 1: [3]}
    for key, tensor in once.state_dict().items():
        assert torch.equal(twice.state_dict()[key], tensor), key


def test_a_model_built_from_a_config_with_pruned_heads_is_pruned():
    model = BertForPreTraining(small_config(pruned_heads={"1": [3, 0]}))  # JSON's string keys
    assert model.config.pruned_heads == {1: [0, 3]}
    assert [layer.attention.self.num_heads for layer in model.bert.encoder.layer] == [4, 2]
    assert model.bert.encoder.layer[1].attention.self.key.weight.shape == (32, 64)


@pytest.mark.parametrize("heads", [{2: [0]}, {0: [4]}, {-1: [0]}])
def test_pruning_a_head_the_model_does_not_have_is_an_error_and_changes_nothing(heads):
    model = BertForMaskedLM(small_config())
    before = {key: tensor.shape for key, tensor in model.state_dict().items()}
    with pytest.raises(ConfigError, match=r"pruned_heads .* names a layer or head the model does not have "
                                          r"\(layers 0-1, heads 0-3\)"):
        model.prune_heads(heads)
    assert model.config.pruned_heads == {}
    assert {key: tensor.shape for key, tensor in model.state_dict().items()} == before


def test_a_head_mask_on_a_pruned_model_is_a_clear_error():
    model = BertForSequenceClassification(small_config())
    model.prune_heads({0: [1]})
    with pytest.raises(ConfigError, match=r"head_mask cannot apply to a model with pruned heads "
                                          r"\(config.pruned_heads = \{0: \[1\]\}\)"):
        model(mlm_batch()["input_ids"], head_mask=torch.ones(2, 4))


def test_a_pruned_model_trains():
    torch.manual_seed(0)
    model = BertForMaskedLM(small_config(gradient_checkpointing=True)).train()
    model.prune_heads({0: [0, 1, 2, 3], 1: [1]})
    model(**mlm_batch()).loss.backward()
    query = model.bert.encoder.layer[1].attention.self.query
    assert query.weight.grad.shape == (48, 64) and query.weight.grad.abs().sum() > 0
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


@pytest.mark.parametrize("low_precision_residual", (True, False))
def test_the_residual_stream_takes_autocasts_dtype_only_when_switched_on(low_precision_residual):
    torch.manual_seed(0)
    model = BertForMaskedLM(small_config(low_precision_residual=low_precision_residual)).eval()
    input_ids = torch.randint(5, 99, (2, 12))
    with torch.no_grad():
        fp32 = model(input_ids, output_hidden_states=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            mixed = model(input_ids, output_hidden_states=True)
    assert {hidden.dtype for hidden in fp32.hidden_states} == {torch.float32}
    expected = torch.bfloat16 if low_precision_residual else torch.float32
    assert {hidden.dtype for hidden in mixed.hidden_states} == {expected}
    # Normalised in fp32 either way: the bf16 stream differs from fp32 by bf16's rounding, not more.
    for mixed_hidden, fp32_hidden in zip(mixed.hidden_states, fp32.hidden_states):
        torch.testing.assert_close(mixed_hidden.float(), fp32_hidden, atol=0.1, rtol=0.05)


def test_bf16_autocast_keeps_the_mlm_loss_and_gradients_close_to_fp32():
    # The benchmark's "bf16" rows train under torch.autocast (Lightning's bf16-mixed): a fast path
    # on CPUs with AMX / AVX512-BF16, which must still train the same model.
    torch.manual_seed(0)
    # initializer_range=0.2: far from uniform predictions, so precision shows in the loss
    config = factories.small_config(vocab_size=300, num_attention_heads=2, max_position_embeddings=512,
                                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, initializer_range=0.2)
    model = BertForMaskedLM(config).train()
    input_ids = torch.randint(5, 300, (4, 24))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 18:] = 0
    labels = torch.where(torch.rand(input_ids.shape) < 0.3, input_ids, IGNORE_INDEX)

    def loss_and_gradient(dtype):
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
            output = model(input_ids, attention_mask, labels=labels)
        output.loss.backward()
        assert output.logits.dtype == dtype
        return output.loss.detach(), torch.cat([p.grad.flatten() for p in model.parameters()])

    loss32, grad32 = loss_and_gradient(torch.float32)
    loss16, grad16 = loss_and_gradient(torch.bfloat16)
    assert loss16.dtype == torch.float32  # the loss itself is computed in fp32
    assert loss16 == pytest.approx(loss32.item(), rel=1e-2)
    assert torch.nn.functional.cosine_similarity(grad16, grad32, dim=0) > 0.99
