"""`bertlab evaluate` (batched length-sorted inference) scores exactly as Lightning's validation loop does."""

from __future__ import annotations

import json

import lightning as L
import pandas as pd
import pytest
from omegaconf import OmegaConf

from bertlab.commands.evaluate import evaluate
from bertlab.data.classification import ClassificationDataModule
from bertlab.lit.classification import ClassificationModule
from bertlab.model import BertForSequenceClassification
from tests.bertlab_runs import run_in_process
from tests.commands.test_fine_tune import save, tokenizer
from tests.factories import small_config

__all__ = ["tokenizer"]  # the fixture, shared


def test_evaluate_scores_as_the_lightning_validation_loop(tokenizer, tiny_data_dir, tmp_path):
    L.seed_everything(3)
    config = small_config(vocab_size=tokenizer.get_vocab_size(), num_hidden_layers=1, num_attention_heads=2,
                          id2label={0: "negative", 1: "positive"})
    classifier = save(BertForSequenceClassification(config), tokenizer, tmp_path / "classifier")
    ours = evaluate(str(classifier), str(tiny_data_dir / "sst2"), batch_size=7)
    datamodule = ClassificationDataModule(str(tiny_data_dir / "sst2"), str(classifier), label_names=["negative", "positive"],
                                          eval_batch_size=16)
    model = BertForSequenceClassification.from_pretrained(classifier)
    trainer = L.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    (lightning,) = trainer.validate(ClassificationModule(model=model), datamodule=datamodule, verbose=False)
    assert set(ours) == {key.removeprefix("val/") for key in lightning}
    for key, value in lightning.items():
        assert ours[key.removeprefix("val/")] == pytest.approx(float(value), abs=1e-5), key


def classifier_run(tokenizer, folder, data: dict | None):
    """A run folder: hf_model/ (a tiny classifier) and, with `data`, a config.yaml whose data group is `data`."""
    L.seed_everything(4)
    config = small_config(vocab_size=tokenizer.get_vocab_size(), num_hidden_layers=1, num_attention_heads=2,
                          id2label={0: "negative", 1: "positive"})
    save(BertForSequenceClassification(config), tokenizer, folder / "hf_model")
    if data is not None:
        OmegaConf.save({"command": "fine-tune", "data": data}, folder / "config.yaml")
    return folder


def test_without_data_a_run_is_scored_on_the_split_and_columns_it_validated_on(tokenizer, tiny_data_dir, tmp_path,
                                                                               capsys):
    data = {"source": str(tiny_data_dir / "sst2"), "validation_split": "train", "text_column": "sentence",
            "text_pair_column": None, "label_column": "label", "max_seq_length": 16}
    run = classifier_run(tokenizer, tmp_path / "run", data)
    outcome = run_in_process(["evaluate", str(run)], capsys)
    assert outcome.code == 0, outcome.err
    written = json.loads((run / "hf_model" / "eval_train.json").read_text())
    expected = evaluate(str(run / "hf_model"), str(tiny_data_dir / "sst2"), split="train", max_seq_length=16)
    assert (written["data"], written["split"]) == (str(tiny_data_dir / "sst2"), "train")
    assert {key: written[key] for key in expected} == pytest.approx(expected, abs=1e-6)


def test_without_data_or_a_run_that_names_it_the_error_says_what_to_give(tokenizer, tmp_path, capsys):
    run = classifier_run(tokenizer, tmp_path / "run", None)
    outcome = run_in_process(["evaluate", str(run)], capsys)
    assert outcome.code == 2
    assert outcome.error_lines == [f"bertlab: error: bertlab evaluate: give --data (a hub id such as stanfordnlp/sst2, "
                                   f"a folder of split files or a file): {run / 'hf_model'} is not the export of a run "
                                   f"whose config.yaml names its data"]


def test_a_hub_id_reads_the_data_folders_copy_as_recipes_do(tokenizer, tiny_data_dir, tmp_path, monkeypatch, capsys):
    run = classifier_run(tokenizer, tmp_path / "run", None)
    monkeypatch.setenv("BERTLAB_DATA_DIR", str(tiny_data_dir))
    outcome = run_in_process(["evaluate", str(run), "--data", "stanfordnlp/sst2"], capsys)
    assert outcome.code == 0, outcome.err
    assert json.loads((run / "hf_model" / "eval_validation.json").read_text())["data"] == str(tiny_data_dir / "sst2")


def test_evaluate_scores_a_token_classifier_as_its_validation_loop_does(tmp_path):
    from bertlab.commands.evaluate import evaluate_tagger
    from bertlab.data.token_classification import TokenClassificationDataModule
    from bertlab.lit.token_classification import TokenClassificationModule
    from bertlab.model import BertForTokenClassification
    from bertlab.tokenizer import train_tokenizer
    from tests.data.test_token_classification import TAGS, write_conll

    data = write_conll(tmp_path / "conll", rows=90)
    words = [" ".join(row) for row in pd.read_parquet(data / "train.parquet")["tokens"]]
    vocabulary = train_tokenizer(words, vocab_size=60, min_frequency=1)
    L.seed_everything(4)
    config = small_config(vocab_size=vocabulary.get_vocab_size(), num_hidden_layers=1, num_attention_heads=2,
                          id2label=dict(enumerate(TAGS)), label2id={name: i for i, name in enumerate(TAGS)})
    tagger = save(BertForTokenClassification(config), vocabulary, tmp_path / "tagger")
    ours, types = evaluate_tagger(str(tagger), str(data), batch_size=5)
    datamodule = TokenClassificationDataModule(str(data), str(tagger), label_names=TAGS, eval_batch_size=16)
    trainer = L.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    module = TokenClassificationModule(model=BertForTokenClassification.from_pretrained(tagger))
    (lightning,) = trainer.validate(module, datamodule=datamodule, verbose=False)
    assert ours["f1"] > 0 and {row["type"] for row in types} <= {"PER", "LOC"}
    for key in ("precision", "recall", "f1", "accuracy"):
        assert ours[key] == pytest.approx(float(lightning[f"val/{key}"]), abs=1e-6), key
    for row in types:
        assert row["f1"] == pytest.approx(float(lightning[f"entity/{row['type']}/f1"]), abs=1e-6)
