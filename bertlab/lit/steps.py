"""Callbacks around each training step: its random draws seeded by its place in the run (SeedEveryStep),
a validation of the final step (ValidateFinalStep), and a stop on a non-finite loss that never saves the
diverged weights (FiniteLossGuard)."""

from __future__ import annotations

import random
from typing import Any

import lightning as L
import numpy as np
import torch

from bertlab.argument_checks import Count, checks_arguments
from bertlab.errors import BertlabError
from bertlab.metrics import VALIDATION_PREFIXES


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


@checks_arguments
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
