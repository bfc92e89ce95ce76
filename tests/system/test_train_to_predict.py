"""End to end through the real command line: train → fine-tune → evaluate → predict, on tiny
synthetic data laid out like shared/data, and the checkpoints read back by transformers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from bertlab import BertForMaskedLM, BertForSequenceClassification
from bertlab.tokenizer import load_tokenizer
from tests.bertlab_runs import run_child

pytestmark = pytest.mark.slow  # every test reads runs of fresh interpreters (run_child)
TINY_MODEL = ["model.num_hidden_layers=1", "model.hidden_size=32", "model.num_attention_heads=2",
              "model.intermediate_size=64", "model.max_position_embeddings=64", "data.max_seq_length=64"]
SHORT_RUN = ["trainer.max_steps=6", "trainer.val_check_interval=3", "trainer.limit_val_batches=2",
             "data.batch_size=8"]


@pytest.fixture(scope="module")
def workspace(tiny_data_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("workspace")
    env = {**os.environ, "BERTLAB_DATA_DIR": str(tiny_data_dir), "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_CACHE": str(root / "hf_cache")}
    return root, env


@pytest.fixture(scope="module")
def pretrained(workspace) -> Path:
    root, env = workspace
    run_dir = root / "outputs" / "mlm_tiny" / "run1"
    run_child(["train", "+recipe=mlm_tiny", *TINY_MODEL, *SHORT_RUN, "tokenizer.vocab_size=300",
            f"hydra.run.dir={run_dir}"], env=env, cwd=root)
    return run_dir


@pytest.fixture(scope="module")
def fine_tuned(workspace, pretrained) -> Path:
    root, env = workspace
    run_dir = root / "outputs" / "sst2" / "run1"
    run_child(["fine-tune", "+recipe=sst2", *SHORT_RUN, "data.limit_train_samples=64",
            f"hydra.run.dir={run_dir}"], env=env, cwd=root)
    return run_dir


def test_train_writes_every_output(pretrained: Path):
    for name in ("config.yaml", "metrics.csv", "metrics.json", "metrics.png", "lightning_checkpoints/last.ckpt",
                 "hf_model/config.json", "hf_model/model.safetensors", "hf_model/vocab.txt",
                 "hf_model/tokenizer.json"):
        assert (pretrained / name).is_file(), name
    latest = pretrained.parent / "latest"
    assert latest.is_symlink() and latest.resolve() == pretrained.resolve()
    metrics = json.loads((pretrained / "metrics.json").read_text())
    assert "val/perplexity" in metrics["final"]
    # The plain-text measure against the unigram model of the run's own training tokens.
    assert {"text/perplexity", "text/unigram_perplexity", "text/perplexity_ratio"} <= set(metrics["final"])
    assert metrics["final"]["text/perplexity_ratio"] == pytest.approx(
        metrics["final"]["text/perplexity"] / metrics["final"]["text/unigram_perplexity"], rel=1e-4)
    assert not list(pretrained.rglob("*.tmp")), "no temporary files left behind"


def test_transformers_reproduces_pretrained_predictions(pretrained: Path):
    transformers = pytest.importorskip("transformers")
    checkpoint = pretrained / "hf_model"
    text = "the first document says something . and then more"
    theirs_tokenizer = transformers.BertTokenizerFast.from_pretrained(checkpoint)
    ours_tokenizer = load_tokenizer(checkpoint)
    ids = theirs_tokenizer(text, return_tensors="pt")
    assert ids["input_ids"][0].tolist() == ours_tokenizer.encode(text).ids
    theirs = transformers.BertForMaskedLM.from_pretrained(checkpoint).eval()
    ours = BertForMaskedLM.from_pretrained(checkpoint).eval()
    with torch.no_grad():
        expected = theirs(**ids).logits
        actual = ours(ids["input_ids"], ids["attention_mask"], ids["token_type_ids"]).logits
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)


def test_fine_tune_exports_a_classifier_transformers_agrees_with(fine_tuned: Path):
    transformers = pytest.importorskip("transformers")
    checkpoint = fine_tuned / "hf_model"
    config = json.loads((checkpoint / "config.json").read_text())
    assert config["id2label"] == {"0": "negative", "1": "positive"}
    assert config["architectures"] == ["BertForSequenceClassification"]
    sentences = ["a good movie", "the plot was awful and boring"]
    tokenizer = transformers.BertTokenizerFast.from_pretrained(checkpoint)
    theirs = transformers.BertForSequenceClassification.from_pretrained(checkpoint).eval()
    ours = BertForSequenceClassification.from_pretrained(checkpoint).eval()
    batch = tokenizer(sentences, padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = theirs(**batch).logits
        actual = ours(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).logits
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)
    pipeline = transformers.pipeline("text-classification", model=str(checkpoint), device="cpu")
    labels = [row["label"] for row in pipeline(sentences)]
    assert labels == [config["id2label"][str(i)] for i in expected.argmax(-1).tolist()]


def test_evaluate_prints_and_writes_metrics(workspace, fine_tuned: Path, tiny_data_dir: Path):
    root, env = workspace
    output = root / "eval.json"
    result = run_child(["evaluate", str(fine_tuned / "hf_model"), "--data", str(tiny_data_dir / "sst2"),
                     "--output", str(output)], env=env, cwd=root)
    assert "accuracy:" in result.stdout
    metrics = json.loads(output.read_text())
    assert 0.0 <= metrics["accuracy"] <= 1.0 and {"f1", "mcc", "loss"} <= set(metrics)


def test_predict_sentences_and_files(workspace, fine_tuned: Path, tiny_data_dir: Path):
    root, env = workspace
    checkpoint = str(fine_tuned / "hf_model")
    result = run_child(["predict", checkpoint, "a wonderful film", "dull"], env=env, cwd=root)
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [row["text"] for row in rows] == ["a wonderful film", "dull"]
    for row in rows:
        assert row["label"] in ("negative", "positive")
        assert sum(row["probabilities"].values()) == pytest.approx(1.0, abs=1e-4)
    output = root / "predictions.csv"
    run_child(["predict", checkpoint, "--file", str(tiny_data_dir / "sst2" / "validation.parquet"),
            "--column", "sentence", "--output", str(output)], env=env, cwd=root)
    lines = output.read_text().splitlines()
    assert lines[0].split(",")[:3] == ["text", "label", "score"] and len(lines) == 65


def test_scratch_control_runs_with_the_pretrained_vocabulary(workspace, pretrained: Path):
    root, env = workspace
    run_dir = root / "outputs" / "sst2_scratch" / "run1"
    run_child(["fine-tune", "+recipe=sst2_scratch", *TINY_MODEL, *SHORT_RUN, "data.limit_train_samples=64",
            f"hydra.run.dir={run_dir}"], env=env, cwd=root)
    config = json.loads((run_dir / "hf_model" / "config.json").read_text())
    assert config["vocab_size"] == load_tokenizer(pretrained / "hf_model").get_vocab_size()
    assert config["hidden_size"] == 32
