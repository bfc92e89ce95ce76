"""A tiny classifier (random weights, 2 layers × 4 heads) saved with a tokenizer of the synthetic SST-2."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import torch

from bertlab.config import BertConfig
from bertlab.model import BertForSequenceClassification
from bertlab.tokenizer import save_tokenizer, train_tokenizer


@pytest.fixture(scope="module")
def classifier_dir(tiny_data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    sentences = pd.read_parquet(tiny_data_dir / "sst2" / "train.parquet")["sentence"].tolist()
    tokenizer = train_tokenizer(sentences, vocab_size=60)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=64, max_position_embeddings=64,
                        id2label={0: "negative", 1: "positive"})
    directory = tmp_path_factory.mktemp("classifier") / "hf_model"
    BertForSequenceClassification(config).save_pretrained(directory)
    save_tokenizer(tokenizer, directory)
    return directory
