"""Parity with transformers' ModernBERT (4.57) both ways, and remote-code exports loaded by transformers
in a process where bertlab cannot be imported.

ModernBERT-shaped bertlab models save as ModernBert* (model_type modernbert) and transformers' ModernBERT
folders load into bertlab: random-init models of each library, saved, loaded by the other, compared on
padded batches with local and global layers (float32, eager and sdpa attention). The module prints
the largest differences at the end of the run.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from bertlab import (BertConfig, BertForMaskedLM, BertForPreTraining, BertForQuestionAnswering,
                     BertForSequenceClassification, BertForTokenClassification, BertModel)
from bertlab.checkpoint.modernbert import to_state
from tests import factories
from tests.factories import perturbed

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

TOLERANCE = 1e-5
VOCAB, BATCH, LENGTH = 150, 4, 40
MODERNBERT = dict(position_embedding_type="rotary", type_vocab_size=0, norm_position="pre",
                  first_attention_norm=False, gated_ffn=True, attention_bias=False, ffn_bias=False,
                  norm_bias=False, head_bias=False, rope_theta=160000.0, local_rope_theta=10000.0,
                  local_attention_window=8, global_attention_every_n_layers=3, classifier_pooling="cls",
                  layer_norm_eps=1e-5, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                  classifier_dropout=0.0)
BIASED = dict(attention_bias=True, ffn_bias=True, norm_bias=True, head_bias=True, head_act="silu",
              classifier_pooling="mean", hidden_act="gelu_pytorch_tanh")
CLASSES = {"BertModel": ("ModernBertModel", "AutoModel"),
           "BertForMaskedLM": ("ModernBertForMaskedLM", "AutoModelForMaskedLM"),
           "BertForSequenceClassification": ("ModernBertForSequenceClassification",
                                             "AutoModelForSequenceClassification"),
           "BertForTokenClassification": ("ModernBertForTokenClassification", "AutoModelForTokenClassification")}
BERTLAB = {cls.__name__: cls for cls in (BertModel, BertForMaskedLM, BertForSequenceClassification, BertForPreTraining,
                                         BertForTokenClassification)}
PER_TOKEN = ("BertForMaskedLM", "BertForTokenClassification")  # logits compared at the real positions
RESULTS: list[tuple[str, float, float, float]] = []


small_config = functools.partial(factories.small_config, vocab_size=VOCAB, hidden_size=64, num_hidden_layers=4,
                                 intermediate_size=96, num_labels=3, **MODERNBERT)


def padded_batch() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(5, VOCAB, (BATCH, LENGTH), generator=generator)
    attention_mask = torch.zeros_like(input_ids)
    for row, length in enumerate((LENGTH, 31, 9, 22)):
        attention_mask[row, :length] = 1
    input_ids[attention_mask == 0] = 0
    labels = torch.full_like(input_ids, -100)
    labelled = (torch.rand(input_ids.shape, generator=generator) < 0.25) & attention_mask.bool()
    labels[labelled] = input_ids[labelled]
    return dict(input_ids=input_ids, attention_mask=attention_mask, labels=labels)


def compare(name: str, ours, theirs, architecture: str, batch) -> None:
    """Hidden states (every layer's, at the real positions), logits and loss within TOLERANCE."""
    real = batch["attention_mask"].bool()
    hidden = max((a[real] - b[real]).abs().max().item() for a, b in zip(ours.hidden_states, theirs.hidden_states))
    assert len(ours.hidden_states) == len(theirs.hidden_states)
    if architecture == "BertModel":
        hidden = max(hidden, (ours.last_hidden_state[real] - theirs.last_hidden_state[real]).abs().max().item())
        logits = loss = float("nan")
    else:
        ours_logits = ours.logits[real] if architecture in PER_TOKEN else ours.logits
        theirs_logits = theirs.logits[real] if architecture in PER_TOKEN else theirs.logits
        logits = (ours_logits - theirs_logits).abs().max().item()
        loss = (ours.loss - theirs.loss).abs().item()
        assert loss <= TOLERANCE, name
    RESULTS.append((name, hidden, logits, loss))
    assert hidden <= TOLERANCE and (logits != logits or logits <= TOLERANCE), (name, hidden, logits)


def task_labels(architecture: str, batch) -> dict[str, torch.Tensor]:
    """The labels a classifier's loss reads: a class per row, or a tag per token (-100 where the MLM's are)."""
    if architecture == "BertForSequenceClassification":
        return {"labels": torch.tensor([0, 2, 1, 1])}
    if architecture == "BertForTokenClassification":
        return {"labels": torch.where(batch["labels"] == -100, -100, batch["labels"] % 3)}
    return {}


def bertlab_outputs(model, architecture: str, batch):
    """Every position's outputs with the loss: the MLM loss from full logits (bertlab's sparse head gives the
    same, checked in tests/test_model_variants.py)."""
    out = model(batch["input_ids"], batch["attention_mask"], output_hidden_states=True, **task_labels(architecture, batch))
    if architecture == "BertForMaskedLM":
        out.loss = F.cross_entropy(out.logits.flatten(0, 1), batch["labels"].flatten())
    return out


def transformers_outputs(model, architecture: str, batch):
    labels = {"labels": batch["labels"]} if architecture == "BertForMaskedLM" else task_labels(architecture, batch)
    return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], output_hidden_states=True,
                 **labels)


@pytest.mark.parametrize("attention", ("sdpa", "eager"))
@pytest.mark.parametrize("variant", ("modernbert", "biased"))
@pytest.mark.parametrize("architecture", CLASSES)
def test_a_modernbert_shaped_bertlab_model_loads_natively_in_transformers_with_equal_outputs(
        architecture, variant, attention, tmp_path):
    torch.manual_seed(0)
    model = perturbed(BERTLAB[architecture](small_config(**(BIASED if variant == "biased" else {}))), seed=3).eval()
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["model_type"] == "modernbert" and saved["architectures"] == [CLASSES[architecture][0]]
    auto = getattr(transformers, CLASSES[architecture][1])
    theirs, info = auto.from_pretrained(tmp_path, attn_implementation=attention, output_loading_info=True)
    assert type(theirs).__name__ == CLASSES[architecture][0]
    assert not any(info.values()), info
    batch = padded_batch()
    compare(f"bertlab → transformers {architecture} {variant} {attention}", bertlab_outputs(model, architecture, batch),
            transformers_outputs(theirs.eval(), architecture, batch), architecture, batch)


@pytest.mark.parametrize("attention", ("sdpa", "eager"))
@pytest.mark.parametrize("architecture", CLASSES)
def test_a_transformers_modernbert_folder_loads_into_bertlab_with_equal_outputs(architecture, attention, tmp_path):
    config = transformers.ModernBertConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=5, num_attention_heads=4,
        max_position_embeddings=64, local_attention=8, global_attn_every_n_layers=2, pad_token_id=0,
        num_labels=3, classifier_pooling="mean" if architecture == "BertForSequenceClassification" else "cls",
        mlp_bias=True, classifier_activation="silu", attn_implementation=attention, reference_compile=False)
    torch.manual_seed(0)
    theirs = perturbed(getattr(transformers, CLASSES[architecture][0])(config), seed=3).eval()
    theirs.save_pretrained(tmp_path)
    ours = BERTLAB[architecture].from_pretrained(tmp_path)
    report = ours.load_report
    # ModernBertModel has no pooler: bertlab's BertModel reports its own as newly initialised.
    pooler = ["pooler.dense.weight", "pooler.LayerNorm.weight"] if architecture == "BertModel" else []
    assert report.missing == pooler and not report.unexpected and not report.mismatched, str(report)
    assert ours.config.local_attention_window == 8 and ours.config.head_act == "silu" and ours.config.ffn_bias
    batch = padded_batch()
    compare(f"transformers → bertlab {architecture} {attention}", bertlab_outputs(ours.eval(), architecture, batch),
            transformers_outputs(theirs, architecture, batch), architecture, batch)


def test_an_untied_decoder_travels_both_ways_as_modernberts_own_decoder_weight(tmp_path):
    """tie_word_embeddings: false is ModernBertConfig's too: the decoder is saved as `decoder.weight`, and a
    transformers folder's untied decoder loads into bertlab's, or is reported (with a note) to a tied model."""
    torch.manual_seed(0)
    model = perturbed(BertForMaskedLM(small_config(tie_word_embeddings=False)), seed=3).eval()
    model.save_pretrained(tmp_path / "bertlab")
    saved = json.loads((tmp_path / "bertlab" / "config.json").read_text())
    assert saved["model_type"] == "modernbert" and saved["tie_word_embeddings"] is False
    theirs, info = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "bertlab", output_loading_info=True)
    assert not any(info.values()), info
    assert not torch.equal(theirs.decoder.weight, theirs.model.embeddings.tok_embeddings.weight)
    batch = padded_batch()
    compare("bertlab → transformers untied decoder", bertlab_outputs(model, "BertForMaskedLM", batch),
            transformers_outputs(theirs.eval(), "BertForMaskedLM", batch), "BertForMaskedLM", batch)

    theirs.save_pretrained(tmp_path / "transformers")
    ours = BertForMaskedLM.from_pretrained(tmp_path / "transformers")
    assert ours.load_report.complete and not ours.config.tie_word_embeddings
    torch.testing.assert_close(ours.cls.predictions.decoder.weight, model.cls.predictions.decoder.weight)
    tied = BertForMaskedLM.from_pretrained(tmp_path / "transformers", tie_word_embeddings=True)
    assert tied.load_report.unexpected == ["cls.predictions.decoder.weight"] and tied.load_report.notes


def test_a_modernbert_masked_lm_folder_starts_a_bertlab_classifier_from_its_head(tmp_path):
    """As in transformers, ModernBertForSequenceClassification's and …ForTokenClassification's `head` is the MLM
    checkpoint's."""
    config = transformers.ModernBertConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                           num_attention_heads=2, pad_token_id=0, reference_compile=False)
    transformers.ModernBertForMaskedLM(config).save_pretrained(tmp_path)
    ours = BertForSequenceClassification.from_pretrained(tmp_path, num_labels=2)
    assert ours.load_report.missing == ["classifier.weight", "classifier.bias"]
    assert ours.config.classifier_pooling == "cls" and ours.config.non_bert_keys()
    tagger = BertForTokenClassification.from_pretrained(tmp_path, num_labels=3)
    assert tagger.load_report.missing == ["classifier.weight", "classifier.bias"]
    assert tagger.load_report.unexpected == ["cls.predictions.bias"]  # the decoder's, as for the sequence classifier
    torch.testing.assert_close(tagger.head.dense.weight, ours.bert.pooler.dense.weight)


@pytest.mark.parametrize("architecture", ("BertForMaskedLM", "BertForSequenceClassification"))
def test_weight_init_modernbert_draws_every_matrix_at_the_scale_transformers_modernbert_draws_it(architecture, tmp_path):
    """Each weight's spread against the same weight of a ModernBERT transformers initialised itself (scales
    differ by 2.8× between a block's inputs and outputs, 5× for the classifier), and cut at 2 std: an
    untruncated normal of a few hundred entries reaches past 2.5 std."""
    torch.manual_seed(0)
    config = small_config(weight_init="modernbert", hidden_size=128, intermediate_size=192, tie_word_embeddings=False)
    ours = BERTLAB[architecture](config)
    ours.save_pretrained(tmp_path)
    theirs = getattr(transformers, CLASSES[architecture][0])(transformers.AutoConfig.from_pretrained(tmp_path))
    our_state = {key: tensor for key, tensor in to_state(ours.state_dict(), config, architecture).items()
                 if tensor.dim() == 2}
    their_state = theirs.state_dict()
    assert our_state.keys() <= their_state.keys() and len(our_state) > 4 * config.num_hidden_layers
    for key, ours_weight in our_state.items():
        theirs_weight = their_state[key]
        assert 0.8 < ours_weight.std() / theirs_weight.std() < 1.25, key
        for weight in (ours_weight, theirs_weight):
            assert weight.abs().max() <= 2.5 * weight.std(), key


def test_a_modernbert_export_reads_back_into_bertlab_with_the_same_config_and_weights(tmp_path):
    model = perturbed(BertForMaskedLM(small_config(**BIASED)), seed=3).eval()
    model.save_pretrained(tmp_path)
    again = BertForMaskedLM.from_pretrained(tmp_path)
    assert again.load_report.complete
    assert again.config.to_dict() == {**model.config.to_dict(), "architectures": ["BertForMaskedLM"]}
    for (name, a), (_, b) in zip(model.state_dict().items(), again.state_dict().items()):
        assert torch.equal(a, b), name


BLOCK_BERTLAB = """
import importlib.abc, sys
class NoBertlab(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "bertlab":
            raise ImportError(f"{name} is blocked: the export must load without bertlab")
sys.meta_path.insert(0, NoBertlab())
"""


def run_without_bertlab(script: str, folder: Path) -> None:
    """Runs `script` (which starts with BLOCK_BERTLAB) in a fresh Python in `folder`, where transformers keeps
    the remote-code modules it copies."""
    environment = {**os.environ, "HF_MODULES_CACHE": str(folder / "modules"), "PYTHONPATH": ""}
    run = subprocess.run([sys.executable, "-c", script], cwd=folder, env=environment, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
REMOTE_VARIANTS = {
    "BERT with rotary positions": dict(position_embedding_type="rotary"),
    "pre-norm RMSNorm SwiGLU without biases": dict(norm_position="pre", norm_type="rms_norm", norm_bias=False,
                                                   gated_ffn=True, hidden_act="silu", attention_bias=False,
                                                   ffn_bias=False, decoder_bias=False),
    "ModernBERT with NSP and BERT's pooler": dict(MODERNBERT, classifier_pooling="pooler"),
}
REMOTE_CLASSES = {"BertModel": "AutoModel", "BertForMaskedLM": "AutoModelForMaskedLM",
                  "BertForPreTraining": "AutoModelForPreTraining",
                  "BertForSequenceClassification": "AutoModelForSequenceClassification",
                  "BertForTokenClassification": "AutoModelForTokenClassification"}


@pytest.mark.slow
@pytest.mark.parametrize("variant", REMOTE_VARIANTS)
def test_any_other_mix_loads_in_transformers_through_its_own_code_without_bertlab(variant, tmp_path):
    """Every model class of the mix, saved, loaded by transformers (trust_remote_code) in a subprocess
    where importing bertlab fails: outputs and losses equal bertlab's."""
    batch = padded_batch()
    labels = {"BertForMaskedLM": batch["labels"], "BertForPreTraining": batch["labels"],
              "BertForSequenceClassification": torch.tensor([0, 2, 1, 1]),
              "BertForTokenClassification": task_labels("BertForTokenClassification", batch)["labels"]}
    expected = {}
    for architecture in REMOTE_CLASSES:
        config = BertConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                            intermediate_size=96, max_position_embeddings=64, num_labels=3,
                            **{"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
                               **REMOTE_VARIANTS[variant]})
        torch.manual_seed(0)
        model = perturbed(BERTLAB[architecture](config), seed=3).eval()
        model.save_pretrained(tmp_path / architecture)
        saved = json.loads((tmp_path / architecture / "config.json").read_text())
        assert saved["model_type"] == "bertlab" and REMOTE_CLASSES[architecture] in saved["auto_map"]
        out = model(batch["input_ids"], batch["attention_mask"])
        main = out.last_hidden_state if architecture == "BertModel" else (
            out.prediction_logits if architecture == "BertForPreTraining" else out.logits)
        if architecture in labels:
            kwargs = dict(predictions_per_row=12) if architecture in ("BertForMaskedLM", "BertForPreTraining") else {}
            if architecture == "BertForPreTraining":
                kwargs["next_sentence_label"] = torch.tensor([0, 1, 1, 0])
            loss = model(batch["input_ids"], batch["attention_mask"], labels=labels[architecture], **kwargs).loss
            expected[architecture] = (main, loss)
        else:
            expected[architecture] = (main, None)
        assert BERTLAB[architecture].from_pretrained(tmp_path / architecture).load_report.complete
    torch.save({"batch": batch, "labels": labels}, tmp_path / "inputs.pt")
    script = BLOCK_BERTLAB + textwrap.dedent(f"""
        import torch, transformers
        transformers.logging.set_verbosity_error()
        inputs = torch.load({str(tmp_path / "inputs.pt")!r})
        batch, labels, results = inputs["batch"], inputs["labels"], {{}}
        for architecture, auto in {REMOTE_CLASSES!r}.items():
            model, info = getattr(transformers, auto).from_pretrained(
                {str(tmp_path)!r} + "/" + architecture, trust_remote_code=True, output_loading_info=True)
            assert not model.training and not any(info.values()), info
            kwargs = dict(labels=labels[architecture]) if architecture in labels else {{}}
            if architecture == "BertForPreTraining":
                kwargs["next_sentence_label"] = torch.tensor([0, 1, 1, 0])
            out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], **kwargs)
            main = out.last_hidden_state if architecture == "BertModel" else (
                out.prediction_logits if architecture == "BertForPreTraining" else out.logits)
            loss = getattr(out, "loss", None)
            results[architecture] = (main.detach(), None if loss is None else loss.detach())
        torch.save(results, {str(tmp_path / "results.pt")!r})
    """)
    run_without_bertlab(script, tmp_path)
    results = torch.load(tmp_path / "results.pt")
    for architecture, (main, loss) in expected.items():
        theirs, their_loss = results[architecture]
        difference = (main - theirs).abs().max().item()
        loss_difference = float("nan") if loss is None else (loss - their_loss).abs().item()
        RESULTS.append((f"remote code {variant} {architecture}", difference if architecture == "BertModel" else
                        float("nan"), difference if architecture != "BertModel" else float("nan"), loss_difference))
        assert difference <= TOLERANCE and (loss is None or loss_difference <= TOLERANCE), (architecture, difference)


@pytest.mark.slow
def test_a_remote_code_export_reads_the_output_switches_of_its_transformers_config_and_takes_inputs_embeds(tmp_path):
    """output_hidden_states given to from_pretrained holds for calls that leave it at None, as in transformers;
    inputs_embeds give the ids path's outputs; an untied decoder loads as itself. Without bertlab importable."""
    batch = padded_batch()
    config = BertConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                        intermediate_size=96, max_position_embeddings=64, position_embedding_type="rotary",
                        tie_word_embeddings=False, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    model = perturbed(BertForMaskedLM(config), seed=3).eval()
    model.save_pretrained(tmp_path / "export")
    assert json.loads((tmp_path / "export" / "config.json").read_text())["model_type"] == "bertlab"
    torch.save({"batch": batch, "logits": model(batch["input_ids"], batch["attention_mask"]).logits},
               tmp_path / "inputs.pt")
    script = BLOCK_BERTLAB + textwrap.dedent(f"""
        import torch, transformers
        transformers.logging.set_verbosity_error()
        inputs = torch.load({str(tmp_path / "inputs.pt")!r})
        ids, mask = inputs["batch"]["input_ids"], inputs["batch"]["attention_mask"]
        model, info = transformers.AutoModelForMaskedLM.from_pretrained(
            {str(tmp_path / "export")!r}, trust_remote_code=True, output_hidden_states=True, output_loading_info=True)
        assert not any(info.values()), info
        out = model(input_ids=ids, attention_mask=mask)
        assert out.hidden_states is not None and len(out.hidden_states) == 4 and out.attentions is None
        assert model(input_ids=ids, attention_mask=mask, output_hidden_states=False).hidden_states is None
        by_embeds = model(inputs_embeds=model.get_input_embeddings()(ids), attention_mask=mask).logits
        torch.save({{"logits": out.logits.detach(), "by_embeds": by_embeds.detach()}}, {str(tmp_path / "results.pt")!r})
    """)
    run_without_bertlab(script, tmp_path)
    results, expected = torch.load(tmp_path / "results.pt"), torch.load(tmp_path / "inputs.pt")["logits"]
    for name in ("logits", "by_embeds"):
        difference = (results[name] - expected).abs().max().item()
        RESULTS.append((f"remote code untied decoder, {name}", float("nan"), difference, float("nan")))
        assert difference <= TOLERANCE, (name, difference)


@pytest.fixture(scope="module", autouse=True)
def report():
    yield
    if RESULTS:
        print(f"\n{'max |diff|, float32':<90} {'hidden':>8} {'logits':>8} {'loss':>8}")
        for name, hidden, logits, loss in RESULTS:
            print(f"{name:<90} {hidden:8.1e} {logits:8.1e} {loss:8.1e}")


@pytest.mark.parametrize("variant", ("modernbert", "biased"))
def test_a_span_head_travels_both_ways_as_modernberts_question_answering(variant, tmp_path):
    """bertlab's `qa_outputs` is ModernBertForQuestionAnswering's `classifier`, after the same `head`."""
    torch.manual_seed(0)
    ours = perturbed(BertForQuestionAnswering(small_config(num_labels=2, **(BIASED if variant == "biased" else {}))),
                     seed=3).eval()
    ours.save_pretrained(tmp_path / "bertlab")
    saved = json.loads((tmp_path / "bertlab" / "config.json").read_text())
    assert saved["architectures"] == ["ModernBertForQuestionAnswering"]
    theirs, info = transformers.AutoModelForQuestionAnswering.from_pretrained(tmp_path / "bertlab",
                                                                              output_loading_info=True)
    assert type(theirs).__name__ == "ModernBertForQuestionAnswering" and not any(info.values()), info
    batch = padded_batch()
    spans = dict(start_positions=torch.tensor([3, 0, 2, 7]), end_positions=torch.tensor([6, 0, 8, 20]))
    real = batch["attention_mask"].bool()
    ours_out = ours(batch["input_ids"], batch["attention_mask"], **spans)
    theirs_out = theirs.eval()(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], **spans)
    for name in ("start_logits", "end_logits"):
        assert (getattr(ours_out, name)[real] - getattr(theirs_out, name)[real]).abs().max() <= TOLERANCE, name
    assert (ours_out.loss - theirs_out.loss).abs() <= TOLERANCE
    theirs.save_pretrained(tmp_path / "transformers")
    back = BertForQuestionAnswering.from_pretrained(tmp_path / "transformers")
    assert back.load_report.complete, str(back.load_report)
    torch.testing.assert_close(back.qa_outputs.weight, ours.qa_outputs.weight)
    torch.testing.assert_close(back.head.dense.weight, ours.head.dense.weight)
