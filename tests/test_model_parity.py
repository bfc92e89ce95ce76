"""Numerical parity with Hugging Face transformers (the reference; imported only here), both ways
through save_pretrained/from_pretrained, for every position embedding type and model class.

The module prints a table of the largest differences at the end of the run.
"""

from __future__ import annotations

import json
import logging

import pytest
import torch
import torch.nn.functional as F

import bertlab
from bertlab.config import BertConfig

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()  # relative models load without the unused absolute table

TOLERANCE = 1e-5
POSITION_TYPES = ("absolute", "relative_key", "relative_key_query")
CLASSES = ("BertModel", "BertForPreTraining", "BertForMaskedLM", "BertForSequenceClassification")
VOCAB, BATCH, LENGTH = 300, 4, 24


def small_config(position_embedding_type: str, **overrides) -> BertConfig:
    values = dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                  intermediate_size=128, max_position_embeddings=64, num_labels=3,
                  position_embedding_type=position_embedding_type)
    values.update(overrides)
    return BertConfig(**values)


def perturb(model: torch.nn.Module, seed: int) -> None:
    """Moves every parameter off its init so that zero biases and unit LayerNorms are checked too."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=generator))


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
    return dict(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                mlm_labels=mlm_labels,
                next_sentence_label=torch.randint(0, 2, (BATCH,), generator=generator),
                class_labels=torch.randint(0, 3, (BATCH,), generator=generator),
                regression_labels=torch.randn(BATCH, generator=generator))


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


def run_both(class_name, ours, reference, batch, regression=False):
    """Forwards both models on one batch; returns {quantity: (ours, reference)}. Attention
    probabilities come from a second pass: asking for them switches both libraries to eager
    attention, and the first pass must check the SDPA path."""
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    labels = batch["mlm_labels"]
    selected = labels != -100
    pairs = {}
    with torch.no_grad():
        if class_name == "BertModel":
            a, b = ours(**inputs, output_hidden_states=True), reference(**inputs, output_hidden_states=True)
            pairs["last_hidden_state"] = (a.last_hidden_state, b.last_hidden_state)
            pairs["pooler_output"] = (a.pooler_output, b.pooler_output)
        elif class_name == "BertForPreTraining":
            nsp = batch["next_sentence_label"]
            a = ours(**inputs, labels=labels, next_sentence_label=nsp, output_hidden_states=True)
            b = reference(**inputs, labels=labels, next_sentence_label=nsp, output_hidden_states=True)
            reference_mlm = F.cross_entropy(b.prediction_logits.flatten(0, 1), labels.flatten())
            pairs["prediction_logits(sparse)"] = (a.prediction_logits, b.prediction_logits[selected])
            pairs["prediction_logits(full)"] = (ours(**inputs).prediction_logits, b.prediction_logits)
            pairs["seq_relationship_logits"] = (a.seq_relationship_logits, b.seq_relationship_logits)
            pairs["mlm_loss"] = (a.mlm_loss, reference_mlm)
            pairs["nsp_loss"] = (a.nsp_loss, F.cross_entropy(b.seq_relationship_logits, nsp))
            pairs["loss"] = (a.loss, b.loss)
        elif class_name == "BertForMaskedLM":
            a = ours(**inputs, labels=labels, output_hidden_states=True)
            b = reference(**inputs, labels=labels, output_hidden_states=True)
            pairs["logits(sparse)"] = (a.logits, b.logits[selected])
            pairs["logits(full)"] = (ours(**inputs).logits, b.logits)
            pairs["loss"] = (a.loss, b.loss)
        else:
            target = batch["regression_labels" if regression else "class_labels"]
            a = ours(**inputs, labels=target, output_hidden_states=True)
            b = reference(**inputs, labels=target, output_hidden_states=True)
            pairs["logits"] = (a.logits, b.logits)
            pairs["loss(mse)" if regression else "loss(ce)"] = (a.loss, b.loss)
        assert len(a.hidden_states) == ours.config.num_hidden_layers + 1
        for i, (x, y) in enumerate(zip(a.hidden_states, b.hidden_states, strict=True)):
            pairs[f"hidden_states[{i}]"] = (x, y)
        a, b = ours(**inputs, output_attentions=True), reference(**inputs, output_attentions=True)
        for i, (x, y) in enumerate(zip(a.attentions, b.attentions, strict=True)):
            pairs[f"attentions[{i}]"] = (x, y)
    return pairs


@pytest.mark.parametrize("position_type", POSITION_TYPES)
@pytest.mark.parametrize("class_name", CLASSES)
def test_bertlab_checkpoint_loads_in_transformers_with_identical_outputs(
        tmp_path, parity_rows, position_type, class_name):
    torch.manual_seed(0)
    ours = getattr(bertlab, class_name)(small_config(position_type)).eval()
    perturb(ours, seed=1)
    ours.save_pretrained(tmp_path)
    batch = padded_pair_batch(seed=2)
    for implementation in ("eager", "sdpa"):
        reference = getattr(transformers, class_name).from_pretrained(
            tmp_path, attn_implementation=implementation).eval()
        pairs = run_both(class_name, ours, reference, batch)
        compare(parity_rows, f"bertlab->HF {class_name} {position_type} HF-{implementation}", pairs)


@pytest.mark.parametrize("position_type", POSITION_TYPES)
def test_regression_head_matches_transformers(tmp_path, parity_rows, position_type):
    torch.manual_seed(0)
    ours = bertlab.BertForSequenceClassification(small_config(position_type, num_labels=1)).eval()
    perturb(ours, seed=3)
    ours.save_pretrained(tmp_path)
    reference = transformers.BertForSequenceClassification.from_pretrained(tmp_path).eval()
    assert reference.config.num_labels == 1
    pairs = run_both("BertForSequenceClassification", ours, reference, padded_pair_batch(seed=4),
                     regression=True)
    compare(parity_rows, f"bertlab->HF regression {position_type}", pairs)


@pytest.mark.parametrize("position_type", POSITION_TYPES)
@pytest.mark.parametrize("class_name", CLASSES)
def test_transformers_checkpoint_loads_in_bertlab_with_identical_outputs(
        tmp_path, parity_rows, position_type, class_name, caplog):
    config = transformers.BertConfig(**json.loads(small_config(position_type).to_json_string()))
    torch.manual_seed(5)
    reference = getattr(transformers, class_name)(config).eval()
    perturb(reference, seed=6)
    reference.save_pretrained(tmp_path, safe_serialization=True)
    with caplog.at_level(logging.INFO, logger="bertlab"):
        ours = getattr(bertlab, class_name).from_pretrained(tmp_path).eval()
    assert ours.config.position_embedding_type == position_type
    assert ours.load_report.complete, str(ours.load_report)
    pairs = run_both(class_name, ours, reference, padded_pair_batch(seed=7))
    compare(parity_rows, f"HF->bertlab {class_name} {position_type}", pairs)


@pytest.mark.parametrize("position_type", ("relative_key", "relative_key_query"))
def test_relative_positions_through_sdpa_match_eager_including_gradients(
        parity_rows, position_type, monkeypatch):
    config = small_config(position_type, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    sdpa = bertlab.BertForMaskedLM(config).train()
    perturb(sdpa, seed=8)
    eager = bertlab.BertForMaskedLM(small_config(position_type, hidden_dropout_prob=0.0,
                                                 attention_probs_dropout_prob=0.0,
                                                 attn_implementation="eager")).train()
    eager.load_state_dict(sdpa.state_dict())
    batch = padded_pair_batch(seed=9)
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    calls = []
    sdpa_function = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention",
                        lambda *args, **kwargs: calls.append(1) or sdpa_function(*args, **kwargs))
    losses = [model(**inputs, labels=batch["mlm_labels"]).loss for model in (sdpa, eager)]
    assert len(calls) == config.num_hidden_layers  # the sdpa model used it in every layer, eager never
    for model, loss in zip((sdpa, eager), losses):
        model.zero_grad()
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
    config = small_config(position_type, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    fused = bertlab.BertForPreTraining(config).train()
    perturb(fused, seed=10)
    separate = bertlab.BertForPreTraining(small_config(position_type, hidden_dropout_prob=0.0,
                                                       attention_probs_dropout_prob=0.0,
                                                       fused_qkv=False)).train()
    separate.load_state_dict(fused.state_dict())
    batch = padded_pair_batch(seed=11)
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    outputs = []
    for model in (fused, separate):
        out = model(**inputs, labels=batch["mlm_labels"], next_sentence_label=batch["next_sentence_label"])
        out.loss.backward()
        outputs.append(out)
    pairs = {"prediction_logits": (outputs[0].prediction_logits, outputs[1].prediction_logits),
             "loss": (outputs[0].loss, outputs[1].loss)}
    separate_parameters = dict(separate.named_parameters())
    for name, parameter in fused.named_parameters():
        pairs[f"grads[{name}]"] = (parameter.grad, separate_parameters[name].grad)
    compare(parity_rows, f"bertlab fused_qkv vs separate, train, {position_type}", pairs)
