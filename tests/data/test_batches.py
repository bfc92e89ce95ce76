"""Tokenized rows to padded batches (bertlab.data.batches): `TokenizedRows` and `collate` for classification,
`PretrainingCollator` for pretraining."""

from __future__ import annotations

import datasets
import numpy as np
import pytest
import torch

from bertlab.data.batches import PretrainingCollator, TokenizedRows, collate
from bertlab.data.encoding import tokenize_dataset
from bertlab.tokenizer import load_tokenizer
from tests.data.test_classification import tokenizer_dir

__all__ = ["tokenizer_dir"]  # the fixture, shared


@pytest.mark.parametrize("labels", [np.array([1, 0, 1, 1, 0]), np.array([0.5, -1.0, 2.0, np.nan, 0.0])],
                         ids=["class", "regression"])
def test_tokenized_rows_hold_and_collate_what_the_dataset_formats(tokenizer_dir, labels):
    texts = ["good film", "a long and dull movie with an awful ending", "fun", "", "the plot the actor"]
    dataset = tokenize_dataset(datasets.Dataset.from_dict({"text": texts, "second": texts[::-1]}),
                               load_tokenizer(tokenizer_dir), text_column="text", text_pair_column="second",
                               max_seq_length=8, labels=labels)
    for rows in (dataset, dataset.select([4, 0, 2])):  # a selection reads through datasets' index mapping
        held = TokenizedRows(rows)
        assert len(held) == len(rows)
        for i, expected in enumerate(rows):
            assert held[i].keys() == expected.keys()
            for name, value in expected.items():
                np.testing.assert_array_equal(held[i][name], value, err_msg=name)
        batch, expected_batch = collate([held[i] for i in range(len(held))]), collate(list(rows))
        for name, value in expected_batch.items():
            assert batch[name].dtype == value.dtype and torch.equal(batch[name].nan_to_num(), value.nan_to_num()), name


def test_collator_finds_specials_by_position_not_by_id():
    collate = PretrainingCollator(pad_token_id=0)
    rows = [
        {"input_ids": np.array([2, 9, 3, 8, 3]), "token_type_ids": np.array([0, 0, 0, 1, 1])},
        {"input_ids": np.array([2, 3, 3]), "token_type_ids": np.array([0, 0, 0])},  # literal [SEP] text token
    ]
    batch = collate(rows)
    assert batch["input_ids"].tolist() == [[2, 9, 3, 8, 3], [2, 3, 3, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
    assert batch["special_tokens_mask"].tolist() == [[True, False, True, False, True], [True, False, True, True, True]]


def test_collator_pads_to_a_fixed_length_when_asked():
    rows = [{"input_ids": np.array([2, 9, 3]), "token_type_ids": np.array([0, 0, 0])}]
    batch = PretrainingCollator(pad_token_id=0, pad_to_length=5)(rows)
    assert batch["input_ids"].tolist() == [[2, 9, 3, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0, 0]]
    assert batch["special_tokens_mask"].tolist() == [[True, False, True, True, True]]
