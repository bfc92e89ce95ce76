"""Numerical parity with Hugging Face transformers (the reference; imported only here), both ways
through save_pretrained/from_pretrained, for every position embedding type and model class.

The module prints a table of the largest differences at the end of the run.
"""

from __future__ import annotations

import dataclasses
import functools
import json

import pytest
import torch
import torch.nn.functional as F

import bertlab
from bertlab.checkpoint.dispatch import export_pretrained
from bertlab.tokenizer import train_tokenizer
from tests import factories
from tests.factories import perturbed

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()  # relative models load without the unused absolute table

TOLERANCE = 1e-5
POSITION_TYPES = ("absolute", "relative_key", "relative_key_query")
CLASSES = ("BertModel", "BertForPreTraining", "BertForMaskedLM", "BertForSequenceClassification",
           "BertForTokenClassification")
VOCAB, BATCH, LENGTH = 300, 4, 24


small_config = functools.partial(factories.small_config, vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                                 num_labels=3)


def padded_pair_batch(seed: int) -> dict[str, torch.Tensor]:
    """Two segments per row ([CLS] a [SEP] b [SEP] as type 0 then 1), right padding of varied length."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, VOCAB, (BATCH, LENGTH), generator=generator)
    token_type_ids = torch.zeros_like(input_ids)
    attention_mask = torch.zeros_like(input_ids)
    for row, length in enumerate((LENGTH, 17, 9, 20)):
        attention_mask[row, :length] = 1
        token_type_ids[row, length // 2:length] = 1
        input_ids[row, length:] = 0
    mlm_labels = torch.full_like(input_ids, -100)
    labelled = (torch.rand(input_ids.shape, generator=generator) < 0.2) & attention_mask.bool()
    mlm_labels[labelled] = input_ids[labelled]
    batch = dict(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                 mlm_labels=mlm_labels,
                 next_sentence_label=torch.randint(0, 2, (BATCH,), generator=generator),
                 class_labels=torch.randint(0, 3, (BATCH,), generator=generator),
                 regression_labels=torch.randn(BATCH, generator=generator))
    # A tag per real position, -100 on padding and on a fifth of the rest (a word's later pieces).
    token_labels = torch.randint(0, 3, (BATCH, LENGTH), generator=generator)
    token_labels[(torch.rand(input_ids.shape, generator=generator) < 0.2) | ~attention_mask.bool()] = -100
    # Answer spans; the last row's lies past the sequence (clamped and ignored, as transformers does).
    spans = {"start_positions": torch.tensor([3, 0, 2, LENGTH + 5]), "end_positions": torch.tensor([6, 0, 8, LENGTH + 7])}
    return batch | {"token_labels": token_labels} | spans


def max_diff(ours: torch.Tensor, reference: torch.Tensor) -> float:
    assert ours.shape == reference.shape, (ours.shape, reference.shape)
    return (ours.detach().double() - reference.detach().double()).abs().max().item()


COLUMNS = ("hidden", "outputs", "losses", "attentions", "grads")


def column(quantity: str) -> str:
    if "hidden" in quantity:
        return "hidden"
    if "loss" in quantity:
        return "losses"
    if quantity.startswith(("attentions", "grad")):
        return "attentions" if quantity.startswith("attentions") else "grads"
    return "outputs"  # pooler output and logits


@pytest.fixture(scope="module")
def parity_rows(request):
    """Collects {case: {column: max |diff|}} and prints one table after the module (also under -q)."""
    rows: dict[str, dict[str, float]] = {}
    yield rows
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(f"\n\nParity with transformers {transformers.__version__}: max |diff| in float32 "
              f"(tolerance {TOLERANCE:g}; hidden = every layer's hidden states; outputs = pooled "
              f"output / logits; - = not applicable)")
        print(f"{'case':<68}" + "".join(f"{name:>11}" for name in COLUMNS))
        for case, diffs in rows.items():
            print(f"{case:<68}" + "".join(
                f"{diffs[name]:>11.1e}" if name in diffs else f"{'-':>11}" for name in COLUMNS))


def compare(rows, case: str, pairs: dict[str, tuple[torch.Tensor, torch.Tensor]]) -> None:
    diffs = {name: max_diff(ours, reference) for name, (ours, reference) in pairs.items()}
    row = rows.setdefault(case, {})
    for name, diff in diffs.items():
        row[column(name)] = max(row.get(column(name), 0.0), diff)
    too_far = {name: diff for name, diff in diffs.items() if not diff <= TOLERANCE}
    assert not too_far, f"{case}: differences above {TOLERANCE}: {too_far}"


def outputs(model, class_name: str, batch: dict, regression: bool = False) -> dict[str, torch.Tensor]:
    """Every compared quantity of one model (bertlab or transformers) on one batch, named alike.
    bertlab's MLM logits are sparse when labels are given, transformers' always cover every
    position: both become a (sparse, full) pair. Attention probabilities come from a second pass,
    because asking for them switches both libraries to eager attention and the first pass must
    check the SDPA path."""
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    labels, nsp = batch["mlm_labels"], batch["next_sentence_label"]
    result = {}
    with torch.no_grad():
        if class_name == "BertModel":
            out = model(**inputs, output_hidden_states=True)
            result.update(last_hidden_state=out.last_hidden_state, pooler_output=out.pooler_output)
        elif class_name == "BertForSequenceClassification":
            out = model(**inputs, labels=batch["regression_labels" if regression else "class_labels"],
                        output_hidden_states=True)
            result.update({"logits": out.logits, "loss(mse)" if regression else "loss(ce)": out.loss})
        elif class_name == "BertForQuestionAnswering":
            out = model(**inputs, start_positions=batch["start_positions"], end_positions=batch["end_positions"],
                        output_hidden_states=True)
            real = batch["attention_mask"].bool()
            result.update({"start_logits": out.start_logits[real], "end_logits": out.end_logits[real],
                           "loss(span)": out.loss})
        elif class_name == "BertForTokenClassification":
            out = model(**inputs, labels=batch["token_labels"], output_hidden_states=True)
            result.update({"logits": out.logits[batch["attention_mask"].bool()], "loss(ce)": out.loss})
        else:
            pretraining = class_name == "BertForPreTraining"
            out = model(**inputs, labels=labels, output_hidden_states=True,
                        **({"next_sentence_label": nsp} if pretraining else {}))
            logits = out.prediction_logits if pretraining else out.logits
            if logits.dim() == 3:  # transformers
                full, sparse = logits, logits[labels != -100]
            else:
                no_labels = model(**inputs)
                full, sparse = (no_labels.prediction_logits if pretraining else no_labels.logits), logits
            result.update({"mlm_logits(sparse)": sparse, "mlm_logits(full)": full, "loss": out.loss})
            if pretraining:
                result["seq_relationship_logits"] = out.seq_relationship_logits
                result["mlm_loss"] = getattr(out, "mlm_loss", None)
                if result["mlm_loss"] is None:
                    result["mlm_loss"] = F.cross_entropy(full.flatten(0, 1), labels.flatten())
                result["nsp_loss"] = getattr(out, "nsp_loss", None)
                if result["nsp_loss"] is None:
                    result["nsp_loss"] = F.cross_entropy(out.seq_relationship_logits, nsp)
        assert len(out.hidden_states) == model.config.num_hidden_layers + 1
        result.update({f"hidden_states[{i}]": h for i, h in enumerate(out.hidden_states)})
        attentions = model(**inputs, output_attentions=True).attentions
        result.update({f"attentions[{i}]": a for i, a in enumerate(attentions)})
    return result


def paired(ours: dict, reference: dict) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    assert ours.keys() == reference.keys()
    return {name: (ours[name], reference[name]) for name in ours}


def count_sdpa_calls(monkeypatch) -> list:
    """A list that grows by one each time F.scaled_dot_product_attention is called."""
    calls = []
    sdpa_function = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention",
                        lambda *args, **kwargs: calls.append(1) or sdpa_function(*args, **kwargs))
    return calls


@pytest.mark.parametrize("position_type", POSITION_TYPES)
@pytest.mark.parametrize("class_name", CLASSES)
def test_bertlab_checkpoint_loads_in_transformers_with_identical_outputs(
        tmp_path, parity_rows, position_type, class_name):
    torch.manual_seed(0)
    ours = getattr(bertlab, class_name)(small_config(position_embedding_type=position_type)).eval()
    perturbed(ours, seed=1)
    ours.save_pretrained(tmp_path)
    batch = padded_pair_batch(seed=2)
    expected = outputs(ours, class_name, batch)
    for implementation in ("eager", "sdpa"):
        reference = getattr(transformers, class_name).from_pretrained(
            tmp_path, attn_implementation=implementation).eval()
        compare(parity_rows, f"bertlab->HF {class_name} {position_type} HF-{implementation}",
                paired(expected, outputs(reference, class_name, batch)))


@pytest.mark.parametrize("position_type", POSITION_TYPES)
def test_regression_head_matches_transformers(tmp_path, parity_rows, position_type):
    torch.manual_seed(0)
    ours = bertlab.BertForSequenceClassification(small_config(position_embedding_type=position_type,
                                                              num_labels=1)).eval()
    perturbed(ours, seed=3)
    ours.save_pretrained(tmp_path)
    reference = transformers.BertForSequenceClassification.from_pretrained(tmp_path).eval()
    assert reference.config.num_labels == 1
    batch = padded_pair_batch(seed=4)
    compare(parity_rows, f"bertlab->HF regression {position_type}",
            paired(*(outputs(m, "BertForSequenceClassification", batch, regression=True)
                     for m in (ours, reference))))


@pytest.mark.parametrize("position_type", POSITION_TYPES)
@pytest.mark.parametrize("class_name", CLASSES)
def test_transformers_checkpoint_loads_in_bertlab_with_identical_outputs(
        tmp_path, parity_rows, position_type, class_name):
    config = transformers.BertConfig(**json.loads(small_config(position_embedding_type=position_type).to_json_string()))
    torch.manual_seed(5)
    reference = getattr(transformers, class_name)(config).eval()
    perturbed(reference, seed=6)
    reference.save_pretrained(tmp_path, safe_serialization=True)
    ours = getattr(bertlab, class_name).from_pretrained(tmp_path).eval()
    assert ours.config.position_embedding_type == position_type
    assert ours.load_report.complete, str(ours.load_report)
    batch = padded_pair_batch(seed=7)
    compare(parity_rows, f"HF->bertlab {class_name} {position_type}",
            paired(outputs(ours, class_name, batch), outputs(reference, class_name, batch)))


@pytest.mark.parametrize("position_type", ("relative_key", "relative_key_query"))
def test_relative_positions_through_sdpa_match_eager_including_gradients(
        parity_rows, position_type, monkeypatch):
    config = small_config(position_embedding_type=position_type, hidden_dropout_prob=0.0,
                          attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    sdpa = bertlab.BertForMaskedLM(config).train()
    perturbed(sdpa, seed=8)
    eager = bertlab.BertForMaskedLM(dataclasses.replace(config, attn_implementation="eager")).train()
    eager.load_state_dict(sdpa.state_dict())
    batch = padded_pair_batch(seed=9)
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    calls = count_sdpa_calls(monkeypatch)
    losses = [model(**inputs, labels=batch["mlm_labels"]).loss for model in (sdpa, eager)]
    assert len(calls) == config.num_hidden_layers  # the sdpa model used it in every layer, eager never
    for loss in losses:
        loss.backward()
    pairs = {"loss": (losses[0], losses[1])}
    grads_sdpa = dict(sdpa.named_parameters())
    grads_eager = dict(eager.named_parameters())
    for name, parameter in grads_sdpa.items():
        assert parameter.grad is not None, name
        group = ("grad distance_embedding" if "distance_embedding" in name
                 else "grad query" if "self.query" in name else "grad other")
        pairs[f"{group}[{name}]"] = (parameter.grad, grads_eager[name].grad)
    distance = grads_sdpa["bert.encoder.layer.0.attention.self.distance_embedding.weight"].grad
    assert distance.abs().sum() > 0
    compare(parity_rows, f"bertlab sdpa vs eager, train, {position_type}", pairs)


@pytest.mark.parametrize("position_type", POSITION_TYPES)
def test_fused_qkv_projection_matches_separate_projections(parity_rows, position_type):
    config = small_config(position_embedding_type=position_type, hidden_dropout_prob=0.0,
                          attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    fused = bertlab.BertForPreTraining(config).train()
    perturbed(fused, seed=10)
    separate = bertlab.BertForPreTraining(dataclasses.replace(config, fused_qkv=False)).train()
    separate.load_state_dict(fused.state_dict())
    batch = padded_pair_batch(seed=11)
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    results = []
    for model in (fused, separate):
        out = model(**inputs, labels=batch["mlm_labels"], next_sentence_label=batch["next_sentence_label"])
        out.loss.backward()
        results.append(out)
    pairs = {"prediction_logits": (results[0].prediction_logits, results[1].prediction_logits),
             "loss": (results[0].loss, results[1].loss)}
    separate_parameters = dict(separate.named_parameters())
    for name, parameter in fused.named_parameters():
        pairs[f"grads[{name}]"] = (parameter.grad, separate_parameters[name].grad)
    compare(parity_rows, f"bertlab fused_qkv vs separate, train, {position_type}", pairs)


# --- head_mask and pruned heads ---------------------------------------------------------------------

HEAD_MASKS = {
    "1-D 0/1": torch.tensor([1.0, 0.0, 1.0, 1.0]),
    "2-D 0/1": torch.tensor([[0.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 1.0]]),
    "1-D soft": torch.tensor([0.3, 1.0, 0.0, 0.7]),
    "2-D soft": torch.tensor([[0.9, 0.2, 0.5, 1.0], [0.0, 0.6, 1.3, 0.4]]),
}


def masked_outputs(model, class_name: str, inputs: dict, head_mask: torch.Tensor, mask_name: str):
    """Outputs and every hidden state under `head_mask`, and the attentions from a second pass."""
    with torch.no_grad():
        out = model(**inputs, head_mask=head_mask, output_hidden_states=True)
        result = {"logits": out.logits} if class_name == "BertForSequenceClassification" else {
            "last_hidden_state": out.last_hidden_state, "pooler_output": out.pooler_output}
        result.update({f"hidden_states[{i}]": h for i, h in enumerate(out.hidden_states)})
        attentions = model(**inputs, head_mask=head_mask, output_attentions=True).attentions
        result.update({f"attentions[{i}]": a for i, a in enumerate(attentions)})
    return {f"{name} ({mask_name})": value for name, value in result.items()}


@pytest.mark.parametrize("implementation", ("sdpa", "eager"))
@pytest.mark.parametrize("position_type", POSITION_TYPES)
@pytest.mark.parametrize("class_name", ("BertModel", "BertForSequenceClassification"))
def test_head_mask_matches_transformers(tmp_path, parity_rows, monkeypatch, class_name, position_type, implementation):
    torch.manual_seed(0)
    ours = getattr(bertlab, class_name)(small_config(position_embedding_type=position_type,
                                                     attn_implementation=implementation)).eval()
    perturbed(ours, seed=12)
    ours.save_pretrained(tmp_path)
    reference = getattr(transformers, class_name).from_pretrained(tmp_path, attn_implementation="eager").eval()
    batch = padded_pair_batch(seed=13)
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    calls = count_sdpa_calls(monkeypatch)
    pairs = {}
    for mask_name, head_mask in HEAD_MASKS.items():
        expected = masked_outputs(reference, class_name, inputs, head_mask, mask_name)
        calls.clear()
        pairs.update(paired(masked_outputs(ours, class_name, inputs, head_mask, mask_name), expected))
        # bertlab's sdpa model masks its heads on the SDPA path (the attentions pass is eager in both)
        assert len(calls) == (2 if implementation == "sdpa" else 0)
    compare(parity_rows, f"head_mask, {class_name} {position_type} {implementation}", pairs)


@pytest.mark.parametrize("checkpointing", (False, True), ids=("plain", "checkpointed"))
@pytest.mark.parametrize("implementation", ("sdpa", "eager"))
@pytest.mark.parametrize("position_type", POSITION_TYPES)
def test_head_mask_gradient_matches_transformers(tmp_path, parity_rows, position_type, implementation, checkpointing):
    """The gradient of the loss with respect to the head mask: Michel et al.'s head importance."""
    config = small_config(position_embedding_type=position_type, attn_implementation=implementation,
                          hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    ours = bertlab.BertForSequenceClassification(config).eval()
    perturbed(ours, seed=14)
    ours.save_pretrained(tmp_path)
    reference = transformers.BertForSequenceClassification.from_pretrained(tmp_path).eval()
    if checkpointing:
        ours.gradient_checkpointing_enable()
        ours.train()  # checkpointing is on in training only; no dropout, so the same function
    batch = padded_pair_batch(seed=15)
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids", "class_labels")}
    inputs["labels"] = inputs.pop("class_labels")
    pairs = {}
    for mask_name in ("1-D soft", "2-D 0/1"):
        results = []
        for model in (ours, reference):
            head_mask = HEAD_MASKS[mask_name].clone().requires_grad_()
            loss = model(**inputs, head_mask=head_mask).loss
            results.append((loss, *torch.autograd.grad(loss, head_mask)))
        (loss, grad), (reference_loss, reference_grad) = results
        assert reference_grad.abs().sum() > 1e-3
        # The gradients are small: also compare them as `heads` uses them, each layer's of unit norm.
        norm = reference_grad.norm(dim=-1, keepdim=True)
        pairs[f"grad head_mask ({mask_name})"] = (grad, reference_grad)
        pairs[f"grad head_mask, per-layer normalised ({mask_name})"] = (grad / norm, reference_grad / norm)
        pairs[f"loss ({mask_name})"] = (loss, reference_loss)
    compare(parity_rows, f"head_mask grad, {position_type} {implementation}{' checkpointed' * checkpointing}", pairs)


PRUNINGS = ({0: [1]}, {0: [1, 3], 1: [2]})  # heads are numbered as in the unpruned model, 1 again is skipped


@pytest.mark.parametrize("position_type", POSITION_TYPES)
@pytest.mark.parametrize("class_name", CLASSES)
def test_pruned_model_matches_transformers_pruned_alike(tmp_path, parity_rows, position_type, class_name):
    torch.manual_seed(0)
    ours = getattr(bertlab, class_name)(small_config(position_embedding_type=position_type)).eval()
    perturbed(ours, seed=16)
    ours.save_pretrained(tmp_path)
    reference = getattr(transformers, class_name).from_pretrained(tmp_path).eval()
    for heads in PRUNINGS:
        ours.prune_heads(heads)
        reference.prune_heads(heads)
    assert ours.config.pruned_heads == {k: sorted(v) for k, v in reference.config.pruned_heads.items()} \
        == {0: [1, 3], 1: [2]}
    batch = padded_pair_batch(seed=17)
    compare(parity_rows, f"pruned, {class_name} {position_type}",
            paired(outputs(ours, class_name, batch), outputs(reference, class_name, batch)))


@pytest.mark.parametrize("position_type", POSITION_TYPES)
def test_pruned_bertlab_export_loads_in_transformers_pruned(tmp_path, parity_rows, position_type):
    torch.manual_seed(0)
    ours = bertlab.BertForSequenceClassification(small_config(position_embedding_type=position_type)).eval()
    perturbed(ours, seed=18)
    for heads in PRUNINGS:
        ours.prune_heads(heads)
    export_pretrained(ours, train_tokenizer(["a pruned model and its tokenizer"] * 4, vocab_size=VOCAB), tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["pruned_heads"] == {"0": [1, 3], "1": [2]}
    reference, info = transformers.BertForSequenceClassification.from_pretrained(tmp_path, output_loading_info=True)
    unused = [] if position_type == "absolute" else ["bert.embeddings.position_embeddings.weight"]
    assert (info["missing_keys"], info["unexpected_keys"], info["mismatched_keys"]) == (unused, [], [])
    assert {k: sorted(v) for k, v in reference.config.pruned_heads.items()} == {0: [1, 3], 1: [2]}
    batch = padded_pair_batch(seed=19)
    compare(parity_rows, f"pruned bertlab->HF, {position_type}",
            paired(*(outputs(m, "BertForSequenceClassification", batch) for m in (ours, reference.eval()))))


@pytest.mark.parametrize("position_type", POSITION_TYPES)
@pytest.mark.parametrize("class_name", CLASSES)
def test_pruned_transformers_checkpoint_loads_in_bertlab_pruned(tmp_path, parity_rows, position_type, class_name):
    config = transformers.BertConfig(**json.loads(small_config(position_embedding_type=position_type).to_json_string()))
    torch.manual_seed(20)
    reference = getattr(transformers, class_name)(config).eval()
    perturbed(reference, seed=21)
    for heads in PRUNINGS:
        reference.prune_heads(heads)
    reference.save_pretrained(tmp_path, safe_serialization=True)
    ours = getattr(bertlab, class_name).from_pretrained(tmp_path).eval()
    assert ours.load_report.complete, str(ours.load_report)
    assert ours.config.pruned_heads == {0: [1, 3], 1: [2]}
    batch = padded_pair_batch(seed=22)
    compare(parity_rows, f"pruned HF->bertlab, {class_name} {position_type}",
            paired(outputs(ours, class_name, batch), outputs(reference, class_name, batch)))


@pytest.mark.parametrize("position_type", POSITION_TYPES)
def test_a_layer_pruned_to_no_heads_goes_to_transformers_and_back(tmp_path, parity_rows, position_type):
    """transformers 4.57 prunes, saves and loads a layer without heads but cannot run it (it views an
    empty tensor with a -1 size), so the reference is its unpruned model under a zero head_mask."""
    torch.manual_seed(0)
    ours = bertlab.BertForSequenceClassification(small_config(position_embedding_type=position_type)).eval()
    perturbed(ours, seed=23)
    ours.save_pretrained(tmp_path / "unpruned")
    unpruned = transformers.BertForSequenceClassification.from_pretrained(tmp_path / "unpruned").eval()
    batch = padded_pair_batch(seed=24)
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    with torch.no_grad():
        expected = unpruned(**inputs, head_mask=torch.tensor([[1.0, 1.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]]),
                            output_hidden_states=True)

    ours.prune_heads({0: [2], 1: [0, 1, 2, 3]})
    ours.save_pretrained(tmp_path / "bertlab")
    reference, info = transformers.BertForSequenceClassification.from_pretrained(
        tmp_path / "bertlab", output_loading_info=True)
    unused = [] if position_type == "absolute" else ["bert.embeddings.position_embeddings.weight"]
    assert (info["missing_keys"], info["unexpected_keys"], info["mismatched_keys"]) == (unused, [], [])
    assert reference.bert.encoder.layer[1].attention.self.query.weight.shape == (0, 64)
    reference.save_pretrained(tmp_path / "transformers", safe_serialization=True)
    back = bertlab.BertForSequenceClassification.from_pretrained(tmp_path / "transformers").eval()
    assert back.load_report.complete and back.config.pruned_heads == {0: [2], 1: [0, 1, 2, 3]}
    for model in (ours, back):
        with torch.no_grad():
            out = model(**inputs, output_hidden_states=True)
        pairs = {"logits": (out.logits, expected.logits)}
        pairs.update({f"hidden_states[{i}]": pair
                      for i, pair in enumerate(zip(out.hidden_states, expected.hidden_states))})
        compare(parity_rows, f"no heads in layer 1 vs HF zero head_mask, {position_type}", pairs)


def test_a_token_classifier_export_loads_as_transformers_token_classifier_with_its_label_names(tmp_path):
    tags = {0: "O", 1: "B-PER", 2: "I-PER"}
    ours = bertlab.BertForTokenClassification(
        small_config(position_embedding_type="absolute", id2label=tags,
                     label2id={v: k for k, v in tags.items()})).eval()
    ours.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["architectures"] == ["BertForTokenClassification"]
    reference, info = transformers.AutoModelForTokenClassification.from_pretrained(tmp_path, output_loading_info=True)
    assert type(reference).__name__ == "BertForTokenClassification"
    assert (info["missing_keys"], info["unexpected_keys"], info["mismatched_keys"]) == ([], [], [])
    assert reference.config.id2label == tags and reference.config.label2id == {v: k for k, v in tags.items()}


@pytest.mark.parametrize("position_type", POSITION_TYPES)
def test_the_span_head_matches_transformers_both_ways(tmp_path, parity_rows, position_type):
    """BertForQuestionAnswering (two outputs: start and end), saved by each library and loaded by the other."""
    torch.manual_seed(0)
    ours = bertlab.BertForQuestionAnswering(small_config(position_embedding_type=position_type, num_labels=2)).eval()
    perturbed(ours, seed=23)
    ours.save_pretrained(tmp_path / "bertlab")
    reference, info = transformers.BertForQuestionAnswering.from_pretrained(tmp_path / "bertlab",
                                                                           output_loading_info=True)
    unused = [] if position_type == "absolute" else ["bert.embeddings.position_embeddings.weight"]
    assert (info["missing_keys"], info["unexpected_keys"], info["mismatched_keys"]) == (unused, [], [])
    batch = padded_pair_batch(seed=24)
    compare(parity_rows, f"bertlab->HF BertForQuestionAnswering {position_type}",
            paired(*(outputs(m, "BertForQuestionAnswering", batch) for m in (ours, reference.eval()))))
    reference.save_pretrained(tmp_path / "transformers", safe_serialization=True)
    back = bertlab.BertForQuestionAnswering.from_pretrained(tmp_path / "transformers").eval()
    assert back.load_report.complete, str(back.load_report)
    compare(parity_rows, f"HF->bertlab BertForQuestionAnswering {position_type}",
            paired(*(outputs(m, "BertForQuestionAnswering", batch) for m in (back, reference))))
