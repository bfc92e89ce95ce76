"""A time budget for training, `budget_minutes=…` (as cramming's `budget` and academic-budget-bert's
time-based schedule): a short calibration measures the run's speed, and the number of optimizer steps
that fits in the budget becomes `trainer.max_steps` before the learning-rate schedule is built.

Calibration: a trial (bertlab.training.run.trial), a throwaway copy of the module training a few steps on
the run's data in a Trainer of the run's own settings (precision, strategy, devices, accumulation), then
writing one checkpoint and running one validation. The run's module, data order and random generators
are left as they were, so the run that follows is the one a fixed `trainer.max_steps` gives.

The rule: max_steps is the largest S with  S·step + ⌈S/k⌉·validation ≤ budget − calibration − start-up,
where `step` is the mean of the timed steps, `validation` one validation plus the checkpoints written
after it, k the steps between validations (the last step gets one too), and `start-up` what the
warm-up steps took beyond their share of `step` (Trainer set-up, first batches, compilation), which
the run pays again. Preparing the data and choosing the precision (`trainer.precision: fastest`,
bertlab.training.run.precision) before, the module's own set-up in the calibration (a distillation teacher
labelling the texts, once: the run reads them from its cache) and the export after are outside the budget.

The calibration's few steps catch the machine at one moment, and a 2-core machine's pace drifts by 10–20%
over minutes. So the run re-plans once, at the end of its warm-up: the steps left become what the time
left affords at the slower of the calibration's pace and that of the run's own steps since the trial's
warm-up (validations apart): a budget is a ceiling, and on the 2-core machines here the first minutes of
a run step ~5% faster than the rest (docs/results/pretraining.md), so a faster warm-up does not lengthen it. Up to then
the learning rate does not depend on the total (bertlab.lit.optim.WarmupSchedule), so the re-planned run
is the run that the new total gives from the start. It needs the warm-up to span at least PACE_STEPS
steps beyond the trial's warm-up, and the run's one learning-rate schedule to be a WarmupSchedule; else
the calibration's total stands.

config.yaml records the chosen `trainer.max_steps` (the re-planned one once it is known) and the warm-up
as `scheduler.warmup_steps`, with `trainer.max_epochs: -1` and `budget_minutes: null`: that config repeats
the run bit for bit, without calibrating. A resumed run keeps the steps of
the config.yaml of the run it resumes. `trainer.max_steps` or `trainer.max_epochs` on the command line
beside `budget_minutes` is refused; the values of a recipe are replaced.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import lightning as L
from lightning.pytorch.callbacks import TQDMProgressBar
from omegaconf import DictConfig, OmegaConf, open_dict

from bertlab.errors import CheckpointError, ConfigError
from bertlab.lit.optim import WarmupSchedule
from bertlab.training.run import run_folder, trial

log = logging.getLogger("bertlab")
PACE_STEPS = 10  # the fewest steps of the run's own whose pace may re-plan it


@dataclass(frozen=True)
class Budget:
    """`budget_minutes` and the groups of the run's config a budget reads and sets."""
    minutes: float
    trainer: DictConfig                     # timed; the budget sets its max_steps and max_epochs
    scheduler: DictConfig | None            # a re-plan records its warmup_steps
    checkpoint_callback: DictConfig | None  # callbacks.checkpoint: the checkpoints written after a validation
    record_config: Callable[[], None]       # rewrites config.yaml once a re-plan has set the steps


@dataclass(frozen=True)
class Calibration:
    step_seconds: float          # one optimizer step, the mean of the timed steps
    startup_seconds: float       # what the warm-up steps took beyond WARMUP_STEPS × step_seconds
    validation_seconds: float    # one validation and the checkpoints written after it
    steps_per_validation: float  # inf: the run validates only after its last step
    elapsed_seconds: float       # the calibration as a whole, less the module's set-up


def recorded_length(checkpoint: Path) -> tuple[int, int]:
    """(max_steps, max_epochs) of the run `checkpoint` belongs to, from its config.yaml."""
    path = run_folder.run_config(checkpoint)
    try:
        trainer = OmegaConf.load(path).trainer
        return int(trainer.max_steps), int(trainer.max_epochs)
    except Exception:
        raise CheckpointError(f"budget_minutes with resume: {path}, which records the steps the budget chose, is "
                              f"missing or has no trainer.max_steps; resume with trainer.max_steps=N instead of "
                              f"budget_minutes") from None


def fix_length(budget: Budget, module: L.LightningModule, datamodule: L.LightningDataModule, run_dir: Path,
               checkpoint: str | None) -> list[L.Callback]:
    """Sets `max_steps` (and `max_epochs: -1`) of the budget's trainer group, before the Trainer is built:
    calibrated, or on resume the values of the resumed run. Returns the Trainer's callback that re-plans the
    steps at the end of the warm-up (none on resume)."""
    minutes, replan = budget.minutes, []
    if checkpoint is not None:
        steps, epochs = recorded_length(Path(checkpoint))
        log.info("budget_minutes=%g: resuming, keeping trainer.max_steps=%d of the resumed run", minutes, steps)
    else:
        calibration = calibrate(budget, module, datamodule, run_dir)
        deadline = trial.clock() + minutes * 60 - calibration.elapsed_seconds
        left = minutes * 60 - calibration.elapsed_seconds - calibration.startup_seconds
        steps, epochs = affordable_steps(left, calibration), -1
        if steps < 1:
            raise ConfigError(f"budget_minutes={minutes}: too short to train after the calibration, which took "
                              f"{calibration.elapsed_seconds:.3g} s of {minutes * 60:.3g} s "
                              f"({calibration.step_seconds:.3g} s per step); raise budget_minutes")
        every = calibration.steps_per_validation
        log.info("budget_minutes=%g: trainer.max_steps=%d at %.3g steps/s measured (calibration %.1f s, start-up "
                 "%.1f s, %.1f s per validation and its checkpoints, %s)", minutes, steps, 1 / calibration.step_seconds,
                 calibration.elapsed_seconds, calibration.startup_seconds, calibration.validation_seconds,
                 f"every {every:g} steps" if math.isfinite(every) else "after the last step")
        replan = [Replan(budget, deadline, calibration)]
    budget.trainer.max_steps, budget.trainer.max_epochs = steps, epochs
    return replan


def affordable_steps(seconds: float, calibration: Calibration) -> int:
    """The most steps S with S·step + ⌈S/k⌉·validation ≤ `seconds` (see the module's docstring)."""
    step, validation, k = calibration.step_seconds, calibration.validation_seconds, calibration.steps_per_validation

    def cost(steps: int) -> float:
        return steps * step + (math.ceil(steps / k) if math.isfinite(k) else 1) * validation

    steps = max(0, math.floor(seconds / (step + validation / k)))  # no fewer than the answer
    while steps > 0 and cost(steps) > seconds:
        steps -= 1
    return steps


def replanned_steps(warmup_steps: int, seconds_left: float, step_seconds: float, calibration: Calibration) -> int:
    """The total steps at the end of a warm-up of `warmup_steps` that ran at `step_seconds` a step, with
    `seconds_left` of the budget: at least one more step, at the slower of that pace and the calibration's."""
    pace = Calibration(step_seconds=max(step_seconds, calibration.step_seconds), startup_seconds=0.0,
                       elapsed_seconds=0.0, validation_seconds=calibration.validation_seconds,
                       steps_per_validation=calibration.steps_per_validation)
    return warmup_steps + max(1, affordable_steps(seconds_left, pace))


def calibrate(budget: Budget, module: L.LightningModule, datamodule: L.LightningDataModule,
              run_dir: Path) -> Calibration:
    """A trial of the run (bertlab.training.run.trial): its steps, then one validation and the checkpoints
    written after it."""
    timing = trial.time_steps(budget.trainer, module, datamodule, run_dir)
    checkpoint = budget.checkpoint_callback
    checkpoint_writes = 0 if checkpoint is None else 1 + bool(checkpoint.get("save_last"))
    validation = (timing.validation_seconds or 0.0) + checkpoint_writes * timing.checkpoint_seconds
    return Calibration(step_seconds=timing.step_seconds, startup_seconds=timing.startup_seconds,
                       validation_seconds=validation, steps_per_validation=timing.steps_per_validation,
                       elapsed_seconds=timing.elapsed_seconds)


class Replan(L.Callback):
    """Re-plans `trainer.max_steps` at the end of the warm-up from the pace of the run's steps since
    trial.WARMUP_STEPS or the calibration's, the slower (see the module's docstring); records it, with the
    warm-up, in config.yaml."""

    def __init__(self, budget: Budget, deadline: float, calibration: Calibration):
        self.budget, self.deadline, self.calibration = budget, deadline, calibration
        self.first_step = trial.WARMUP_STEPS
        self.started: float | None = None  # the clock at first_step
        self.validating = self._validation_started = 0.0
        self.replanned = False

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch,
                           batch_idx: int) -> None:
        if self.replanned:
            return
        schedules = [config.scheduler for config in trainer.lr_scheduler_configs]
        if len(schedules) != 1 or not isinstance(schedules[0], WarmupSchedule):
            return
        warmup = schedules[0].warmup_steps
        if self.started is None and trainer.global_step == self.first_step:
            self.started, self.validating = trial.now(pl_module), 0.0
        elif self.started is not None and trainer.global_step == warmup >= self.first_step + PACE_STEPS:
            self.replan(trainer, pl_module, schedules[0], batch_idx)

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._validation_started = trial.now(pl_module)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.validating += trial.now(pl_module) - self._validation_started

    def replan(self, trainer: L.Trainer, pl_module: L.LightningModule, schedule: WarmupSchedule,
               batch_idx: int) -> None:
        self.replanned, now, warmup = True, trial.now(pl_module), schedule.warmup_steps
        step = (now - self.started - self.validating) / (warmup - self.first_step)
        steps = trainer.strategy.broadcast(replanned_steps(warmup, self.deadline - now, step, self.calibration))
        log.info("budget_minutes: the warm-up's steps ran at %.3g steps/s (the calibration's %.3g): trainer.max_steps "
                 "%d → %d", 1 / step, 1 / self.calibration.step_seconds, trainer.max_steps, steps)
        schedule.total_steps = trainer.fit_loop.epoch_loop.max_steps = steps
        if isinstance(trainer.progress_bar_callback, TQDMProgressBar):  # its total was set at the epoch's start
            bar_total = min(trainer.num_training_batches, batch_idx + 1 + steps - trainer.global_step)
            trainer.progress_bar_callback.train_progress_bar.total = bar_total
        self.budget.trainer.max_steps = steps
        if self.budget.scheduler is not None:
            with open_dict(self.budget.scheduler):
                self.budget.scheduler.warmup_steps = warmup
        self.budget.record_config()
