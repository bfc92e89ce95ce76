"""`python -m bertlab shrink` writes a smaller classifier that transformers loads, with its selection record, and
refuses sizes the source cannot give in one line (the selection itself: tests/test_weight_selection.py)."""

from __future__ import annotations

import json

import pytest
import torch

from bertlab.config import BertConfig
from bertlab.model import BertForSequenceClassification
from bertlab.tokenizer import save_tokenizer, train_tokenizer
from tests.bertlab_runs import run_in_process
from tests.test_weight_selection import SOURCE


def test_shrink_writes_a_classifier_transformers_loads(tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    tokenizer = train_tokenizer(["a good film", "a bad film", "not good at all"] * 5, vocab_size=40)
    torch.manual_seed(0)
    config = BertConfig(**{**SOURCE, "vocab_size": tokenizer.get_vocab_size()}, id2label={0: "neg", 1: "pos"})
    source_dir = tmp_path / "source"
    BertForSequenceClassification(config).save_pretrained(source_dir)
    save_tokenizer(tokenizer, source_dir)
    output = tmp_path / "small"
    result = run_in_process(["shrink", str(source_dir), "--layers", "2", "--hidden", "16", "--heads", "1",
                             "--output", str(output)], capsys)
    assert result.code == 0, result.err
    loaded, info = transformers.BertForSequenceClassification.from_pretrained(output, output_loading_info=True)
    assert not any(info.values()), info
    assert (loaded.config.num_hidden_layers, loaded.config.hidden_size, loaded.config.num_attention_heads,
            loaded.config.intermediate_size) == (2, 16, 1, 64)
    assert loaded.config.id2label == {0: "neg", 1: "pos"}
    record = json.loads((output / "selection.json").read_text())
    assert record["layers"] == [1, 3] and record["parameters"] == loaded.num_parameters()
    assert (output / "tokenizer.json").is_file()

    refused = run_in_process(["shrink", str(source_dir), "--layers", "2", "--hidden", "64", "--heads", "2",
                              "--output", str(tmp_path / "too_wide")], capsys)
    assert refused.code == 2
    assert refused.error_lines == [
        "bertlab: error: bertlab shrink: hidden=64: must be from 1 to the source model's 32"]
    assert not (tmp_path / "too_wide").exists()
