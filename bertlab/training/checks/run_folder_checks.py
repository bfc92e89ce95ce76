"""The checks of a run's folder before it is written (bertlab.training.run.run_folder): the output folder can
be created, it holds no other run (`check_holds_nothing`, which a command's output passes too), and a
checkpoint to resume was saved by this command and task for this model (and, with a budget or
`trainer.precision: fastest`, its run recorded the steps or the precision)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from bertlab.checkpoint.dispatch import read_config
from bertlab.config import BertConfig
from bertlab.errors import CheckpointError, ConfigError
from bertlab.metrics import METRICS_CSV
from bertlab.training.run import budget, precision, run_folder
from bertlab.training.run.model_group import ARCHITECTURE_KEYS

# The modules of `train`; the others fine-tune.
TRAIN_TASKS = ("PretrainingModule", "EmbeddingDistillationModule")
RUN_FOLDER_CHOICE = "with hydra.run.dir=… (or hydra.sweep.dir=… with -m), or set BERTLAB_OUTPUT_DIR"


def check_output_folder(folder: str | Path, how_to_choose: str = RUN_FOLDER_CHOICE) -> None:
    """Make sure the output folder can be created (as far as one can tell without writing); the error
    says how to choose another (`how_to_choose`: a run's keys by default, a command's option)."""
    path = Path(folder).absolute()
    existing = next(parent for parent in (path, *path.parents) if parent.exists())
    problem = ("is not a folder" if not existing.is_dir() else
               "is not writable" if not os.access(existing, os.W_OK | os.X_OK) else None)
    if problem:
        raise ConfigError(f"output folder {path} cannot be created: {existing} {problem}; choose another "
                          f"{how_to_choose}")


def check_run_folder(run_dir: Path, resume: str | None) -> None:
    """A run never writes into the folder of another run that got as far as results (metrics,
    checkpoints, an export), unless it resumes that run."""
    if resume == "auto" or (resume and run_dir.resolve() in (Path(resume).resolve(), *Path(resume).resolve().parents)):
        return
    results = (METRICS_CSV, run_folder.CHECKPOINTS, run_folder.HF_MODEL)
    check_holds_nothing(f"hydra.run.dir={run_dir}", sorted(name for name in results if (run_dir / name).exists()),
                        "a run", "folder", "continue that run with resume=auto")


def check_holds_nothing(output: str, held: Sequence[str], what: str, kind: str, instead: str) -> None:
    """An output never replaces work it did not just make: `output` (`hydra.run.dir=…`, `--output …`), a
    `kind` (folder or file) that holds `what` (the files `held`), is refused, saying how to go on `instead`."""
    if held:
        raise ConfigError(f"{output} already holds {what} ({', '.join(held)}); choose a new {kind}, or {instead}")


def check_resume(resume: str | None, run_dir: Path, *, budget_minutes: float | None, trainer_precision: str | None,
                 model: DictConfig, task: DictConfig, data: DictConfig) -> None:
    """The checkpoint of `resume` was saved by this command and task, for this model's shape (the run's `model`,
    `task` and `data` groups); with a budget or `trainer.precision: fastest`, its run folder's config.yaml holds
    the steps or the precision to keep."""
    checkpoint = run_folder.resume_path(resume, run_dir)
    if checkpoint is None:
        return
    if budget_minutes is not None:
        budget.recorded_length(Path(checkpoint))
    if trainer_precision == precision.FASTEST:
        precision.recorded_precision(Path(checkpoint))
    task_name = task._target_.rpartition(".")[2]
    saved_task = run_folder.checkpoint_task(Path(checkpoint))
    if saved_task != task_name:
        raise CheckpointError(f"resume={resume}: {checkpoint} was saved by {saved_task} ("
                              f"{'train' if saved_task in TRAIN_TASKS else 'fine-tune'}), not by this run's "
                              f"{task_name}; resume a checkpoint of the same command")
    saved = run_folder.checkpoint_hyperparameters(Path(checkpoint))
    shape = read_config(model.init_from).to_dict() if model.init_from else OmegaConf.to_container(model, resolve=True)
    expected = {f"model.{key}": shape.get(key) for key in ARCHITECTURE_KEYS}
    if task_name == "PretrainingModule":
        expected["task.nsp"] = bool(task.nsp)
    elif task_name not in TRAIN_TASKS:
        expected["data.num_labels"] = data.num_labels
    # A checkpoint saved before a key existed was built with its default.
    defaults = {f"model.{f.name}": f.default for f in dataclasses.fields(BertConfig) if f.name in ARCHITECTURE_KEYS}
    found = {**defaults, **{f"model.{key}": value for key, value in saved.get("config", {}).items()},
             "task.nsp": saved.get("nsp"),
             "data.num_labels": saved.get("config", {}).get("num_labels")}
    differing = [f"{key} (run {value}, checkpoint {found.get(key)})" for key, value in expected.items()
                 if found.get(key) != value]
    if differing:
        raise CheckpointError(f"resume={resume}: {checkpoint} does not fit this run: "
                              f"{'; '.join(differing)}")
