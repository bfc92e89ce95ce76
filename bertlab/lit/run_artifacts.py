"""What a run leaves in its folder: Lightning checkpoints, written atomically (AtomicCheckpointIO) into the run
folder at every validation and when training ends (RunCheckpoint), each recording which module saved it
(RecordsTask: `resume=` refuses a checkpoint of another task by reading it, bertlab.training.checks.environment);
the Hugging Face–format export of the model (ExportPretrained); and metrics.json and metrics.png drawn from the
CSVLogger's metrics.csv (MetricsArtifacts)."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Annotated, Any

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.plugins.io import TorchCheckpointIO
from lightning.pytorch.utilities import rank_zero_warn
from tokenizers import Tokenizer

from bertlab.argument_checks import NonNegative, checks_arguments
from bertlab.atomic_files import write_atomically
from bertlab.checkpoint.dispatch import export_pretrained
from bertlab.errors import BertlabError, ConfigError
from bertlab.metrics import named_for_their_sets, plot_metrics, read_metrics, summarise_metrics
from bertlab.value_rules import OneOf

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


@checks_arguments
class ExportPretrained(L.Callback):
    """At the end of fit, exports `module.model` with the tokenizer (`tokenizer`, else the datamodule's
    `tokenizer`) to `dirpath` as a Hugging Face–format directory, from rank 0.

    `weights="final"` exports the weights as training left them; `"best"` reloads the best checkpoint
    of the Trainer's ModelCheckpoint (falling back to the final weights, with a warning, when
    no checkpoint was saved).
    """

    def __init__(self, dirpath: str, weights: Annotated[str, OneOf("final", "best")] = "final",
                 tokenizer: Tokenizer | None = None):
        self.dirpath = dirpath
        self.weights = weights
        self.tokenizer = tokenizer

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.is_global_zero:
            return
        tokenizer = self.tokenizer or getattr(trainer.datamodule, "tokenizer", None)
        if tokenizer is None:
            raise BertlabError(f"cannot export to {self.dirpath}: no tokenizer; the datamodule has no "
                               f"`tokenizer` attribute and none was given to ExportPretrained")
        export_pretrained(self._weights_to_export(trainer, pl_module.model), tokenizer, self.dirpath)

    def _weights_to_export(self, trainer: L.Trainer, model: torch.nn.Module) -> torch.nn.Module:
        if self.weights == "final":
            return model
        best_path = getattr(trainer.checkpoint_callback, "best_model_path", "")
        if not best_path:
            rank_zero_warn(f"ExportPretrained: no best checkpoint was saved; exporting the final weights "
                           f"to {self.dirpath}")
            return model
        state = torch.load(best_path, map_location="cpu", weights_only=True)["state_dict"]
        # A separate copy: the module itself keeps the weights it trained to.
        best = type(model)(model.config)
        best.load_state_dict({key.removeprefix("model."): value for key, value in state.items()
                              if key.startswith("model.")})
        return best


@checks_arguments
class MetricsArtifacts(L.Callback):
    """After each validation and at the end of fit, turns the CSVLogger's metrics.csv into
    metrics.json (final and best values) and metrics.png (training loss and validation metrics against
    step), written to `dirpath` (default: the CSVLogger's log directory), from rank 0. The PNG is redrawn
    at most every `plot_every_seconds` during fit (the first validation's always, the end's always):
    drawing it takes ~0.4 s, longer than a small model's validation."""

    def __init__(self, dirpath: str | None = None, plot_every_seconds: NonNegative = 60.0):
        self.dirpath = dirpath
        self.plot_every_seconds = plot_every_seconds
        self._plotted_at = -math.inf

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if not any(isinstance(logger, CSVLogger) for logger in trainer.loggers):
            raise ConfigError("MetricsArtifacts reads the CSVLogger's metrics.csv, but the Trainer has no "
                              "CSVLogger; add one to the trainer's loggers or remove the callback")

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking:
            self.write(trainer, plot=time.monotonic() - self._plotted_at >= self.plot_every_seconds)

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.write(trainer)

    def write(self, trainer: L.Trainer, plot: bool = True) -> None:
        if not trainer.is_global_zero:
            return
        logger = next(logger for logger in trainer.loggers if isinstance(logger, CSVLogger))
        logger.save()
        frame = named_for_their_sets(read_metrics(Path(logger.log_dir)))
        if frame.empty:
            return  # nothing logged yet
        directory = Path(self.dirpath or logger.log_dir)
        summary = json.dumps(summarise_metrics(frame), indent=2) + "\n"
        write_atomically(directory / "metrics.json", lambda temp: Path(temp).write_text(summary))
        if plot:
            plot_metrics(frame, directory / "metrics.png")
            self._plotted_at = time.monotonic()
