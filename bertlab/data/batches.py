"""Tokenized rows to padded batches: `collate` pads the rows of `tokenize_dataset` (bertlab.data.encoding)
to the batch's longest, `TokenizedRows` holds them as numpy arrays, and the dataloaders visit them
length-grouped for training or length-sorted for evaluation (bertlab.data.sampling).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from collections.abc import Mapping, Sequence
from typing import Any

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
from torch.utils.data import DataLoader, Dataset

from bertlab.data.sampling import ResumableTrainingOrder, length_sorted_order


def collate(rows: Sequence[Mapping[str, Any]], *, pad_token_id: int = 0) -> dict[str, torch.Tensor]:
    """Pad rows of `tokenize_dataset` to the batch's longest: input_ids, attention_mask,
    token_type_ids (long [B, L]), index (long [B]) and labels (long or float [B]) when present."""
    lengths = np.fromiter((len(row["input_ids"]) for row in rows), dtype=np.int64, count=len(rows))
    attention_mask = np.arange(lengths.max(initial=0)) < lengths[:, None]
    input_ids = np.full(attention_mask.shape, pad_token_id, dtype=np.int64)
    token_type_ids = np.zeros(attention_mask.shape, dtype=np.int64)
    # Boolean-mask assignment fills row-major, the order of the concatenated rows.
    input_ids[attention_mask] = np.concatenate([row["input_ids"] for row in rows])
    token_type_ids[attention_mask] = np.concatenate([row["token_type_ids"] for row in rows])
    batch = {
        "input_ids": torch.from_numpy(input_ids),
        "attention_mask": torch.from_numpy(attention_mask.astype(np.int64)),
        "token_type_ids": torch.from_numpy(token_type_ids),
        "index": torch.tensor([int(row["index"]) for row in rows], dtype=torch.long),
    }
    if "labels" in rows[0]:
        labels = np.asarray([row["labels"] for row in rows])
        batch["labels"] = torch.from_numpy(labels.astype(np.float32 if labels.dtype.kind == "f" else np.int64))
    return batch


class TokenizedRows(Dataset):
    """The rows of a `tokenize_dataset` result held as numpy arrays, for `collate`: a row is a few
    slices, where datasets formats each batch from Arrow anew (1 ms a batch of 32: 5% of a BERT-Tiny
    fine-tuning step, in the training loop's process)."""

    def __init__(self, dataset: datasets.Dataset):
        table = dataset.with_format("arrow")[:]
        self.num_rows = table.num_rows
        self.scalars: dict[str, np.ndarray] = {}
        self.lists: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # name: (values, row offsets into them)
        for name in table.column_names:
            column = table.column(name).combine_chunks()
            if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
                ends = np.cumsum(pc.list_value_length(column).to_numpy(zero_copy_only=False))
                self.lists[name] = column.flatten().to_numpy(), np.concatenate([[0], ends])
            else:
                self.scalars[name] = column.to_numpy(zero_copy_only=False)

    def __len__(self) -> int:
        return self.num_rows

    def __getitem__(self, i: int) -> dict[str, Any]:
        row: dict[str, Any] = {name: values[i] for name, values in self.scalars.items()}
        for name, (values, offsets) in self.lists.items():
            row[name] = values[offsets[i]:offsets[i + 1]]
        return row


def length_sorted_dataloader(
    dataset: datasets.Dataset, batch_size: int, *, pad_token_id: int, num_workers: int = 0, collate_rows=collate
) -> DataLoader:
    """Batches of a `tokenize_dataset` result in length-sorted order (longest first); `collate_rows` pads them
    (a token classifier's pads its labels too)."""
    rows = TokenizedRows(dataset)
    return DataLoader(
        rows,
        batch_size=batch_size,
        sampler=length_sorted_order(rows.scalars["length"]).tolist(),
        collate_fn=functools.partial(collate_rows, pad_token_id=pad_token_id),
        num_workers=num_workers,
    )


def length_grouped_dataloader(
    dataset: datasets.Dataset, order: ResumableTrainingOrder, batch_size: int, seed: int, *, pad_token_id: int,
    num_workers: int = 0, collate_rows=collate
) -> DataLoader:
    """Training batches of a `tokenize_dataset` result: rows of similar length together, in `order`'s seeded
    order, resumable mid-epoch (bertlab.data.sampling); `collate_rows` pads them."""
    rows = TokenizedRows(dataset)
    return DataLoader(
        rows,
        batch_size=batch_size,
        sampler=order.training_sampler(rows.scalars["length"], batch_size, seed),
        collate_fn=functools.partial(collate_rows, pad_token_id=pad_token_id),
        num_workers=num_workers,
        persistent_workers=num_workers > 0,
    )


@dataclass(frozen=True)
class PretrainingCollator:
    """Pads sequences to the longest in the batch (or to `pad_to_length`, so that every batch has one
    shape) and adds attention and special-token masks.

    Specials are found by position (first token, last token, end of segment A) rather than by id,
    so a literal "[SEP]" in the text stays maskable text. With `is_continuation` (a bool per
    vocabulary id, true for "##" pieces) it adds `word_ids`: a word is a token plus the
    continuation pieces after it; specials and padding get -1.
    """

    pad_token_id: int
    is_continuation: np.ndarray | None = None
    pad_to_length: int | None = None

    def __call__(self, rows: list[dict[str, np.ndarray]]) -> dict[str, torch.Tensor]:
        lengths = np.array([len(row["input_ids"]) for row in rows])
        positions = np.arange(max(lengths.max(), self.pad_to_length or 0))[None, :]
        filled = positions < lengths[:, None]
        input_ids = np.full(filled.shape, self.pad_token_id, dtype=np.int64)
        input_ids[filled] = np.concatenate([row["input_ids"] for row in rows])
        token_type_ids = np.zeros(filled.shape, dtype=np.int64)
        token_type_ids[filled] = np.concatenate([row["token_type_ids"] for row in rows])
        first_sep = ((token_type_ids == 0) & filled).sum(axis=1, keepdims=True) - 1
        special = (positions == 0) | (positions == first_sep) | (positions == lengths[:, None] - 1) | ~filled
        batch = {
            "input_ids": torch.from_numpy(input_ids),
            "attention_mask": torch.from_numpy(filled.astype(np.int64)),
            "token_type_ids": torch.from_numpy(token_type_ids),
            "special_tokens_mask": torch.from_numpy(special),
        }
        if self.is_continuation is not None:
            word_ids = np.cumsum(~self.is_continuation[input_ids] | special, axis=1) - 1
            word_ids[special] = -1
            batch["word_ids"] = torch.from_numpy(word_ids)
        if "next_sentence_label" in rows[0]:
            batch["next_sentence_label"] = torch.tensor([int(row["next_sentence_label"]) for row in rows])
        return batch
