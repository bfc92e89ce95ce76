"""Tokenized rows to padded batches, and the orders in which batches visit a split: `collate` pads the rows of
`tokenize_dataset` (bertlab.data.encoding) to the batch's longest, `TokenizedRows` holds them as numpy arrays,
and the dataloaders visit them length-grouped for training or length-sorted for evaluation.

Batches of similar lengths waste little compute on padding. Training keeps randomness with the
mega-batch scheme: shuffle, cut into mega-batches of `mega_batch_factor * batch_size` rows, sort
each by length, cut into batches, shuffle the batches (`LengthGroupedSampler`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from bertlab.argument_checks import Count, check_rules, checks_arguments
from bertlab.errors import ConfigError
from bertlab.value_rules import Interval


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
    order, resumable mid-epoch (`LengthGroupedSampler`, below); `collate_rows` pads them."""
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


@checks_arguments
class LengthGroupedSampler(DistributedSampler):
    """Seeded, resumable, rank-sharded order of row indices for training.

    Every consecutive `batch_size` indices it yields form one batch of rows of similar length, so
    a DataLoader with the same `batch_size` (and `drop_last=False`) gets exactly `epoch_batches()`.
    It yields indices rather than batches because Lightning calls `set_epoch` only on a
    DataLoader's `sampler`, and leaves a `DistributedSampler` alone instead of wrapping it with one
    that would reshuffle single rows across ranks: this class shards whole batches itself.

    Each epoch's order depends on (seed, epoch) only. With `num_replicas > 1`, rank r takes global
    batches r, r + num_replicas, ...; the global list is padded by repeating its first batches so
    that every rank gets the same number of batches (DDP needs equal step counts).
    `drop_short_batch` leaves out the epoch's last, short batch (where a full one exists): every batch
    then has one shape, which torch.compile compiles once.
    """

    def __init__(
        self,
        lengths: Sequence[int] | np.ndarray,
        batch_size: Count,
        *,
        seed: int = 0,
        epoch: int = 0,
        mega_batch_factor: Count = 50,
        num_replicas: int = 1,
        rank: int = 0,
        drop_short_batch: bool = False,
    ) -> None:
        check_rules("rank", rank, [Interval(f"[0, {num_replicas})", whole=True,
                                            says=f"in [0, num_replicas={num_replicas})")])
        self.lengths = np.asarray(lengths, dtype=np.int64)
        super().__init__(self.lengths, num_replicas=num_replicas, rank=rank, shuffle=True, seed=seed)
        self.batch_size = batch_size
        self.mega_batch_factor = mega_batch_factor
        self.drop_short_batch = drop_short_batch
        self.epoch = epoch
        self._position = 0  # indices of this rank's epoch already handed out (or skipped on resume)
        self._resume_position = 0
        # len(self), as in DistributedSampler: this rank's indices in a whole epoch, also when resuming
        # mid-epoch (Lightning counts the batches of a resumed epoch from where it stopped).
        self.num_samples = sum(len(batch) for batch in self.epoch_batches())

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self._position = self._resume_position = 0
        self.epoch = epoch

    def global_batches(self) -> list[np.ndarray]:
        """All batches of the current epoch, before sharding: every row exactly once."""
        rng = np.random.default_rng((self.seed, self.epoch))
        order = rng.permutation(len(self.lengths))
        mega_batch_size = self.mega_batch_factor * self.batch_size
        batches = []
        for start in range(0, len(order), mega_batch_size):
            mega_batch = order[start : start + mega_batch_size]
            mega_batch = mega_batch[np.argsort(-self.lengths[mega_batch], kind="stable")]
            batches.extend(np.array_split(mega_batch, range(self.batch_size, len(mega_batch), self.batch_size)))
        # Only the very last batch can be short; it stays last so the flat order cuts back into these batches.
        num_full = len(batches) - (len(batches[-1]) < self.batch_size) if batches else 0
        shuffled = [batches[i] for i in rng.permutation(num_full)]
        return shuffled if self.drop_short_batch and num_full else shuffled + batches[num_full:]

    def epoch_batches(self) -> list[np.ndarray]:
        """This rank's batches of the current epoch, in order."""
        batches = self.global_batches()
        num_per_rank = math.ceil(len(batches) / self.num_replicas)
        num_padding = num_per_rank * self.num_replicas - len(batches)
        if num_padding:
            short = [batches.pop()] if len(batches[-1]) < self.batch_size else []
            repeatable = batches or short
            padding = [repeatable[i % len(repeatable)] for i in range(num_padding)]
            batches = batches + padding + short  # the short batch stays the last of its rank
        return batches[self.rank :: self.num_replicas]

    def __iter__(self) -> Iterator[int]:
        batches = self.epoch_batches()
        flat = np.concatenate(batches) if batches else np.empty(0, dtype=np.int64)
        start, self._resume_position = self._resume_position, 0
        self._position = start
        for index in flat[start:].tolist():
            self._position += 1  # before the yield: the consumer holds this index once it resumes
            yield index

    def state_dict(self) -> dict[str, Any]:
        """Epoch and number of this rank's batches handed out so far, plus the settings they depend on."""
        return {
            "epoch": self.epoch,
            "batches_yielded": math.ceil(self._position / self.batch_size),
            "seed": self.seed,
            "batch_size": self.batch_size,
            "mega_batch_factor": self.mega_batch_factor,
            "num_rows": len(self.lengths),
            "num_replicas": self.num_replicas,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume: the next iteration of `state["epoch"]` skips its first `state["batches_yielded"]` batches."""
        own = self.state_dict()
        settings = ("seed", "batch_size", "mega_batch_factor", "num_rows", "num_replicas")
        changed = {key: (state.get(key), own[key]) for key in settings if state.get(key) != own[key]}
        if changed:
            details = ", ".join(f"{key} {saved} -> {now}" for key, (saved, now) in changed.items())
            raise ConfigError(
                f"cannot resume the training order mid-epoch: the data settings changed ({details}); "
                "resume with the same data, batch size, seed and number of devices"
            )
        self.epoch = int(state["epoch"])
        self._position = self._resume_position = min(int(state["batches_yielded"]) * self.batch_size, len(self))


class ResumableTrainingOrder:
    """For a LightningDataModule (list it first among the bases) whose training order is a
    `LengthGroupedSampler`: Lightning stores `state_dict()` in every checkpoint and calls
    `load_state_dict` on resume, so a run resumed mid-epoch goes on with the batch after the last
    one trained on, in the same epoch order. `train_dataloader` gets its sampler from `training_sampler`."""

    _train_sampler: LengthGroupedSampler | None = None
    _sampler_state_to_load: dict[str, Any] | None = None

    def training_sampler(self, lengths: Sequence[int] | np.ndarray, batch_size: int, seed: int,
                         drop_short_batch: bool = False) -> LengthGroupedSampler:
        trainer = self.trainer
        self._train_sampler = LengthGroupedSampler(
            lengths,
            batch_size,
            seed=seed,
            epoch=trainer.current_epoch if trainer is not None else 0,
            num_replicas=trainer.world_size if trainer is not None else 1,
            rank=trainer.global_rank if trainer is not None else 0,
            drop_short_batch=drop_short_batch,
        )
        if self._sampler_state_to_load is not None:
            self._train_sampler.load_state_dict(self._sampler_state_to_load)
            self._sampler_state_to_load = None
        return self._train_sampler

    def state_dict(self) -> dict[str, Any]:
        """The training order's position: epoch and batches this rank already trained on."""
        if self._train_sampler is None:
            return {}
        state = self._train_sampler.state_dict()
        trainer = self.trainer
        if trainer is not None and trainer.state.fn == "fit":
            # The loader runs ahead of training (worker and Lightning prefetching): count finished batches.
            done = trainer.fit_loop.epoch_loop.batch_progress.current.processed
            if done >= trainer.num_training_batches:
                state.update(epoch=trainer.current_epoch + 1, batches_yielded=0)
            else:
                state.update(epoch=trainer.current_epoch, batches_yielded=done)
        return {"train_sampler": state}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = state_dict.get("train_sampler")
        if state is None:
            return
        if self._train_sampler is not None:
            self._train_sampler.load_state_dict(state)
        else:
            self._sampler_state_to_load = state


def length_sorted_order(lengths: Sequence[int] | np.ndarray) -> np.ndarray:
    """Row indices, longest first (an out-of-memory error shows at once); ties keep the original order."""
    return np.argsort(-np.asarray(lengths, dtype=np.int64), kind="stable")


def padding_efficiency(lengths: Sequence[int] | np.ndarray, batches: Iterable[Sequence[int] | np.ndarray]) -> float:
    """Real tokens / tokens after padding every batch to its longest row (1.0 = no padding)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    real = padded = 0
    for batch in batches:
        batch_lengths = lengths[np.asarray(batch, dtype=np.int64)]
        real += int(batch_lengths.sum())
        padded += int(batch_lengths.max(initial=0)) * len(batch_lengths)
    return real / padded if padded else 1.0
