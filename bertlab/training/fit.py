"""What every training command shares, in the order it happens: the run folder and the checkpoint
to resume from, the Trainer with its callbacks, loggers and plugins (built before any data is
prepared, so that a bad value fails in seconds), then the command's own data and module, the
faster precision where `trainer.precision: fastest` asks for it (bertlab.training.precision), the
length of training a time budget affords (bertlab.training.budget), `fit`, the Hugging Face export
and the summary.

Exact resume: a run restarted from a checkpoint ends with the same weights and metrics.csv as one
never interrupted. Lightning restores the model, optimizer, scheduler and loop counters; the
datamodules restore their position in the epoch (bertlab.data.sampling.ResumableTrainingOrder);
masking is a function of (seed, step); `SeedEveryStep` makes every other random draw one too;
`restore_metrics` puts back the metrics rows written before the checkpoint; `AtomicCheckpointIO`
means that a checkpoint on disk is always whole.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import lightning as L
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from hydra.utils import instantiate
from omegaconf import DictConfig

from bertlab.lit.run_artifacts import ExportPretrained
from bertlab.metrics import run_summary
from bertlab.training import budget, precision, run_folder

log = logging.getLogger("bertlab")
# What a command builds once the Trainer exists: its LightningModule and LightningDataModule.
Prepare = Callable[[], tuple[L.LightningModule, L.LightningDataModule]]


def fit(cfg: DictConfig, prepare: Prepare, export_weights: str = "final", monitor: str | None = None,
        monitor_mode: str | None = None) -> Path:
    """Runs one training command: fits the module `prepare` returns and exports `export_weights`
    ("final", or "best" by the checkpoint callback's monitor) to <run>/hf_model. Returns the run folder."""
    started = time.perf_counter()
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    checkpoint = run_folder.resume_path(cfg.resume, run_dir)
    export = ExportPretrained(str(run_dir / run_folder.HF_MODEL), weights=export_weights)
    trainer = build_trainer(cfg, [export])
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    module, datamodule = prepare()
    if cfg.trainer.get("precision") == precision.FASTEST:  # the Trainer above, built before the choice, is replaced
        precision.choose(cfg, trainer.strategy.root_device, module, datamodule, run_dir, checkpoint)
        trainer = build_trainer(cfg, [export])
    if checkpoint is not None:
        step = run_folder.checkpoint_step(Path(checkpoint))
        log.info("Resuming from %s (step %d)", checkpoint, step)
        run_folder.check_checkpoint_fits(module, checkpoint)
        # Only now that every check has passed: Lightning's CSVLogger replaces metrics.csv.
        run_folder.restore_metrics(trainer, Path(checkpoint), step)
        # Lightning checks only the dataloaders for state; bertlab's datamodules hold it.
        warnings.filterwarnings("ignore", message="You're resuming from a checkpoint that ended before the epoch ended")
    if cfg.budget_minutes is not None:  # before the scheduler is built: it decays to trainer.max_steps
        budget.fix_length(cfg, trainer, module, datamodule, run_dir, checkpoint)
    run_folder.write_config(cfg, run_dir)
    trainer.fit(module, datamodule=datamodule, ckpt_path=checkpoint)
    if trainer.is_global_zero:
        minutes = (time.perf_counter() - started) / 60
        run_folder.write_timing(run_dir, minutes)
        if HydraConfig.get().mode == RunMode.RUN:
            run_folder.point_latest(run_dir)
        print(run_summary(run_dir, minutes, monitor, monitor_mode))
    return run_dir


def build_trainer(cfg: DictConfig, extra_callbacks: list[L.Callback] = ()) -> L.Trainer:
    """The Trainer of `cfg.trainer` with the `callbacks` and `logger` groups; in 32-true while
    `trainer.precision: fastest` is not yet chosen."""
    callbacks = [instantiate(spec) for spec in cfg.get("callbacks", {}).values() if spec is not None]
    loggers = [instantiate(spec) for spec in cfg.get("logger", {}).values() if spec is not None]
    unchosen = {"precision": precision.BEFORE_CHOICE} if cfg.trainer.get("precision") == precision.FASTEST else {}
    return instantiate(cfg.trainer, callbacks=[*callbacks, *extra_callbacks], logger=loggers, **unchosen)
