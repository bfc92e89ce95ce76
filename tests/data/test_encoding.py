"""Texts to token ids (bertlab.data.encoding), and their batches, without a data module."""

from __future__ import annotations

import datasets

from bertlab.data.batches import collate, length_sorted_dataloader
from bertlab.data.encoding import encode_texts, tokenize_dataset
from bertlab.tokenizer import load_tokenizer, special_token_ids
from tests.data.test_classification import tokenizer_dir

__all__ = ["tokenizer_dir"]  # the fixture, shared


def test_encode_texts_and_collate_work_without_a_datamodule(tokenizer_dir):
    tokenizer = load_tokenizer(tokenizer_dir)
    texts = ["good film", "a long and dull movie with an awful ending", "fun"]
    dataset = tokenize_dataset(
        datasets.Dataset.from_dict({"text": texts}), tokenizer, text_column="text", max_seq_length=8
    )
    loader = length_sorted_dataloader(dataset, 2, pad_token_id=special_token_ids(tokenizer)["pad"])
    batches = list(loader)
    assert [batch["index"].tolist() for batch in batches] == [[1, 0], [2]]
    assert batches[0]["input_ids"].shape == (2, 8)  # the long text is truncated to max_seq_length
    encoded = encode_texts(tokenizer, texts, max_seq_length=8)
    rows = [
        {"input_ids": ids, "token_type_ids": types, "index": i}
        for i, (ids, types) in enumerate(zip(encoded["input_ids"], encoded["token_type_ids"]))
    ]
    batch = collate(rows, pad_token_id=special_token_ids(tokenizer)["pad"])
    assert batch["attention_mask"].sum(dim=1).tolist() == encoded["length"]
    assert set(batch) == {"input_ids", "attention_mask", "token_type_ids", "index"}
