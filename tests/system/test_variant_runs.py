"""The variants through the command line: `train +recipe=mlm_tiny model.position_embedding_type=rotary`
exports with its own modelling code, `train +recipe=mlm_tiny_modern` as ModernBertForMaskedLM, and a
classifier fine-tuned from it as ModernBertForSequenceClassification, which `evaluate` and `predict` read;
every export loads in transformers with the outputs of bertlab's own model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bertlab import BertForMaskedLM, BertForSequenceClassification
from tests.bertlab_runs import fine_tuning, pretraining, run_in_process

transformers = pytest.importorskip("transformers")
SHORT = ["trainer.max_steps=4", "trainer.val_check_interval=2"]
MODERN = ["budget_minutes=null", "model.num_hidden_layers=3", "model.local_attention_window=8"]


def train(recipe: str, tiny_data_dir: Path, run_dir: Path, *overrides: str) -> Path:
    argv = [item if item != "+recipe=mlm_tiny" else f"+recipe={recipe}"
            for item in pretraining(tiny_data_dir, run_dir.parent / "cache", run_dir, *SHORT, *overrides)]
    outcome = run_in_process(argv)
    assert outcome.code == 0, outcome.err
    return run_dir / "hf_model"


def assert_transformers_agrees(folder: Path, model_class, auto_class, **kwargs) -> None:
    ours = model_class.from_pretrained(folder).eval()
    assert ours.load_report.complete, str(ours.load_report)
    theirs, info = getattr(transformers, auto_class).from_pretrained(folder, output_loading_info=True, **kwargs)
    assert not any(info.values()), info
    input_ids = torch.randint(5, ours.config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(0))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 7:] = 0
    difference = (ours(input_ids, attention_mask).logits - theirs.eval()(input_ids=input_ids,
                                                                          attention_mask=attention_mask).logits)
    real = difference[attention_mask.bool()] if difference.dim() == 3 else difference  # MLM logits: real tokens
    assert real.abs().max() <= 1e-5


def test_mlm_tiny_with_rotary_positions_exports_its_own_code_for_transformers(tiny_data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "modules"))
    folder = train("mlm_tiny", tiny_data_dir, tmp_path / "rotary", "model.position_embedding_type=rotary")
    saved = json.loads((folder / "config.json").read_text())
    assert saved["model_type"] == "bertlab" and saved["position_embedding_type"] == "rotary"
    assert (folder / "modeling_bertlab.py").is_file() and (folder / "bertlab_model.py").is_file()
    assert_transformers_agrees(folder, BertForMaskedLM, "AutoModelForMaskedLM", trust_remote_code=True)


def test_mlm_tiny_modern_exports_modernbert_and_fine_tunes_evaluates_and_predicts(tiny_data_dir, tmp_path, capsys):
    folder = train("mlm_tiny_modern", tiny_data_dir, tmp_path / "modern", *MODERN, "data.num_proc=1",
                   f"data.validation_source={tiny_data_dir / 'corpus' / 'validation.txt'}")
    saved = json.loads((folder / "config.json").read_text())
    assert saved["model_type"] == "modernbert" and saved["architectures"] == ["ModernBertForMaskedLM"]
    assert_transformers_agrees(folder, BertForMaskedLM, "AutoModelForMaskedLM", attn_implementation="sdpa")

    run_dir = tmp_path / "sst2"
    outcome = run_in_process(fine_tuning(tiny_data_dir, folder, run_dir, f"model.init_from={folder}",
                                         "trainer.max_steps=4", "data.limit_train_samples=32"), capsys)
    assert outcome.code == 0, outcome.err
    classifier = run_dir / "hf_model"
    assert json.loads((classifier / "config.json").read_text())["architectures"] == \
        ["ModernBertForSequenceClassification"]
    assert_transformers_agrees(classifier, BertForSequenceClassification, "AutoModelForSequenceClassification",
                               attn_implementation="eager")
    predicted = run_in_process(["predict", str(classifier), "a fine film", "dull"], capsys)
    assert predicted.code == 0 and len(predicted.out.strip().splitlines()) == 2, predicted.err
    evaluated = run_in_process(["evaluate", str(classifier), "--data", str(tiny_data_dir / "sst2")], capsys)
    assert evaluated.code == 0, evaluated.err
