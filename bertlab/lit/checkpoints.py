"""How Lightning checkpoints are written: atomically (AtomicCheckpointIO), and into the run folder at every
validation and when training ends (RunCheckpoint). Each checkpoint of a bertlab LightningModule records which
module saved it (RecordsTask): `resume=` refuses a checkpoint of another task by reading it
(bertlab.training.checks.environment)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.plugins.io import TorchCheckpointIO

from bertlab.files import write_atomically

SAVED_BY = "bertlab_task"  # the checkpoint's key: the class name of the LightningModule that saved it


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning checkpoints written to a temporary file beside their final name, flushed to disk and
    renamed over it: a save interrupted at any moment (SIGKILL, a full disk) leaves the previous file
    whole. (Lightning's own save stages in the system temp folder, which becomes a copy, not a
    rename, when that folder is on another file system, and does not fsync.)"""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | os.PathLike, storage_options: Any = None) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options, got {storage_options!r}")
        write_atomically(Path(path), lambda temp: torch.save(checkpoint, temp))


class RunCheckpoint(ModelCheckpoint):
    """Lightning's ModelCheckpoint (every validation, the newest `save_top_k` kept), with last.ckpt written at
    every validation, whether or not a top-k checkpoint was, and when training ends between two validations:
    a killed run resumes from its last validation, and a finished one from its final state. The loggers are
    flushed before each save. Without a `dirpath`, checkpoints go to FOLDER in the Trainer's `default_root_dir`
    (the run folder)."""

    FOLDER = "lightning_checkpoints"
    LAST = f"{ModelCheckpoint.CHECKPOINT_NAME_LAST}{ModelCheckpoint.FILE_EXTENSION}"

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self.dirpath is None:
            self.dirpath = os.path.join(trainer.default_root_dir, self.FOLDER)
        super().setup(trainer, pl_module, stage)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        super().on_validation_end(trainer, pl_module)
        # Lightning 2.6 writes last.ckpt only beside a top-k save: a run keeping its best checkpoint by a metric
        # (fine-tune) would resume from its last improvement, not from its last validation.
        if (self.save_last and not self._should_skip_saving_checkpoint(trainer)
                and not self._should_save_on_train_epoch_end(trainer)):
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # Lightning 2.6 has no public "save last now": its own on_train_end saves only when no checkpoint was.
        if self.save_last and not self._should_skip_saving_checkpoint(trainer):
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        # `restore_metrics` takes the rows logged before a checkpoint from metrics.csv: they must be
        # on disk before the checkpoint is.
        for logger in trainer.loggers:
            logger.save()


class RecordsTask(L.LightningModule):
    """LightningModule mixin: its class name in every checkpoint it saves, under SAVED_BY."""

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_save_checkpoint(checkpoint)
        checkpoint[SAVED_BY] = type(self).__name__
