"""The route of one `train` or `fine-tune` run, top to bottom in `run_training`: the data and the LightningModule
(bertlab.training.run.modules; `prepare_training` builds them, before Hydra makes the folder of a single run), the
run folder and the checkpoint to resume from, the faster precision where `trainer.precision: fastest` asks for it
(bertlab.training.run.precision) and the length of training a time budget affords (bertlab.training.run.budget),
then the Trainer with its callbacks, loggers and plugins, built once, `fit`, the Hugging Face export and the
summary. Before it, Hydra has composed the config, bertlab.training.launch.app.launch has checked it, and Hydra has
made the run folder.

Exact resume: a run restarted from a checkpoint ends with the same weights and metrics.csv as one
never interrupted. Lightning restores the model, optimizer, scheduler and loop counters; the
datamodules restore their position in the epoch (bertlab.data.batches.ResumableTrainingOrder);
masking is a function of (seed, step); `SeedEveryStep` makes every other random draw one too;
`restore_metrics` puts back the metrics rows written before the checkpoint; `AtomicCheckpointIO`
means that a checkpoint on disk is always whole.
"""

from __future__ import annotations

import logging
import os
import time
import warnings
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import lightning as L
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from bertlab.lit.run_artifacts import ExportPretrained
from bertlab.metrics import best_point, read_metrics, run_summary, series
from bertlab.training.run import budget, modules, precision, run_folder

log = logging.getLogger("bertlab")


def set_torch_flags(deterministic: bool | str | None, benchmark: bool | None) -> None:
    """torch's switches for trainer.deterministic and trainer.benchmark, as the Trainer sets them when it is
    built (Lightning 2.6 does it in its accelerator connector, with no public function to call): deterministic
    kernels turn cuDNN's benchmark off unless it is asked for; "warn" warns of a nondeterministic kernel."""
    if deterministic and benchmark is None:
        benchmark = False
    if benchmark is not None:
        torch.backends.cudnn.benchmark = benchmark
    if deterministic is not None:
        torch.use_deterministic_algorithms(bool(deterministic), warn_only=deterministic == "warn")
    if deterministic:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"  # cuBLAS's reproducible workspace


@dataclass
class PreparedRun:
    """What `prepare_training` built, for `run_training`."""
    module: L.LightningModule
    datamodule: L.LightningDataModule
    started: float  # time.perf_counter() as the preparation began


def prepare_training(cfg: DictConfig) -> PreparedRun:
    """torch's determinism switches and the seed, then the data and the LightningModule: what refuses a teacher, a
    tokenizer, a data source or a freeze pattern, which bertlab.training.launch.app.launch runs before Hydra makes
    a run's folder."""
    started = time.perf_counter()
    # The Trainer's switches of trainer.deterministic and trainer.benchmark, before any data or model exists.
    set_torch_flags(cfg.trainer.get("deterministic"), cfg.trainer.get("benchmark"))
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    module, datamodule = modules.build(modules.ModuleGroups(
        command=cfg.command, data=cfg.data, task=cfg.task, model=cfg.model, optimizer=cfg.optimizer,
        scheduler=cfg.scheduler, tokenizer=cfg.get("tokenizer"), seed=cfg.seed))
    return PreparedRun(module, datamodule, started)


def run_training(cfg: DictConfig, prepared: PreparedRun | None = None) -> float | None:
    """Trains, exports and summarises one run, `prepared` already or prepared here (a job of a sweep). A run with
    a `monitor` (fine-tune) exports its best checkpoint and returns the best value of `monitor`, the objective a
    sweeper such as Optuna (hydra/sweeper=optuna) optimises (None in the processes other than the first, which
    write no metrics, and in runs that never validate); one without (train) exports its final weights and returns
    None."""
    prepared = prepared or prepare_training(cfg)
    module, datamodule, started = prepared.module, prepared.datamodule, prepared.started
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    checkpoint = run_folder.resume_path(cfg.resume, run_dir)
    precision_note = None
    if cfg.trainer.get("precision") == precision.FASTEST:
        shape = precision.what_is_timed(cfg.model, cfg.data, cfg.task, cfg.trainer)
        precision_note = precision.choose(cfg.trainer, shape, precision.training_device(cfg.trainer), module,
                                          datamodule, run_dir, checkpoint)
    if checkpoint is not None:
        step = run_folder.checkpoint_step(Path(checkpoint))
        log.info("Resuming from %s (step %d)", checkpoint, step)
        run_folder.check_resume_checkpoint_fits(module, checkpoint)
    replan = []
    if cfg.budget_minutes is not None:
        replan = budget.fix_length(time_budget(cfg, run_dir), module, datamodule, run_dir, checkpoint)
        cfg.budget_minutes = None  # config.yaml records the steps the budget chose instead
    monitor, monitor_mode = cfg.get("monitor"), cfg.get("monitor_mode")
    export = ExportPretrained(str(run_dir / run_folder.HF_MODEL), weights="final" if monitor is None else "best")
    trainer = build_trainer(cfg, [export, *replan])
    if checkpoint is not None:
        # Only now that every check has passed: Lightning's CSVLogger replaces metrics.csv.
        run_folder.restore_metrics(trainer, Path(checkpoint), step)
        # Lightning checks only the dataloaders for state; bertlab's datamodules hold it.
        warnings.filterwarnings("ignore", message="You're resuming from a checkpoint that ended before the epoch ended")
    record_config(cfg, run_dir, precision_note)
    trainer.fit(module, datamodule=datamodule, ckpt_path=checkpoint)
    if trainer.is_global_zero:
        minutes = (time.perf_counter() - started) / 60
        run_folder.write_timing(run_dir, minutes)
        if HydraConfig.get().mode == RunMode.RUN:
            run_folder.point_latest(run_dir)
        print(run_summary(run_dir, minutes, monitor, monitor_mode))
    if monitor is None:
        return None
    metrics = read_metrics(run_dir)
    if not run_folder.is_rank_zero() or monitor not in metrics:
        return None
    return best_point(series(metrics, monitor), monitor_mode, monitor)[1]


def time_budget(cfg: DictConfig, run_dir: Path) -> budget.Budget:
    """`budget_minutes` with the groups of `cfg` a budget reads and sets."""
    return budget.Budget(minutes=cfg.budget_minutes, trainer=cfg.trainer, scheduler=cfg.scheduler,
                         checkpoint_callback=OmegaConf.select(cfg, "callbacks.checkpoint"),
                         record_config=partial(record_config, cfg, run_dir))


def record_config(cfg: DictConfig, run_dir: Path, comment: str | None = None) -> None:
    """`cfg`, resolved, as the run folder's config.yaml (bertlab.training.run.run_folder.write_config)."""
    run_folder.write_config(OmegaConf.to_yaml(cfg, resolve=True), run_dir, comment)


def build_trainer(cfg: DictConfig, extra_callbacks: list[L.Callback] = ()) -> L.Trainer:
    """The Trainer of `cfg.trainer` with the `callbacks` and `logger` groups and `extra_callbacks`."""
    callbacks = [instantiate(spec) for spec in cfg.get("callbacks", {}).values() if spec is not None]
    loggers = [instantiate(spec) for spec in cfg.get("logger", {}).values() if spec is not None]
    return instantiate(cfg.trainer, callbacks=[*callbacks, *extra_callbacks], logger=loggers)
