"""What a run needs of its surroundings: the optional extras of pyproject.toml that its config needs, a GPU
where it asks for one, search spaces the Optuna plugin accepts, checkpoints whose encoders fit
(bertlab.checkpoint.fitting.check_weights_fit), and a run folder to write: the output folder can be created, it
holds no other run (`check_holds_nothing`, which a command's output passes too), and a checkpoint to resume was
saved by this command and task for this model (and, with a budget or `trainer.precision: fastest`, its run
recorded the steps or the precision).

A missing extra is named in a one-line error before anything is written: the package of a logger
(`logger=tensorboard`, `mlflow`, `wandb`), and Hydra's sweeper and launcher plugins (`hydra/sweeper=optuna`,
`hydra/launcher=submitit_local|submitit_slurm`), whose configs exist only once the plugin is installed."""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from omegaconf import DictConfig, OmegaConf

from bertlab.checkpoint.dispatch import WEIGHTS_NAME, read_config
from bertlab.checkpoint.fitting import LoadReport, check_weights_fit, quietly_loaded
from bertlab.config import BertConfig
from bertlab.errors import CheckpointError, ConfigError
from bertlab.metrics import METRICS_CSV
from bertlab.model import BertModel
from bertlab.training.run import budget, precision, run_folder
from bertlab.training.run.model_group import ARCHITECTURE_KEYS

if TYPE_CHECKING:
    from hydra.core.override_parser.types import Override
    from optuna.distributions import BaseDistribution

# A logger's `_target_` → the package it imports, which is also the name of the extra that installs it.
LOGGER_PACKAGES = {
    "lightning.pytorch.loggers.TensorBoardLogger": "tensorboard",
    "lightning.pytorch.loggers.MLFlowLogger": "mlflow",
    "lightning.pytorch.loggers.WandbLogger": "wandb",
}
# A config of a Hydra plugin → (the plugin's package, the extra that installs it).
PLUGIN_EXTRAS = {
    "hydra/sweeper/optuna": ("hydra-optuna-sweeper", "optuna"),
    "hydra/launcher/submitit_local": ("hydra-submitit-launcher", "submitit"),
    "hydra/launcher/submitit_slurm": ("hydra-submitit-launcher", "submitit"),
}
# The modules of `train`; the others fine-tune.
TRAIN_TASKS = ("PretrainingModule", "EmbeddingDistillationModule")
RUN_FOLDER_CHOICE = "with hydra.run.dir=… (or hydra.sweep.dir=… with -m), or set BERTLAB_OUTPUT_DIR"


def installed(package: str) -> bool:
    return importlib.util.find_spec(package) is not None


def install_command(extra: str) -> str:
    return f'pip install -e ".[{extra}]"'


def check_logger_packages(loggers: DictConfig | None) -> None:
    """Every logger of the `logger` group, `loggers`, can be imported."""
    for name, spec in (loggers or {}).items():
        package = LOGGER_PACKAGES.get(spec.get("_target_")) if spec is not None else None
        if package is not None and not installed(package):
            raise ConfigError(f"logger={name} needs the {package} package: {install_command(package)}")


def missing_plugin_message(config_path: str) -> str | None:
    """What to install for a config of a Hydra plugin that is not installed (`hydra/sweeper/optuna`);
    None for any other config."""
    if config_path not in PLUGIN_EXTRAS:
        return None
    plugin, extra = PLUGIN_EXTRAS[config_path]
    group, _, option = config_path.rpartition("/")
    return f"{group}={option} needs Hydra's {plugin} plugin: {install_command(extra)}"


def check_accelerator(accelerator: str | None) -> None:
    """A GPU run (`accelerator`: trainer.accelerator) on a machine without one is refused here, not by Lightning
    inside the Trainer's construction."""
    if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        raise ConfigError(f"trainer.accelerator={accelerator}: this machine has no GPU that torch can use "
                          f"(torch.cuda.is_available() is False); use trainer=cpu, or run on a GPU machine")


def check_search_space(hydra: DictConfig) -> None:
    """Each search space of an Optuna sweep (`hydra`: the config's hydra group; its sweeper.params, and sweeps on
    the command line) is one Optuna accepts: `tag(log, interval(0, 1e-3))` is refused here naming its key."""
    sweeper = OmegaConf.select(hydra, "sweeper", default=None)
    if sweeper is None or "optuna" not in str(sweeper.get("_target_", "")).lower():
        return
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    spaces = [f"{key}={value}" for key, value in (OmegaConf.to_container(sweeper, resolve=False).get("params")
                                                  or {}).items()]
    for text in [*spaces, *hydra.overrides.task]:
        override = parser.parse_override(text)
        if not override.is_sweep_override():
            continue
        try:
            optuna_distribution(override)
        except Exception as error:  # Optuna's ValueError, a glob's NotImplementedError, ...
            reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise ConfigError(f"{text}: not a search space Optuna accepts ({reason}); e.g. "
                              f"{override.key_or_group}=tag(log, interval(1e-5, 1e-3)) or choice(16, 32)") from None


def optuna_distribution(override: Override) -> BaseDistribution:
    """The Optuna distribution hydra-optuna-sweeper 1.3 makes of a sweep override (what its
    create_optuna_distribution_from_override does, on public names), so Optuna refuses here what the sweep would."""
    from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep, Transformer
    from optuna.distributions import (CategoricalDistribution, DiscreteUniformDistribution, IntLogUniformDistribution,
                                      IntUniformDistribution, LogUniformDistribution, UniformDistribution)

    value = override.value()
    if isinstance(value, ChoiceSweep) or (isinstance(value, RangeSweep) and value.shuffle):
        return CategoricalDistribution(list(override.sweep_iterator(transformer=Transformer.encode)))
    if isinstance(value, RangeSweep):
        if any(isinstance(bound, float) for bound in (value.start, value.stop, value.step)):
            return DiscreteUniformDistribution(value.start, value.stop, value.step)
        return IntUniformDistribution(int(value.start), int(value.stop), step=int(value.step))
    if isinstance(value, IntervalSweep):
        integers = isinstance(value.start, int) and isinstance(value.end, int)
        if "log" in value.tags:
            return (IntLogUniformDistribution if integers else LogUniformDistribution)(value.start, value.end)
        return (IntUniformDistribution if integers else UniformDistribution)(value.start, value.end)
    raise NotImplementedError(f"{type(value).__name__.lower()}() is not a sweep the Optuna sweeper takes")


def check_checkpoints(model: DictConfig, task: DictConfig, data: DictConfig) -> None:
    """The encoder of every checkpoint the run will load (model.init_from, task.teacher, data.transfer.masked_lm)
    fits, before any folder or data is made."""
    loaded = {"model.init_from": model.init_from, "task.teacher": OmegaConf.select(task, "teacher", default=None),
              "data.transfer.masked_lm": OmegaConf.select(data, "transfer.masked_lm", default=None)}
    for key, folder in loaded.items():
        if folder:
            check_encoder_weights_fit(folder, f"{key}={folder}", bool(model.allow_reinitialised))


def check_encoder_weights_fit(folder: str | Path, what: str, allow: bool) -> None:
    """The check of `check_weights_fit` on the encoder of the checkpoint `folder`, before a run uses it
    (check_checkpoints); a folder without weights is left to the step that reads it."""
    weights = Path(folder) / WEIGHTS_NAME
    if weights.is_file():
        check_weights_fit(encoder_report(str(weights.parent.resolve()), weights.stat().st_mtime_ns), what, allow)


@functools.lru_cache(maxsize=8)
def encoder_report(folder: str, modified_ns: int) -> LoadReport:
    """The load report of `folder` read into a BertModel; kept per file version (a sweep checks it per job)."""
    return quietly_loaded(BertModel, folder).load_report


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
