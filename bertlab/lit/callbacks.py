"""Every Lightning callback and plugin bertlab adds: checkpoints written atomically and also at the
end of training, seeding every step, the Hugging Face–format export, metric plots and summaries, a
validation of the final step, a stop on a non-finite loss, and token throughput. Early stopping,
learning-rate and progress display are Lightning's own callbacks, configured in conf/callbacks."""

from __future__ import annotations

import json
import math
import os
import random
import time
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import ModelCheckpoint, ThroughputMonitor
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.plugins.io import TorchCheckpointIO
from lightning.pytorch.trainer.states import RunningStage
from lightning.pytorch.utilities import rank_zero_only, rank_zero_warn
from tokenizers import Tokenizer

from bertlab.errors import BertlabError, ConfigError
from bertlab.flops import dense_bf16_peak_flops
from bertlab.hf_format import export_pretrained, write_atomically
from bertlab.metrics import VALIDATION_PREFIXES, plot_metrics, read_metrics, summarise_metrics
from bertlab.value_rules import Count, NonNegative, Positive


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
    """Lightning's ModelCheckpoint (every validation, the newest `save_top_k` kept, plus last.ckpt),
    and last.ckpt also when training ends between two validations, so that a finished run can
    always be resumed or extended from its final state. The loggers are flushed before each save.
    Without a `dirpath`, checkpoints go to FOLDER in the Trainer's `default_root_dir` (the run folder)."""

    FOLDER = "lightning_checkpoints"
    LAST = f"{ModelCheckpoint.CHECKPOINT_NAME_LAST}{ModelCheckpoint.FILE_EXTENSION}"

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self.dirpath is None:
            self.dirpath = os.path.join(trainer.default_root_dir, self.FOLDER)
        super().setup(trainer, pl_module, stage)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.save_last and not self._should_skip_saving_checkpoint(trainer):
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        # `restore_metrics` takes the rows logged before a checkpoint from metrics.csv: they must be
        # on disk before the checkpoint is.
        for logger in trainer.loggers:
            logger.save()


class SeedEveryStep(L.Callback):
    """Seeds Python's, NumPy's and torch's global generators before every training batch from
    (seed, rank, step, batch index). Dropout and any other draw in a step then depend only on the
    step's place in the run, not on what ran before it in this process (validation, dataloader
    start-up, checkpoint loading), so a resumed run draws what the uninterrupted one drew, with no
    generator states in the checkpoint."""

    def __init__(self, seed: int):
        self.seed = seed

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        state = np.random.SeedSequence([self.seed, trainer.global_rank, trainer.global_step, batch_idx])
        seed = int(state.generate_state(1, dtype=np.uint32)[0])
        random.seed(seed)
        np.random.seed(seed)
        if pl_module.device.type == "cpu":
            # torch.manual_seed also queues the seed for every accelerator torch knows and has not started
            # (CUDA, XPU, MTIA), formatting a stack trace for each: 0.7 ms, 4% of a BERT-Tiny fine-tuning step.
            torch.default_generator.manual_seed(seed)
        else:
            torch.manual_seed(seed)


class ExportPretrained(L.Callback):
    """At the end of fit, exports `module.model` with the tokenizer (`tokenizer`, else the datamodule's
    `tokenizer`) to `dirpath` as a Hugging Face–format directory, from rank 0.

    `weights="final"` exports the weights as training left them; `"best"` reloads the best checkpoint
    of the Trainer's ModelCheckpoint (falling back to the final weights, with a warning, when
    no checkpoint was saved).
    """

    def __init__(self, dirpath: str, weights: str = "final", tokenizer: Tokenizer | None = None):
        if weights not in ("final", "best"):
            raise ConfigError(f"ExportPretrained.weights must be 'final' or 'best', got {weights!r}")
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
        frame = read_metrics(Path(logger.log_dir))
        if frame.empty:
            return  # nothing logged yet
        directory = Path(self.dirpath or logger.log_dir)
        summary = json.dumps(summarise_metrics(frame), indent=2) + "\n"
        write_atomically(directory / "metrics.json", lambda temp: Path(temp).write_text(summary))
        if plot:
            plot_metrics(frame, directory / "metrics.png")
            self._plotted_at = time.monotonic()


class ValidateFinalStep(L.Callback):
    """Validates the final training step when it falls between two `val_check_interval`s (which
    Lightning counts across epochs here, so it skips the end of training), so the finished model
    always gets scored and can be the best checkpoint. It asks the loop to stop after its last batch:
    Lightning answers a stop request with a validation run (as for early stopping)."""

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        last_step = trainer.max_steps not in (None, -1) and trainer.global_step >= trainer.max_steps
        last_epoch = trainer.max_epochs not in (None, -1) and trainer.current_epoch + 1 >= trainer.max_epochs
        if last_step or (last_epoch and batch_idx + 1 >= trainer.num_training_batches):
            trainer.should_stop = True


class FiniteLossGuard(L.Callback):
    """Stops training with a BertlabError naming the step when the training loss turns NaN or inf,
    and refuses to save a checkpoint after it, so the last good checkpoint stays the newest.

    Trade-off: the loss is tested on the device every step, but the host reads the verdict (one
    sync) only every `check_every_n_steps` batches and before each checkpoint save, so a divergence
    is reported up to that many batches late — never saved.
    """

    def __init__(self, check_every_n_steps: Count = 50):
        self.check_every_n_steps = check_every_n_steps
        self._first_bad_step: torch.Tensor | None = None  # on the device; -1 while all losses are finite
        self._batches = 0
        self._step = 0

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._first_bad_step = None
        self._batches = 0

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        self._step = trainer.global_step

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        if loss is None:
            return
        if self._first_bad_step is None:
            self._first_bad_step = torch.full((), -1, dtype=torch.long, device=loss.device)
        newly_bad = ~torch.isfinite(loss.detach()).all() & (self._first_bad_step < 0)
        self._first_bad_step = torch.where(newly_bad, self._step, self._first_bad_step)
        self._batches += 1
        if self._batches % self.check_every_n_steps == 0:
            self._check(trainer)

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule,
                           checkpoint: dict[str, Any]) -> None:
        self._check(trainer)
        # An update that blows the weights up is saved before any training loss shows it; the
        # validation just before the save does.
        diverged = sorted(name for name, value in trainer.callback_metrics.items()
                          if name.startswith(VALIDATION_PREFIXES) and name.endswith("loss")
                          and not torch.isfinite(value).all())
        if not trainer.strategy.reduce_boolean_decision(not diverged, all=True):
            self._stop(trainer, f"{diverged[0] if diverged else 'validation loss'} became NaN or inf after "
                                f"training step {trainer.global_step - 1}")

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._check(trainer)

    def _check(self, trainer: L.Trainer) -> None:
        if self._first_bad_step is None:
            return
        bad_step = int(self._first_bad_step)
        # Every process must stop together, so the verdict is shared.
        if trainer.strategy.reduce_boolean_decision(bad_step < 0, all=True):
            return
        where = f"at training step {bad_step}" if bad_step >= 0 else "in another process"
        self._stop(trainer, f"training loss became NaN or inf {where}")

    @staticmethod
    def _stop(trainer: L.Trainer, what: str) -> None:
        directory = getattr(trainer.checkpoint_callback, "dirpath", None)
        kept = f"; checkpoints saved before it are kept in {directory}" if directory else ""
        raise BertlabError(f"{what} (global step, 0-based); stopped without saving the diverged weights{kept}. "
                           f"Lower the learning rate, raise warmup, or set trainer.gradient_clip_val")


def _sequences(batch: dict[str, torch.Tensor]) -> int:
    return batch["input_ids"].shape[0]


def _tokens(batch: dict[str, torch.Tensor]) -> int:
    return batch["input_ids"].numel()  # padding included: counting real tokens would sync the device


class TokenThroughputMonitor(ThroughputMonitor):
    """Lightning's ThroughputMonitor for bertlab's dict batches: logs train/device/samples_per_sec
    (sequences), train/device/items_per_sec (tokens, padding included), train/device/flops_per_sec
    (the module's `flops_per_batch`, bertlab.lit.model_flops) and train/device/mfu, those FLOP/s over
    the device's peak: `peak_flops` (FLOP/s of one device), else the datasheet's dense bf16 peak for a
    bf16 run on a GPU bertlab.flops lists, else Lightning's table of GPUs for the training precision
    (no peak on CPU: no MFU).

    Lightning's monitor reads the clock after every batch, and on a GPU that is a device sync: the host
    stops queueing the next step's kernels until the device has finished this one, and the device idles
    while it launches them. This one counts every training batch but reads the clock only on the steps
    it logs (trainer.log_every_n_steps) and before a validation, so `window_size` counts logged steps.
    """

    def __init__(self, peak_flops: Positive | None = None, **kwargs: Any):
        super().__init__(batch_size_fn=_sequences, length_fn=_tokens, **kwargs)
        self.peak_flops = peak_flops
        self._unclocked_flops: dict[RunningStage, float] = {}
        self._unclocked_batches: dict[RunningStage, int] = {}

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        device = trainer.strategy.root_device
        if self.peak_flops is None and device.type == "cuda" and "bf16" in str(trainer.precision):
            self.peak_flops = dense_bf16_peak_flops(torch.cuda.get_device_name(device))
        if self.peak_flops is not None:
            self.available_flops = self.peak_flops
            for throughput in self._throughputs.values():  # made in super().setup with the device's peak
                throughput.available_flops = self.peak_flops

    def _start(self, trainer: L.Trainer) -> None:
        super()._start(trainer)
        self._unclocked_flops[trainer.state.stage] = 0.0
        self._unclocked_batches[trainer.state.stage] = 0

    def _update(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, iter_num: int) -> None:
        stage = trainer.state.stage
        self._samples[stage] += self.batch_size_fn(batch)
        self._lengths[stage] += self.length_fn(batch)
        self._batches[stage] += 1
        self._unclocked_batches[stage] += 1
        self._unclocked_flops[stage] += pl_module.flops_per_batch or 0.0  # None before the first batch is counted
        if stage != RunningStage.TRAINING or trainer._logger_connector.should_update_logs:
            self._clock(trainer, stage)

    def _clock(self, trainer: L.Trainer, stage: RunningStage) -> None:
        """Records the counts so far against the time the device has taken for them."""
        device = trainer.strategy.root_device
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        self._throughputs[stage].update(time=time.perf_counter() - self._t0s[stage], batches=self._batches[stage],
                                        samples=self._samples[stage], lengths=self._lengths[stage],
                                        flops=self._unclocked_flops[stage])
        self._unclocked_flops[stage] = 0.0
        self._unclocked_batches[stage] = 0

    @rank_zero_only
    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # The training batches since the last logged step end before the validation's time is set aside.
        if not trainer.sanity_checking and self._unclocked_batches.get(RunningStage.TRAINING):
            self._clock(trainer, RunningStage.TRAINING)
        super().on_validation_start(trainer, pl_module)
