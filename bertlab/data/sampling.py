"""Orders in which to visit a tokenized split: length-grouped for training, length-sorted for evaluation.

Batches of similar lengths waste little compute on padding. Training keeps randomness with the
mega-batch scheme: shuffle, cut into mega-batches of `mega_batch_factor * batch_size` rows, sort
each by length, cut into batches, shuffle the batches.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
from torch.utils.data import DistributedSampler

from bertlab.argument_checks import Count, check_rules, checks_arguments
from bertlab.errors import ConfigError
from bertlab.value_rules import Interval


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
