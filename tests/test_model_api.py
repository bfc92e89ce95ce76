"""The Python API read against transformers 4.57's BERT (the reference; imported only in tests): eval mode
after loading, inputs_embeds, 3-D and 4-D masks, the attentions returned in training, config fields and
loading options, ModelOutput indexing, sinusoidal positions and orthogonal init, and the loss's fast path.
Parity is in float32 within TOLERANCE, as in test_model_parity."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

import bertlab
import bertlab.losses
import bertlab.model
from bertlab.errors import CheckpointError
from bertlab.model import sinusoidal_positions
from tests.factories import perturbed
from tests.test_model_parity import BATCH, LENGTH, TOLERANCE, VOCAB, max_diff, padded_pair_batch, small_config

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

POSITION_TYPES = ("absolute", "relative_key", "relative_key_query")


def inputs_of(batch: dict) -> dict[str, torch.Tensor]:
    return {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}


def assert_close(pairs: dict[str, tuple[torch.Tensor, torch.Tensor]]) -> None:
    too_far = {name: diff for name, (ours, reference) in pairs.items()
               if not (diff := max_diff(ours, reference)) <= TOLERANCE}
    assert not too_far, f"differences above {TOLERANCE}: {too_far}"


def model_pair(tmp_path, class_name: str, position_type: str = "absolute", implementation: str = "sdpa",
               seed: int = 0, **overrides):
    """A perturbed bertlab model and transformers' load of its save, both in eval mode."""
    torch.manual_seed(seed)
    ours = getattr(bertlab, class_name)(small_config(position_embedding_type=position_type, **overrides)).eval()
    perturbed(ours, seed=seed + 1)
    ours.save_pretrained(tmp_path)
    reference = getattr(transformers, class_name).from_pretrained(tmp_path, attn_implementation=implementation)
    return ours, reference.eval()


# --- 1. eval mode after loading -----------------------------------------------------------------------


@pytest.mark.parametrize("class_name", ("BertModel", "BertForMaskedLM", "BertForSequenceClassification"))
def test_a_loaded_model_is_in_eval_mode_so_two_loads_predict_alike_without_calling_eval(tmp_path, class_name):
    torch.manual_seed(0)
    getattr(bertlab, class_name)(small_config(position_embedding_type="absolute",
                                              hidden_dropout_prob=0.3)).save_pretrained(tmp_path)
    first, second = (getattr(bertlab, class_name).from_pretrained(tmp_path) for _ in range(2))
    assert not any(module.training for model in (first, second) for module in model.modules())
    inputs = inputs_of(padded_pair_batch(seed=1))
    with torch.no_grad():
        outputs = [model(**inputs)[0] for model in (first, second, first)]
    assert torch.equal(outputs[0], outputs[1]) and torch.equal(outputs[0], outputs[2])
    assert transformers.BertModel.from_pretrained(tmp_path).training is first.training


def test_fine_tuning_from_a_checkpoint_starts_in_training_mode(tmp_path, monkeypatch):
    """Lightning's fit keeps the modes it is given: the fine-tune command puts the loaded model in training."""
    from omegaconf import OmegaConf

    from bertlab.training.run import modules
    bertlab.BertForSequenceClassification(small_config(position_embedding_type="absolute")).save_pretrained(tmp_path)
    monkeypatch.setattr(modules, "init_from_overrides", lambda model_cfg: {})  # reads Hydra's command line
    model_cfg = OmegaConf.create({"init_from": str(tmp_path)})
    tokenizer = type("Tokenizer", (), {"get_vocab_size": lambda self: VOCAB})()
    model = modules.build_classifier(model_cfg, tokenizer, "its own", ["a", "b", "c"])
    assert all(module.training for module in model.modules())


# --- 2. inputs_embeds ---------------------------------------------------------------------------------


@pytest.mark.parametrize("class_name", ("BertModel", "BertForPreTraining", "BertForMaskedLM",
                                        "BertForSequenceClassification"))
def test_inputs_embeds_give_the_outputs_of_the_ids_path(class_name):
    torch.manual_seed(0)
    model = getattr(bertlab, class_name)(small_config(position_embedding_type="absolute")).eval()
    perturbed(model, seed=1)
    batch = padded_pair_batch(seed=2)
    inputs = inputs_of(batch)
    labels = {"labels": batch["mlm_labels"]} if "Masked" in class_name or "PreTraining" in class_name else {}
    with torch.no_grad():
        embeds = getattr(model, "bert", model).embeddings.word_embeddings(inputs["input_ids"])
        from_ids = model(**inputs, **labels, output_hidden_states=True)
        from_embeds = model(inputs_embeds=embeds, **{k: inputs[k] for k in ("attention_mask", "token_type_ids")},
                            **labels, output_hidden_states=True)
    assert from_ids.keys() == from_embeds.keys()
    for key in from_ids.keys():
        for ours, reference in zip(*(out[key] if isinstance(out[key], tuple) else (out[key],)
                                     for out in (from_embeds, from_ids))):
            assert torch.equal(ours, reference), key


@pytest.mark.parametrize("position_type", POSITION_TYPES)
def test_inputs_embeds_and_their_gradient_match_transformers(tmp_path, position_type):
    ours, reference = model_pair(tmp_path, "BertForMaskedLM", position_type)
    batch = padded_pair_batch(seed=3)
    pairs = {}
    results = []
    for model in (ours, reference):
        embeds = model.bert.embeddings.word_embeddings(batch["input_ids"]).detach().requires_grad_()
        out = model(inputs_embeds=embeds, attention_mask=batch["attention_mask"],
                    token_type_ids=batch["token_type_ids"], labels=batch["mlm_labels"])
        results.append((out.loss, *torch.autograd.grad(out.loss, embeds)))
    (loss, grad), (reference_loss, reference_grad) = results
    assert reference_grad.abs().sum() > 0
    pairs.update(loss=(loss, reference_loss), grad_inputs_embeds=(grad, reference_grad))
    assert_close(pairs)


@pytest.mark.parametrize(("given", "message"), [
    ({}, r"^pass input_ids \(\[batch, length\]\) or inputs_embeds \(\[batch, length, hidden_size\]\)$"),
    ({"input_ids": True, "inputs_embeds": True}, "^pass either input_ids or inputs_embeds, not both$"),
    ({"inputs_embeds": "2-D"}, r"^inputs_embeds must be \[batch, length, hidden_size=64\], got shape \(4, 64\)$"),
])
def test_neither_both_or_a_misshapen_input_is_a_one_line_error(given, message):
    model = bertlab.BertForMaskedLM(small_config(position_embedding_type="absolute"))
    ids = torch.ones(4, 8, dtype=torch.long)
    arguments = {}
    if "input_ids" in given:
        arguments["input_ids"] = ids
    if given.get("inputs_embeds") is True:
        arguments["inputs_embeds"] = torch.zeros(4, 8, 64)
    elif "inputs_embeds" in given:
        arguments["inputs_embeds"] = torch.zeros(4, 64)
    with pytest.raises(ValueError, match=message):
        model(**arguments)


# --- 3. 3-D and 4-D masks ---------------------------------------------------------------------------


def from_to_mask(batch: dict, seed: int) -> torch.Tensor:
    """[batch, from, to] 1/0: each row's key mask, and a random half of the keys hidden from each query
    (every query keeps itself)."""
    generator = torch.Generator().manual_seed(seed)
    keys = batch["attention_mask"][:, None, :].expand(-1, LENGTH, -1)
    allowed = (torch.rand(BATCH, LENGTH, LENGTH, generator=generator) < 0.5) | torch.eye(LENGTH, dtype=torch.bool)
    return (keys.bool() & allowed).long()


@pytest.mark.parametrize("implementation", ("sdpa", "eager"))
@pytest.mark.parametrize("position_type", POSITION_TYPES)
@pytest.mark.parametrize("class_name", ("BertModel", "BertForMaskedLM", "BertForSequenceClassification"))
def test_a_from_to_mask_and_its_extended_form_match_transformers(tmp_path, class_name, position_type, implementation):
    ours, reference = model_pair(tmp_path, class_name, position_type, implementation,
                                 attn_implementation=implementation)
    batch = padded_pair_batch(seed=4)
    mask = from_to_mask(batch, seed=5)
    extended = ours.get_extended_attention_mask(mask, mask.shape[:2])
    assert extended.shape == (BATCH, 1, LENGTH, LENGTH)
    # the sparse MLM head runs the last layer at the labelled rows only: their mask rows are the ones read
    labels = {"labels": batch["mlm_labels"]} if class_name == "BertForMaskedLM" else {}
    common = {"token_type_ids": batch["token_type_ids"], "input_ids": batch["input_ids"]}
    with torch.no_grad():
        expected = reference(**common, attention_mask=mask, output_hidden_states=True)
        expected_first = expected.logits[batch["mlm_labels"] != -100] if labels else expected[0]
        for name, given in (("3-D", mask), ("4-D", extended)):
            out = model_output = ours(**common, attention_mask=given, **labels)
            everything = ours(**common, attention_mask=given, output_hidden_states=True)
            pairs = {f"{name} first output": (model_output[0] if not labels else out.logits, expected_first)}
            pairs.update({f"{name} hidden_states[{i}]": pair
                          for i, pair in enumerate(zip(everything.hidden_states, expected.hidden_states))})
            assert_close(pairs)
    assert not torch.allclose(everything.hidden_states[-1],
                              ours(**common, attention_mask=batch["attention_mask"],
                                   output_hidden_states=True).hidden_states[-1])  # the mask is not a key mask


def test_transformers_extended_mask_is_taken_as_it_is(tmp_path):
    ours, reference = model_pair(tmp_path, "BertModel")
    batch = padded_pair_batch(seed=6)
    mask = from_to_mask(batch, seed=7)
    theirs = reference.get_extended_attention_mask(mask, mask.shape[:2])
    with torch.no_grad():
        assert_close({"last_hidden_state": (ours(batch["input_ids"], theirs).last_hidden_state,
                                            reference(batch["input_ids"], mask).last_hidden_state)})


@pytest.mark.parametrize(("mask", "message"), [
    (torch.ones(BATCH, LENGTH + 1), r"attention_mask must be \[batch, length\] = \[4, 24\], \[batch, from, to\] = "
                                    r"\[4, 24, 24\] or an extended \[batch, 1, from, to\] bias, got shape \[4, 25\]$"),
    (torch.ones(BATCH, 3, LENGTH), r"got shape \[4, 3, 24\]$"),
    (torch.zeros(BATCH, 4, LENGTH, LENGTH), r"got shape \[4, 4, 24, 24\]$"),
    (torch.ones(BATCH, 1, LENGTH, LENGTH), r"additive bias .*; got positive values: pass a 1/0 mask as "
                                           r"\[batch, length\] or \[batch, from, to\]$"),
    (torch.zeros(BATCH, 1, LENGTH, LENGTH, dtype=torch.bool), r"additive bias .*; got dtype torch.bool$"),
    (torch.ones(BATCH, LENGTH, LENGTH, 1), r"got shape \[4, 24, 24, 1\]$"),
])
def test_a_mask_of_the_wrong_shape_or_kind_is_a_one_line_error(mask, message):
    model = bertlab.BertModel(small_config(position_embedding_type="absolute"))
    with pytest.raises(ValueError, match=message) as error:
        model(torch.ones(BATCH, LENGTH, dtype=torch.long), mask)
    assert "\n" not in str(error.value)


# --- 4. the attentions returned in training ---------------------------------------------------------


def bernoulli_keep_mask(shape, p, device):
    """F.dropout's own draws (bernoulli_ on an fp32 tensor of the input's shape) in place of bertlab's
    cheaper CPU mask: the two libraries then drop the same entries under one seed."""
    return torch.empty(shape, device=device).bernoulli_(1 - p)


@pytest.mark.parametrize("position_type", POSITION_TYPES)
def test_training_mode_attentions_match_transformers_under_one_seed_and_the_same_dropout_draws(
        tmp_path, monkeypatch, position_type):
    ours, reference = model_pair(tmp_path, "BertForSequenceClassification", position_type,
                                 hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.3)
    monkeypatch.setattr(bertlab.model, "random_keep_mask", bernoulli_keep_mask)
    batch = padded_pair_batch(seed=8)
    head_mask = torch.tensor([1.0, 0.0, 0.5, 1.0])
    results = []
    for model in (ours.train(), reference.train()):
        torch.manual_seed(9)
        with torch.no_grad():
            results.append(model(**inputs_of(batch), head_mask=head_mask, output_attentions=True,
                                 output_hidden_states=True))
    out, expected = results
    pairs = {"logits": (out.logits, expected.logits)}
    pairs.update({f"attentions[{i}]": pair for i, pair in enumerate(zip(out.attentions, expected.attentions))})
    pairs.update({f"hidden_states[{i}]": pair for i, pair in enumerate(zip(out.hidden_states, expected.hidden_states))})
    assert_close(pairs)
    attention = out.attentions[0]
    assert (attention[:, 1] == 0).all()  # the head mask's zero
    dropped = (attention[:, (0, 2, 3)] == 0) & (batch["attention_mask"][:, None, None, :] == 1)
    assert 0.2 < dropped.float().mean() < 0.4  # dropout's zeros among the kept keys


def test_the_attentions_returned_in_training_are_the_probabilities_that_weigh_the_values():
    """With bertlab's own CPU dropout mask: each layer's context is exactly its returned attentions times its
    values."""
    torch.manual_seed(0)
    model = bertlab.BertModel(small_config(position_embedding_type="absolute",
                                           attention_probs_dropout_prob=0.3)).train()
    captured = []

    def keep(module, args, output):
        hidden_states = args[0]
        values = module._split_heads(module.value(hidden_states))
        captured.append((output[0], output[1], values))

    for layer in model.encoder.layer:
        layer.attention.self.register_forward_hook(keep)
    batch = padded_pair_batch(seed=10)
    with torch.no_grad():
        out = model(**inputs_of(batch), output_attentions=True)
    assert len(captured) == 2
    for (context, probs, values), returned in zip(captured, out.attentions):
        assert probs is returned
        rows_sum = returned.sum(-1)
        assert not torch.allclose(rows_sum, torch.ones_like(rows_sum))  # after dropout, not a distribution
        batch_size, heads, length, size = values.shape
        weighted = (returned @ values).transpose(1, 2).reshape(batch_size, length, heads * size)
        torch.testing.assert_close(context, weighted, rtol=0, atol=0)


# --- 5. config fields, loading options, outputs as ModelOutput ----------------------------------------


@pytest.mark.parametrize("class_name", ("BertModel", "BertForMaskedLM", "BertForSequenceClassification"))
def test_output_switches_passed_to_from_pretrained_act_as_in_transformers(tmp_path, class_name):
    model_pair(tmp_path, class_name)
    switches = {"output_attentions": True, "output_hidden_states": True}
    ours = getattr(bertlab, class_name).from_pretrained(tmp_path, **switches)
    reference = getattr(transformers, class_name).from_pretrained(tmp_path, **switches).eval()
    inputs = inputs_of(padded_pair_batch(seed=11))
    with torch.no_grad():
        out, expected = ours(**inputs), reference(**inputs)
        assert ours(**inputs, output_attentions=False).attentions is None  # an argument still wins
    assert len(out.attentions) == len(expected.attentions) == 2
    assert len(out.hidden_states) == len(expected.hidden_states) == 3
    assert_close({f"{key}[{i}]": pair for key in ("attentions", "hidden_states")
                  for i, pair in enumerate(zip(out[key], expected[key]))})
    assert "output_attentions" not in json.loads(ours.config.to_json_string())  # a choice of the run


@pytest.mark.parametrize("class_name", ("BertModel", "BertForPreTraining", "BertForMaskedLM",
                                        "BertForSequenceClassification"))
def test_outputs_index_by_key_and_position_as_transformers_model_outputs(tmp_path, class_name):
    ours, reference = model_pair(tmp_path, class_name)
    batch = padded_pair_batch(seed=12)
    arguments = {**inputs_of(batch), "output_hidden_states": True}
    if class_name == "BertForSequenceClassification":
        arguments["labels"] = batch["class_labels"]
    with torch.no_grad():
        out, expected = ours(**arguments), reference(**arguments)
    assert list(out.keys()) == list(expected.keys())
    assert len(out) == len(expected) and list(out) == list(expected)
    for position, key in enumerate(expected.keys()):
        assert out[position] is out[key] is getattr(out, key)
        values = zip(out[key], expected[key]) if isinstance(out[key], tuple) else [(out[key], expected[key])]
        assert_close({f"{key}[{i}]": pair for i, pair in enumerate(values)})
    assert len(out.to_tuple()) == len(expected.to_tuple()) and out[-1] is out.to_tuple()[-1]
    for absent in ("attentions", "no such field"):
        assert absent not in out
        with pytest.raises(KeyError):
            out[absent]
        with pytest.raises(KeyError):
            expected[absent]


def test_an_encoder_of_other_shapes_loads_with_ignore_mismatched_sizes_as_in_transformers(tmp_path):
    model_pair(tmp_path, "BertForMaskedLM")
    with pytest.raises(CheckpointError, match=r"do not fit the model config.*\(ignore_mismatched_sizes=True "
                                              r"re-initialises them instead\)$"):
        bertlab.BertForMaskedLM.from_pretrained(tmp_path, vocab_size=VOCAB + 10)
    ours = bertlab.BertForMaskedLM.from_pretrained(tmp_path, vocab_size=VOCAB + 10, ignore_mismatched_sizes=True)
    reference, info = transformers.BertForMaskedLM.from_pretrained(
        tmp_path, vocab_size=VOCAB + 10, ignore_mismatched_sizes=True, output_loading_info=True)
    assert sorted(key for key, _, _ in ours.load_report.mismatched) \
        == sorted(info["mismatched_keys"]) \
        == ["bert.embeddings.word_embeddings.weight", "cls.predictions.bias"]
    assert ("bert.embeddings.word_embeddings.weight", (VOCAB, 64), (VOCAB + 10, 64)) in ours.load_report.mismatched
    assert ours.load_report.missing == [] and ours.load_report.unexpected == []
    assert ours.bert.embeddings.word_embeddings.weight.shape == (VOCAB + 10, 64)


def untied_transformers_checkpoint(tmp_path):
    config = transformers.BertConfig(**json.loads(small_config(position_embedding_type="absolute",
                                                               tie_word_embeddings=False).to_json_string()))
    torch.manual_seed(13)
    reference = transformers.BertForMaskedLM(config).eval()
    perturbed(reference, seed=14)
    assert not torch.equal(reference.cls.predictions.decoder.weight, reference.bert.embeddings.word_embeddings.weight)
    reference.save_pretrained(tmp_path, safe_serialization=True)
    return reference


def test_an_untied_transformers_checkpoint_loads_untied_and_goes_back_with_identical_outputs(tmp_path):
    reference = untied_transformers_checkpoint(tmp_path / "transformers")
    ours = bertlab.BertForMaskedLM.from_pretrained(tmp_path / "transformers")
    assert ours.config.tie_word_embeddings is False and ours.load_report.complete, str(ours.load_report)
    assert "cls.predictions.decoder.weight" in dict(ours.named_parameters())
    batch = padded_pair_batch(seed=15)
    ours.save_pretrained(tmp_path / "bertlab")
    back, info = transformers.BertForMaskedLM.from_pretrained(tmp_path / "bertlab", output_loading_info=True)
    assert (info["missing_keys"], info["unexpected_keys"], info["mismatched_keys"]) == ([], [], [])
    with torch.no_grad():
        expected = reference(**inputs_of(batch)).logits
        assert_close({"logits": (ours(**inputs_of(batch)).logits, expected),
                      "logits back in transformers": (back.eval()(**inputs_of(batch)).logits, expected),
                      "loss": (ours(**inputs_of(batch), labels=batch["mlm_labels"]).loss,
                               reference(**inputs_of(batch), labels=batch["mlm_labels"]).loss)})


def test_an_untied_decoder_under_a_tied_config_is_reported_not_silently_replaced(tmp_path, caplog):
    untied_transformers_checkpoint(tmp_path)
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps({**json.loads(config_path.read_text()), "tie_word_embeddings": True}))
    with caplog.at_level("WARNING", logger="bertlab"):
        ours = bertlab.BertForMaskedLM.from_pretrained(tmp_path)
    report = ours.load_report
    assert report.unexpected == ["cls.predictions.decoder.weight"] and not report.complete
    assert "differs from the word embeddings (an untied checkpoint)" in caplog.text
    assert "tie_word_embeddings=False" in str(report)
    keeps = bertlab.BertForMaskedLM.from_pretrained(tmp_path, tie_word_embeddings=False)
    assert keeps.load_report.complete


def test_a_tied_checkpoint_with_its_decoder_copy_loads_without_a_report(tmp_path):
    torch.manual_seed(0)
    reference = transformers.BertForMaskedLM(transformers.BertConfig(
        **json.loads(small_config(position_embedding_type="absolute").to_json_string())))
    reference.config.save_pretrained(tmp_path)
    state = reference.state_dict()  # with the decoder's tied copy, which save_pretrained leaves out
    assert torch.equal(state["cls.predictions.decoder.weight"], state["bert.embeddings.word_embeddings.weight"])
    save_file({k: v.clone() for k, v in state.items()}, tmp_path / "model.safetensors")
    ours = bertlab.BertForMaskedLM.from_pretrained(tmp_path)
    assert ours.load_report.complete, str(ours.load_report)


# --- 6. sinusoidal positions, orthogonal init ---------------------------------------------------------


def test_the_sinusoidal_table_is_the_transformers_encoding():
    table = sinusoidal_positions(50, 7)
    for position in (0, 1, 13, 49):
        for i in range(7):
            angle = position / 10000 ** ((i - i % 2) / 7)
            assert table[position, i].item() == pytest.approx(math.sin(angle) if i % 2 == 0 else math.cos(angle),
                                                              abs=1e-7)


@pytest.mark.parametrize("class_name", ("BertModel", "BertForMaskedLM", "BertForSequenceClassification"))
def test_a_sinusoidal_model_stays_fixed_and_its_export_loads_in_transformers_with_identical_outputs(
        tmp_path, class_name):
    torch.manual_seed(0)
    ours = getattr(bertlab, class_name)(small_config(position_embedding_type="sinusoidal")).train()
    table = ours.bert.embeddings.position_embeddings.weight if class_name != "BertModel" \
        else ours.embeddings.position_embeddings.weight
    assert torch.equal(table, sinusoidal_positions(64, 64)) and not table.requires_grad
    batch = padded_pair_batch(seed=16)
    out = ours(**inputs_of(batch), **({"labels": batch["class_labels"]} if "Sequence" in class_name else {}))
    (out.loss if "Sequence" in class_name else out[0].sum()).backward()
    assert table.grad is None
    ours.eval().save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["position_embedding_type"] == "absolute"
    reference, info = getattr(transformers, class_name).from_pretrained(tmp_path, output_loading_info=True)
    assert (info["missing_keys"], info["unexpected_keys"]) == ([], [])
    with torch.no_grad():
        ours_out, expected = ours(**inputs_of(batch), output_hidden_states=True), \
            reference.eval()(**inputs_of(batch), output_hidden_states=True)
    assert_close({f"hidden_states[{i}]": pair for i, pair in enumerate(zip(ours_out.hidden_states,
                                                                          expected.hidden_states))}
                 | {"first output": (ours_out[0], expected[0])})
    again = getattr(bertlab, class_name).from_pretrained(tmp_path, position_embedding_type="sinusoidal")
    assert again.load_report.complete and again.config.position_embedding_type == "sinusoidal"


def test_a_learned_position_table_loaded_as_sinusoidal_is_a_one_line_error(tmp_path):
    model_pair(tmp_path, "BertModel")
    with pytest.raises(CheckpointError, match=r"position_embedding_type='sinusoidal' but the checkpoint's position "
                                              r"table is not the sinusoidal one; .*'absolute'$"):
        bertlab.BertModel.from_pretrained(tmp_path, position_embedding_type="sinusoidal")


def test_orthogonal_embedding_init_gives_orthogonal_tables_at_the_normal_inits_scale():
    torch.manual_seed(0)
    config = small_config(position_embedding_type="absolute", embedding_init="orthogonal", vocab_size=3000,
                          initializer_range=0.02)
    embeddings = bertlab.BertModel(config).embeddings
    scale = 0.02 ** 2 * 64  # squared norm of a row (tables no taller than wide): 64 entries of std 0.02
    for table in (embeddings.position_embeddings.weight, embeddings.token_type_embeddings.weight):
        torch.testing.assert_close(table @ table.T, scale * torch.eye(table.shape[0]), atol=1e-6, rtol=0)
    words = embeddings.word_embeddings.weight  # taller than wide: orthogonal columns
    assert (words[0] == 0).all()  # the padding row, as with the normal init
    torch.testing.assert_close(words.T @ words, 0.02 ** 2 * 3000 * torch.eye(64), atol=3e-3, rtol=0)
    assert words.std().item() == pytest.approx(0.02, rel=0.01)
    normal = bertlab.BertModel(small_config(position_embedding_type="absolute",
                                            vocab_size=3000)).embeddings.position_embeddings.weight
    assert (normal @ normal.T - scale * torch.eye(64)).abs().max() > 1e-3  # the default is not orthogonal


# --- 9. the loss's fast path is the default ----------------------------------------------------------


@pytest.mark.parametrize("class_name", ("BertForMaskedLM", "BertForPreTraining"))
def test_the_plain_training_call_takes_the_fused_head_and_returns_logits_without_their_graph(monkeypatch, class_name):
    fused_calls = []
    fused = bertlab.losses.linear_cross_entropy_sum  # bertlab.model looks it up there at each call
    monkeypatch.setattr(bertlab.losses, "linear_cross_entropy_sum",
                        lambda *args, **kwargs: fused_calls.append(1) or fused(*args, **kwargs))
    torch.manual_seed(0)
    model = getattr(bertlab, class_name)(small_config(position_embedding_type="absolute", hidden_dropout_prob=0.0,
                                                      attention_probs_dropout_prob=0.0)).train()
    perturbed(model, seed=17)
    batch = padded_pair_batch(seed=18)
    extra = {"next_sentence_label": batch["next_sentence_label"]} if class_name == "BertForPreTraining" else {}
    results = []
    for differentiable in (False, True):
        model.zero_grad()
        fused_calls.clear()
        out = model(**inputs_of(batch), labels=batch["mlm_labels"], differentiable_logits=differentiable, **extra)
        out.loss.backward()
        assert len(fused_calls) == (0 if differentiable else 1)
        logits = out[1]  # prediction_logits or logits
        assert logits.requires_grad is differentiable
        results.append((out.loss, logits, {name: p.grad.clone() for name, p in model.named_parameters()}))
    (loss, logits, grads), (reference_loss, reference_logits, reference_grads) = results
    pairs = {"loss": (loss, reference_loss), "logits": (logits, reference_logits)}
    pairs.update({f"grad {name}": (grad, reference_grads[name]) for name, grad in grads.items()})
    assert_close(pairs)


def test_the_plain_training_call_gives_transformers_loss_gradients_and_logits(tmp_path):
    ours, reference = model_pair(tmp_path, "BertForMaskedLM", hidden_dropout_prob=0.0,
                                 attention_probs_dropout_prob=0.0)
    batch = padded_pair_batch(seed=19)
    labels = batch["mlm_labels"]
    out = ours.train()(**inputs_of(batch), labels=labels)
    expected = reference.train()(**inputs_of(batch), labels=labels)
    out.loss.backward()
    expected.loss.backward()
    theirs = dict(reference.named_parameters())
    pairs = {"loss": (out.loss, expected.loss), "logits": (out.logits, expected.logits[labels != -100])}
    pairs.update({f"grad {name}": (p.grad, theirs[name].grad) for name, p in ours.named_parameters()})
    assert_close(pairs)


def test_logits_with_gradients_serve_a_loss_of_ones_own():
    torch.manual_seed(0)
    model = bertlab.BertForMaskedLM(small_config(position_embedding_type="absolute", hidden_dropout_prob=0.0,
                                                 attention_probs_dropout_prob=0.0)).train()
    batch = padded_pair_batch(seed=20)
    labels = batch["mlm_labels"]
    out = model(**inputs_of(batch), labels=labels, differentiable_logits=True)
    own = F.cross_entropy(out.logits, labels[labels != -100], label_smoothing=0.1)
    own.backward()
    with_labels = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad()
    full = model(**inputs_of(batch)).logits  # without labels: every position's logits, with their graph
    F.cross_entropy(full[labels != -100], labels[labels != -100], label_smoothing=0.1).backward()
    for name, parameter in model.named_parameters():
        torch.testing.assert_close(with_labels[name], parameter.grad, rtol=1e-5, atol=1e-7, msg=name)


@pytest.mark.parametrize(("position_type", "tied"), (("absolute", False), ("sinusoidal", True)))
def test_the_config_parameter_count_is_the_models_for_the_new_options(position_type, tied):
    config = small_config(position_embedding_type=position_type, tie_word_embeddings=tied)
    assert bertlab.BertForPreTraining(config).num_parameters == config.parameter_count()
