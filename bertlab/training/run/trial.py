"""A trial: a throwaway copy of the run's module trains WARMUP_STEPS + TIMED_STEPS steps on the run's
data in a Trainer of the run's own settings (precision, strategy, devices, accumulation), timed. The
run's module, data order and random generators are left as they were, so the run that follows is the
one it would be without a trial. The time budget (bertlab.training.run.budget) and `trainer.precision:
fastest` (bertlab.training.run.precision) measure a run so. The module's own set-up in the trial (a distillation
teacher labelling the texts, which the run then reads from its cache) is preparation, timed apart.
"""

from __future__ import annotations

import math
import random
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from copy import deepcopy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig

WARMUP_STEPS, TIMED_STEPS = 5, 20
clock = time.perf_counter  # tests put a fake clock here


@dataclass(frozen=True)
class Timing:
    step_seconds: float                # one optimizer step, the mean of the timed steps
    startup_seconds: float             # the warm-up steps beyond WARMUP_STEPS × step_seconds, less the module's set-up
    validation_seconds: float | None   # the validation that ends the loop; None: none ran
    checkpoint_seconds: float          # one checkpoint write; 0 when only the steps were timed
    steps_per_validation: float        # inf: the run validates only after its last step
    elapsed_seconds: float             # the trial as a whole, less the module's set-up


def time_steps(trainer: DictConfig, module: L.LightningModule, datamodule: L.LightningDataModule, run_dir: Path,
               steps_only: bool = False, **trainer_arguments: Any) -> Timing:
    """Times a throwaway copy of `module` training on `datamodule` in the Trainer of the run's `trainer` group, with
    `trainer_arguments` over its values; then, unless `steps_only`, one checkpoint write and the
    validation with which Lightning answers the stop. Every process gets the timing of the first."""
    started = clock()
    with tempfile.TemporaryDirectory(prefix=".trial-", dir=run_dir) as scratch, random_state_kept():
        timer = TrialClock(WARMUP_STEPS, WARMUP_STEPS + TIMED_STEPS,
                                 None if steps_only else Path(scratch) / "trial.ckpt")
        arguments = {"max_steps": WARMUP_STEPS + TIMED_STEPS, "max_epochs": -1,
                     **({"limit_val_batches": 0} if steps_only else {}), **trainer_arguments}
        probe = instantiate(trainer, **arguments, callbacks=[timer], logger=False, enable_checkpointing=False,
                            enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                            default_root_dir=scratch)
        probe.fit(independent_copy(module), datamodule=datamodule)
        (warm, warm_validating), (timed, timed_validating) = timer.marks
        step = ((timed - timed_validating) - (warm - warm_validating)) / TIMED_STEPS
        validates = timer.validation_seconds is not None
        timing = Timing(
            step_seconds=step,
            startup_seconds=max(0.0, warm - warm_validating - started - timer.setup_seconds - WARMUP_STEPS * step),
            validation_seconds=timer.validation_seconds,
            checkpoint_seconds=timer.checkpoint_seconds,
            steps_per_validation=(probe.val_check_batch * (probe.check_val_every_n_epoch or 1)
                                  / probe.accumulate_grad_batches) if validates else math.inf,
            elapsed_seconds=clock() - started - timer.setup_seconds)
        return probe.strategy.broadcast(timing)


class TrialClock(L.Callback):
    """Times the module's set-up (from the callbacks' `setup`, which Lightning calls just before the
    module's, to `on_fit_start`), reads `clock` after the warm-up steps and after the last step (with
    the time spent validating so far, left out of the steps), times one checkpoint write (unless
    `checkpoint_path` is None), then asks the loop to stop, which Lightning answers with a validation,
    timed too."""

    def __init__(self, warmup_steps: int, last_step: int, checkpoint_path: Path | None):
        self.mark_steps = (warmup_steps, last_step)
        self.checkpoint_path = checkpoint_path
        self.marks: list[tuple[float, float]] = []  # (clock, seconds validating until then) per mark
        self.validating = 0.0
        self.validation_seconds: float | None = None  # the latest validation; None: none ran
        self.checkpoint_seconds = 0.0
        self.setup_seconds = 0.0
        self._validation_started = self._setup_started = 0.0

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self._setup_started = now(pl_module)

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.setup_seconds = now(pl_module) - self._setup_started

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if len(self.marks) == len(self.mark_steps) or trainer.global_step < self.mark_steps[len(self.marks)]:
            return
        self.marks.append((now(pl_module), self.validating))
        if len(self.marks) == len(self.mark_steps):
            if self.checkpoint_path is not None:
                started = now(pl_module)
                trainer.save_checkpoint(self.checkpoint_path)
                self.checkpoint_seconds = now(pl_module) - started
            trainer.should_stop = True

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._validation_started = now(pl_module)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.validation_seconds = now(pl_module) - self._validation_started
        self.validating += self.validation_seconds


def now(module: L.LightningModule) -> float:
    """`clock` once the device has done the work queued so far."""
    if module.device.type == "cuda":
        torch.cuda.synchronize(module.device)
    return clock()


def independent_copy(module: L.LightningModule) -> L.LightningModule:
    """A deep copy with its own weights, its model compiled where `module`'s is (bertlab's modules compile
    `model` when built with `compile`, which their hyperparameters keep): a copy drops `nn.Module.compile`'s
    compiled call."""
    copy = deepcopy(module)
    if module.hparams.get("compile"):
        copy.model.compile(mode=module.hparams.get("compile_mode"))
    return copy


@contextmanager
def random_state_kept() -> Iterator[None]:
    """Python's, NumPy's and torch's global generators are put back as they were."""
    python, numpy, cpu = random.getstate(), np.random.get_state(), torch.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    try:
        yield
    finally:
        random.setstate(python)
        np.random.set_state(numpy)
        torch.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)
