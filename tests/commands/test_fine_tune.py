"""`model.init_from` through the command line: the checkpoint's architecture is kept (an override of it
is refused before anything is written), dropout overrides reach the model."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from bertlab.model import BertForMaskedLM
from bertlab.tokenizer import save_tokenizer, train_tokenizer
from tests.bertlab_runs import fine_tuning, run_in_process
from tests.factories import small_config


@pytest.fixture(scope="module")
def tokenizer(tiny_data_dir: Path):
    sentences = pd.read_parquet(tiny_data_dir / "sst2" / "train.parquet")["sentence"].tolist()
    return train_tokenizer(sentences, vocab_size=60)


def save(model, tokenizer, directory: Path) -> Path:
    model.save_pretrained(directory)
    save_tokenizer(tokenizer, directory)
    return directory


@pytest.fixture(scope="module")
def masked_lm(tokenizer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    config = small_config(vocab_size=tokenizer.get_vocab_size(), num_hidden_layers=1, num_attention_heads=2)
    return save(BertForMaskedLM(config), tokenizer, tmp_path_factory.mktemp("mlm") / "hf_model")


def test_an_architecture_override_with_init_from_is_refused_before_anything_is_written(masked_lm, tiny_data_dir,
                                                                                       tmp_path, capsys):
    run_dir = tmp_path / "run"
    outcome = run_in_process(fine_tuning(tiny_data_dir, masked_lm, run_dir, f"model.init_from={masked_lm}",
                                         "model.num_hidden_layers=4"), capsys)
    assert outcome.code == 1
    assert outcome.error_lines[-1].startswith(f"bertlab: error: model.num_hidden_layers cannot change a model "
                                              f"loaded with model.init_from={masked_lm}")
    assert not run_dir.exists()


def test_a_dropout_override_with_init_from_reaches_the_model(masked_lm, tiny_data_dir, tmp_path, capsys):
    run_dir = tmp_path / "run"
    outcome = run_in_process(fine_tuning(tiny_data_dir, masked_lm, run_dir, f"model.init_from={masked_lm}",
                                         "model.hidden_dropout_prob=0.3", "trainer.max_steps=1",
                                         "trainer.val_check_interval=1", "data.limit_eval_samples=8"), capsys)
    assert outcome.code == 0, outcome.err
    saved = json.loads((run_dir / "hf_model" / "config.json").read_text())
    assert saved["hidden_dropout_prob"] == 0.3
    assert saved["attention_probs_dropout_prob"] == 0.1  # not overridden: the checkpoint's own
    assert json.loads((masked_lm / "config.json").read_text())["hidden_dropout_prob"] == 0.1


def test_squad_fine_tuning_writes_exact_match_and_f1_and_exports_a_span_head(tmp_path, capsys):
    from tests.data.test_question_answering import write_squad
    from tests.lit.test_question_answering import CITIES, NAMES, people_document

    texts = [f"where does {name} live ? {name} lives in {city} ." for name in NAMES for city in CITIES]
    save_tokenizer(train_tokenizer(texts, vocab_size=60, min_frequency=1), tmp_path / "tokenizer")
    squad = write_squad(tmp_path / "squad", people_document(8))
    outcome = run_in_process(["fine-tune", "+recipe=squad_minilm", "model.init_from=null",
                              f"data.tokenizer={tmp_path / 'tokenizer'}", f"data.source={squad}",
                              "data.max_seq_length=64", "data.doc_stride=16", "data.batch_size=4",
                              "model.hidden_size=32", "model.num_hidden_layers=1", "model.num_attention_heads=2", "model.intermediate_size=64",
                              "trainer.max_epochs=2", "trainer.val_check_interval=2", "trainer.precision=32-true",
                              f"paths.output_dir={tmp_path / 'out'}"], capsys)
    assert outcome.code == 0, outcome.err
    run = tmp_path / "out" / "squad_minilm" / "latest"
    metrics = pd.read_csv(run / "metrics.csv").dropna(subset=["val/f1"])
    assert len(metrics) == 2 and metrics[["val/exact_match", "val/f1"]].stack().between(0, 1).all()
    assert json.loads((run / "hf_model" / "config.json").read_text())["architectures"] == ["BertForQuestionAnswering"]
