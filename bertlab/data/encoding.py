"""Texts to token ids for BERT: single sentences or sentence pairs, tokenized with a checkpoint's own
tokenizer (truncated to `max_seq_length`, longest-first for pairs, as Hugging Face does) and stored as
token ids with their lengths and row index; `collate` (bertlab.data.batches) pads them per batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import datasets
import numpy as np
from tokenizers import Tokenizer

from bertlab.argument_checks import check_rules
from bertlab.data.sources import require_columns
from bertlab.errors import DataError
from bertlab.value_rules import Interval

_TOKEN_FEATURES = {
    "input_ids": datasets.List(datasets.Value("int32")),
    "token_type_ids": datasets.List(datasets.Value("int8")),
    "length": datasets.Value("int32"),
    "index": datasets.Value("int64"),
}


def encode_texts(
    tokenizer: Tokenizer,
    texts: Sequence[str],
    text_pairs: Sequence[str] | None = None,
    *,
    max_seq_length: int = 128,
) -> dict[str, list]:
    """Token ids, token type ids and lengths of texts (or text pairs), with BERT's special tokens.

    Switches the tokenizer's truncation to `max_seq_length` (longest first) and its padding off:
    `collate` pads per batch.
    """
    truncate_without_padding(tokenizer, max_seq_length, paired=text_pairs is not None)
    inputs = list(texts) if text_pairs is None else list(zip(texts, text_pairs))
    encodings = tokenizer.encode_batch(inputs)
    return {
        "input_ids": [encoding.ids for encoding in encodings],
        "token_type_ids": [encoding.type_ids for encoding in encodings],
        "length": [len(encoding.ids) for encoding in encodings],
    }


def truncate_without_padding(tokenizer: Tokenizer, max_seq_length: int, *, paired: bool) -> None:
    special = tokenizer.num_special_tokens_to_add(paired)
    check_rules("max_seq_length", max_seq_length, [Interval(f"({special}, inf)", whole=True,
                                                            says=f"more than the {special} special tokens of a row")])
    truncation = {"max_length": max_seq_length, "stride": 0, "strategy": "longest_first", "direction": "right"}
    if tokenizer.truncation != truncation:
        tokenizer.enable_truncation(**truncation)
    if tokenizer.padding is not None:
        tokenizer.no_padding()


def tokenize_dataset(
    dataset: datasets.Dataset,
    tokenizer: Tokenizer,
    *,
    text_column: str,
    text_pair_column: str | None = None,
    max_seq_length: int = 128,
    labels: np.ndarray | None = None,
    name: str = "dataset",
) -> datasets.Dataset:
    """Columns input_ids, token_type_ids, length, index (+ labels, one per row, if given), numpy-formatted.

    `name` says which data this is in error messages (e.g. "split 'train'").
    """
    text_columns = [text_column] + ([text_pair_column] if text_pair_column else [])
    require_columns(dataset, text_columns, name)
    # Configured before `map` hashes the function, so the cache fingerprint sees the final tokenizer.
    truncate_without_padding(tokenizer, max_seq_length, paired=text_pair_column is not None)
    features = dict(_TOKEN_FEATURES)
    if labels is not None:
        features["labels"] = datasets.Value("float32" if labels.dtype.kind == "f" else "int64")

    def encode(batch: dict[str, list], indices: list[int]) -> dict[str, list]:
        for column in text_columns:
            _require_strings(batch[column], indices, column, name)
        encoded = encode_texts(
            tokenizer,
            batch[text_column],
            batch[text_pair_column] if text_pair_column else None,
            max_seq_length=max_seq_length,
        )
        encoded["index"] = indices
        if labels is not None:
            encoded["labels"] = labels[indices]
        return encoded

    tokenized = dataset.map(
        encode,
        batched=True,
        with_indices=True,
        remove_columns=dataset.column_names,
        features=datasets.Features(features),
        desc=f"Tokenizing {name}",
    )
    return tokenized.with_format("numpy")


def column_values(dataset: datasets.Dataset, column: str) -> np.ndarray:
    """A whole column as one numpy array (fast: no per-row Python objects)."""
    return np.asarray(dataset.with_format("numpy")[column][:])


def _require_strings(values: list, indices: list[int], column: str, name: str) -> None:
    for value, index in zip(values, indices):
        if not isinstance(value, str):
            raise DataError(f"column {column!r} of {name} holds {value!r} at row {index}; expected text")
