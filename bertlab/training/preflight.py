"""Checks of a composed config that run before Hydra writes anything: the recipe is for this command,
the packages of its loggers are installed (bertlab.training.extras), every key is one bertlab reads,
every value is inside its range (bertlab.training.ranges), overridden values fit the arguments of their
`_target_`, the model config is valid and fits in memory, the folders it needs made first exist
(bertlab.training.requirements), a GPU run has a GPU, an Optuna search space is one Optuna accepts, the
checkpoints it loads have encoders that fit (bertlab.training.weights_fit),
`model.init_from` is not combined with an architecture override, nor
`budget_minutes` with a length of training, the output folder can be created and holds no other run,
and a checkpoint to resume belongs to this command, task and model (and, with a budget or
`trainer.precision: fastest`, its run recorded the steps or the precision chosen). Hydra's own schema
checks (bertlab.training.schema) have already run during composition.

Hydra calls `Preflight` before it creates the run (or sweep) folder. Hydra turns an Exception raised
in a callback into a warning, so a refusal travels out inside `Stop`, which
`bertlab.training.app.launch` reports. A job that a launcher such as submitit runs in a process of
its own raises its refusal as the job's error instead, which comes back to the launching process
inside the job's result.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import difflib
import os
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from bertlab.config import VARIANT_KEYS, BertConfig
from bertlab.errors import BertlabError, CheckpointError, ConfigError
from bertlab.metrics import METRICS_CSV
from bertlab.tokenizer import WordPieceOptions
from bertlab.training import budget, extras, precision, run_folder
from bertlab.training.ranges import RULES, check_ranges
from bertlab.training.requirements import check_requirements
from bertlab.training.run_folder import is_rank_zero
from bertlab.training.schema import SCHEMAS, ModelSchema, TokenizerSchema
from bertlab.training.weights_fit import check_checkpoint_fits

# Keys of the model group that define the architecture: with `model.init_from` they come from the
# checkpoint's config.json, so an override of one of them cannot take effect.
ARCHITECTURE_KEYS = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size",
                     "position_embedding_type", "max_position_embeddings", "type_vocab_size", "hidden_act",
                     *VARIANT_KEYS)
# The modules of `train`; the others fine-tune.
TRAIN_TASKS = ("PretrainingModule", "EmbeddingDistillationModule")
_NOT_JUDGED = object()  # an annotation or default the checks cannot judge
BASIC_LAUNCHER = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"
# The checkpoints a run loads weights from: their encoders must fit (bertlab.training.weights_fit).
CHECKPOINT_KEYS = ("model.init_from", "task.teacher", "data.transfer.masked_lm")
# Keys of groups without a `_target_` or schema that bertlab's code reads (the others are read through
# interpolations, `${paths.data_dir}`): the GLUE task's record and the paths.
READ_BY_CODE = ("glue.task", "glue.metrics", "paths.data_dir", "paths.output_dir", "paths.run_dir")
HYDRA_KEYS = ("_target_", "_partial_", "_convert_", "_recursive_", "_args_")
INTERPOLATION = re.compile(r"\$\{([A-Za-z_][\w.]*)")
# Values that bertlab replaces before their `_target_` sees them.
BERTLAB_VALUES = {"trainer.precision": (precision.FASTEST,)}


class Stop(BaseException):
    """Carries an error past Hydra's `except Exception`, which would turn it into a warning (in a
    callback) or print its own lines about it (in a job), to the one place that reports it."""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


@dataclass
class LaunchState:
    """What the callbacks saw of this launch, for cleaning up after a refused sweep; in a job that runs
    in a process of its own, the refusal the job raises."""
    sweep_folder_created: Path | None = None
    run_folder_created: Path | None = None  # the outermost folder a run's launch is about to create
    job_started: bool = False
    job_refusal: BertlabError | None = None

    def reset(self) -> None:
        self.sweep_folder_created, self.run_folder_created, self.job_started, self.job_refusal = None, None, False, None


launch_state = LaunchState()


class Preflight(Callback):
    """Hydra callback: `check` before a run or each job of a sweep starts."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        refusing(lambda: check(config, config.hydra.run.dir, new_run=True))
        run_dir = Path(config.hydra.run.dir).absolute()
        if not run_dir.exists():
            launch_state.run_folder_created = next(folder for folder in reversed((run_dir, *run_dir.parents))
                                                   if not folder.exists())

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        folder = Path(config.hydra.sweep.dir)
        refusing(lambda: (check(config, None), check_output_folder(folder)))
        if not folder.exists() and jobs_run_here(config.hydra):  # jobs elsewhere start unseen: keep their folder
            launch_state.sweep_folder_created = folder

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        if config.hydra.mode.name == "MULTIRUN":  # a run was checked in on_run_start
            checks = functools.partial(check, config, config.hydra.runtime.output_dir)
            if jobs_run_here(config.hydra):
                refusing(checks)
            else:  # a Stop would end the job's process without a result: the job raises the refusal instead
                launch_state.job_refusal = refusal(checks)
        launch_state.job_started = True


def jobs_run_here(hydra: DictConfig) -> bool:
    """Whether the jobs run in the launching process (Hydra's basic launcher), rather than in processes
    of their own (submitit), whose errors come back only as the job's result."""
    return hydra.launcher._target_ == BASIC_LAUNCHER


def raise_job_refusal() -> None:
    """In a job that runs in a process of its own, the refusal of its checks, as the job's own error."""
    if launch_state.job_refusal is not None:
        raise launch_state.job_refusal


def refusal(checks: Callable[[], object]) -> BertlabError | None:
    try:
        checks()
    except BertlabError as error:
        return error
    return None


def refusing(checks: Callable[[], object]) -> None:
    if (error := refusal(checks)) is not None:
        raise Stop(error)


def check(config: DictConfig, run_dir: str | Path | None, new_run: bool = False) -> None:
    """Everything about `config` that can be known before a run starts; `run_dir` is the run's folder
    (None for a sweep as a whole), `new_run` whether this launch is about to create it."""
    command = config.hydra.job.config_name.replace("_", "-")
    if config.get("command", command) != command:
        raise ConfigError(f"this recipe is for `python -m bertlab {config.command}`, not `{command}`")
    extras.check_logger_packages(config)
    check_known_keys(config, SCHEMAS[config.hydra.job.config_name])
    unknown = sorted(set(config.model) - set(ModelSchema.__dataclass_fields__))
    if unknown:
        raise ConfigError(f"unknown config key 'model.{unknown[0]}'; the model group takes the fields of "
                          f"bertlab.BertConfig: {', '.join(ModelSchema.__dataclass_fields__)}")
    if not config.model.init_from:  # sizes, divisibility, memory: before any data is prepared
        BertConfig.from_dict({**OmegaConf.to_container(config.model, resolve=True),
                              "vocab_size": OmegaConf.select(config, "tokenizer.vocab_size", default=None) or 30522})
    check_ranges({key: OmegaConf.select(config, key, default=None) for key in RULES})
    overridden = overridden_keys(config.hydra.overrides.task)
    for key in overridden:
        check_target_argument(config, key)
    check_init_from(config, overridden)
    check_requirements(config, overridden)
    check_accelerator(config)
    check_search_space(config)
    check_checkpoints(config)
    check_transfer(config)
    check_embedding_student(config)
    check_copy_pairs(config)
    check_compile_mode(config)
    check_tokenizer_options(config)
    budget.check_overrides(config, overridden)
    if run_dir is None:
        return
    if new_run:
        check_output_folder(run_dir)
        if is_rank_zero():  # the other ranks of a run write into the folder rank 0 made
            check_run_folder(Path(run_dir), config.resume)
    check_resume(config, Path(run_dir))


def check_known_keys(config: DictConfig, schema: type) -> None:
    """Every key of the composed config is one that some part of bertlab reads: a field of the command's
    schema at the top, an argument of the `_target_` a group builds, a key read by an interpolation or by
    bertlab's code (READ_BY_CODE); whether it came from a recipe, `+` or `++`. A key nothing reads would
    leave its value without effect: `+max_epochs=3` trains for trainer.max_epochs."""
    tree = OmegaConf.to_container(config, resolve=False)
    read = interpolated_keys(tree) | set(READ_BY_CODE)
    tree.pop("hydra", None)
    unknown = [key for key in tree if key not in schema.__dataclass_fields__]
    unknown += [key for name, node in tree.items() if isinstance(node, dict) for key in unknown_in_group(name, node, read)]
    if unknown:
        near = closest_key(unknown[0], dotted_keys(tree))
        raise ConfigError(f"unknown config key {unknown[0]!r}: nothing in bertlab reads it" +
                          (f"; did you mean {near}?" if near else "; see the group's keys with --cfg job"))


def interpolated_keys(tree: Any) -> set[str]:
    """The keys that interpolations anywhere in `tree` read: `${paths.data_dir}` → paths.data_dir."""
    if isinstance(tree, dict):
        return set().union(*map(interpolated_keys, tree.values()))
    if isinstance(tree, list):
        return set().union(*map(interpolated_keys, tree))
    return set(INTERPOLATION.findall(tree)) if isinstance(tree, str) else set()


def closest_key(key: str, keys: list[str]) -> str | None:
    """The key of `keys` whose last part is spelt most like `key`'s: max_epochs → trainer.max_epochs."""
    others = [other for other in keys if other != key]
    near = difflib.get_close_matches(key.rpartition(".")[2], [other.rpartition(".")[2] for other in others], n=1,
                                     cutoff=0.75)
    return next((other for other in others if other.rpartition(".")[2] == near[0]), None) if near else None


def unknown_in_group(prefix: str, node: dict, read: set[str]) -> list[str]:
    """The keys below `node` (at `prefix`) that nothing reads."""
    if prefix in ("model", "requires"):  # the model's schema is checked with its own message below; the keys
        return []                        # of `requires` name other keys (bertlab.training.requirements)
    if prefix == "tokenizer":
        return [f"tokenizer.{key}" for key in node if key not in TokenizerSchema.__dataclass_fields__]
    target = node.get("_target_")
    if isinstance(target, str):
        parameters = target_parameters(target)
        unknown = [] if parameters is None else [f"{prefix}.{key}" for key in node
                                                 if key not in parameters and key not in HYDRA_KEYS]
        return unknown + [key for name, value in node.items() if isinstance(value, dict) and "_target_" in value
                          for key in unknown_in_group(f"{prefix}.{name}", value, read)]
    unknown = []
    for key, value in node.items():
        path = f"{prefix}.{key}"
        if prefix in ("callbacks", "logger"):  # named specs, each built by its own `_target_`
            if isinstance(value, dict):
                unknown += unknown_in_group(path, value, read)
        elif isinstance(value, dict) and "_target_" in value:
            unknown += unknown_in_group(path, value, read)
        elif not any(ref == path or ref.startswith(f"{path}.") or path.startswith(f"{ref}.") for ref in read):
            unknown.append(path)
    return unknown


def dotted_keys(node: Any, prefix: str = "") -> list[str]:
    if not isinstance(node, dict):
        return [prefix[:-1]] if prefix else []
    return [key for name, value in node.items() for key in dotted_keys(value, f"{prefix}{name}.")]


@functools.lru_cache(maxsize=None)
def target_parameters(target: str) -> frozenset[str] | None:
    """The argument names of `target`; None when it takes any (**kwargs) or cannot be imported."""
    module_name, _, attribute = target.rpartition(".")
    try:
        function = getattr(importlib.import_module(module_name), attribute)
        parameters = inspect.signature(function).parameters
    except Exception:  # an unimportable target is reported when it is instantiated
        return None
    if any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters.values()):
        return None
    return frozenset(parameters)


def check_run_folder(run_dir: Path, resume: str | None) -> None:
    """A run never writes into the folder of another run that got as far as results (metrics,
    checkpoints, an export), unless it resumes that run."""
    results = (METRICS_CSV, run_folder.CHECKPOINTS, run_folder.HF_MODEL)
    if not (held := sorted(name for name in results if (run_dir / name).exists())):
        return
    if resume == "auto" or (resume and run_dir.resolve() in (Path(resume).resolve(), *Path(resume).resolve().parents)):
        return
    raise ConfigError(f"hydra.run.dir={run_dir} already holds a run ({', '.join(held)}); choose a new folder, "
                      f"or continue that run with resume=auto")


def check_resume(config: DictConfig, run_dir: Path) -> None:
    """The checkpoint of `resume` was saved by this command and task, for this model's shape; with a
    budget or `trainer.precision: fastest`, its run folder's config.yaml holds the steps or the
    precision to keep."""
    checkpoint = run_folder.resume_path(config.resume, run_dir)
    if checkpoint is None:
        return
    if config.budget_minutes is not None:
        budget.recorded_length(Path(checkpoint))
    if OmegaConf.select(config, "trainer.precision") == precision.FASTEST:
        precision.recorded_precision(Path(checkpoint))
    saved = run_folder.checkpoint_hyperparameters(Path(checkpoint))
    task = config.task._target_.rpartition(".")[2]
    saved_task = ("PretrainingModule" if "mlm_probability" in saved else "DistillationModule" if "alpha" in saved
                  else "EmbeddingDistillationModule" if "teacher" in saved else "ClassificationModule")
    if saved_task != task:
        raise CheckpointError(f"resume={config.resume}: {checkpoint} was saved by {saved_task} ("
                              f"{'train' if saved_task in TRAIN_TASKS else 'fine-tune'}), not by this run's "
                              f"{task}; resume a checkpoint of the same command")
    model = (BertConfig.from_json_file(config.model.init_from).to_dict() if config.model.init_from
             else OmegaConf.to_container(config.model, resolve=True))
    expected = {f"model.{key}": model.get(key) for key in ARCHITECTURE_KEYS}
    if task == "PretrainingModule":
        expected["task.nsp"] = bool(config.task.nsp)
    elif task not in TRAIN_TASKS:
        expected["data.num_labels"] = config.data.num_labels
    # A checkpoint saved before a key existed was built with its default.
    defaults = {f"model.{f.name}": f.default for f in dataclasses.fields(BertConfig) if f.name in ARCHITECTURE_KEYS}
    found = {**defaults, **{f"model.{key}": value for key, value in saved.get("config", {}).items()},
             "task.nsp": saved.get("nsp"),
             "data.num_labels": saved.get("config", {}).get("num_labels")}
    differing = [f"{key} (run {value}, checkpoint {found.get(key)})" for key, value in expected.items()
                 if found.get(key) != value]
    if differing:
        raise CheckpointError(f"resume={config.resume}: {checkpoint} does not fit this run: "
                              f"{'; '.join(differing)}")


def overridden_keys(overrides: Sequence[str]) -> list[str]:
    """The config keys (or groups) the command line set, from Hydra's record of its overrides."""
    return [override.split("=", 1)[0].lstrip("+~") for override in overrides]


def check_init_from(config: DictConfig, overridden: list[str]) -> None:
    if not OmegaConf.select(config, "model.init_from"):
        return
    conflicts = [key for key in overridden
                 if key == "model" or key == "tokenizer.vocab_size"
                 or (key.startswith("model.") and key.removeprefix("model.") in ARCHITECTURE_KEYS)]
    if conflicts:
        raise ConfigError(f"{conflicts[0]} cannot change a model loaded with model.init_from="
                          f"{config.model.init_from}: its architecture and vocabulary come from that checkpoint's "
                          f"config.json; drop {conflicts[0]}, or set model.init_from=null to train from scratch")


def check_accelerator(config: DictConfig) -> None:
    """A GPU run on a machine without one is refused here, not by Lightning inside the Trainer's construction."""
    accelerator = OmegaConf.select(config, "trainer.accelerator", default=None)
    if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        raise ConfigError(f"trainer.accelerator={accelerator}: this machine has no GPU that torch can use "
                          f"(torch.cuda.is_available() is False); use trainer=cpu, or run on a GPU machine")


def check_search_space(config: DictConfig) -> None:
    """Each search space of an Optuna sweep (hydra.sweeper.params, and sweeps on the command line) is
    one Optuna accepts: `tag(log, interval(0, 1e-3))` is refused here naming its key."""
    sweeper = OmegaConf.select(config, "hydra.sweeper", default=None)
    if sweeper is None or "optuna" not in str(sweeper.get("_target_", "")).lower():
        return
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra_plugins.hydra_optuna_sweeper._impl import create_optuna_distribution_from_override

    parser = OverridesParser.create()
    spaces = [f"{key}={value}" for key, value in (OmegaConf.to_container(sweeper, resolve=False).get("params")
                                                  or {}).items()]
    for text in [*spaces, *config.hydra.overrides.task]:
        override = parser.parse_override(text)
        if not override.is_sweep_override():
            continue
        try:
            create_optuna_distribution_from_override(override)
        except Exception as error:  # the plugin and Optuna raise ValueError, TypeError, NotImplementedError
            reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise ConfigError(f"{text}: not a search space Optuna accepts ({reason}); e.g. "
                              f"{override.key_or_group}=tag(log, interval(1e-5, 1e-3)) or choice(16, 32)") from None


def check_checkpoints(config: DictConfig) -> None:
    """The encoder of every checkpoint the run will load fits, before any folder or data is made."""
    allow = bool(OmegaConf.select(config, "model.allow_reinitialised", default=False))
    for key in CHECKPOINT_KEYS:
        if folder := OmegaConf.select(config, key, default=None):
            check_checkpoint_fits(folder, f"{key}={folder}", allow)


def check_transfer(config: DictConfig) -> None:
    """A transfer set's rows have no gold label: only a distillation's teacher can label them."""
    transfer = OmegaConf.select(config, "data.transfer", default=None)
    if not transfer or not any(transfer.get(key) for key in ("copies", "joined", "unlabelled")):
        return
    if not str(OmegaConf.select(config, "task._target_", default="")).endswith(".DistillationModule"):
        raise ConfigError("data.transfer: a transfer set has no labels, a teacher labels it; use task=distill "
                          "(or +recipe=sst2_distill), or set data.transfer.copies=0, data.transfer.joined=0 "
                          "and data.transfer.unlabelled=null")


def check_embedding_student(config: DictConfig) -> None:
    """A sentence-embedding distillation trains a pretrained student: it has no architecture of its own."""
    if str(OmegaConf.select(config, "task._target_", default="")).endswith(".EmbeddingDistillationModule") \
            and not OmegaConf.select(config, "model.init_from"):
        raise ConfigError("model.init_from is not set: sentence-embedding distillation trains a pretrained student; "
                          "point it at a BertModel folder such as outputs/mlm_tiny_wiki/latest/hf_model "
                          "(python -m bertlab train +recipe=mlm_tiny_wiki)")


def check_copy_pairs(config: DictConfig) -> None:
    copy_pair_prob = OmegaConf.select(config, "data.copy_pair_prob", default=None)
    if copy_pair_prob and OmegaConf.select(config, "task.nsp", default=False):
        raise ConfigError(f"data.copy_pair_prob={copy_pair_prob} with next-sentence prediction: a copied segment is "
                          f"neither the next text nor a random one; set data.copy_pair_prob=0 or task.nsp=false")


def check_compile_mode(config: DictConfig) -> None:
    compile_mode = OmegaConf.select(config, "task.compile_mode", default=None)
    if compile_mode is not None and not OmegaConf.select(config, "task.compile", default=False):
        raise ConfigError(f"task.compile_mode={compile_mode} needs task.compile=true")


def check_tokenizer_options(config: DictConfig) -> None:
    """The tokenizer group's training options, as `WordPieceOptions` checks them (a never-split token with spaces)."""
    if (tokenizer := OmegaConf.select(config, "tokenizer", default=None)) is not None:
        WordPieceOptions(**{option.name: tokenizer[option.name] for option in dataclasses.fields(WordPieceOptions)})


def check_target_argument(config: DictConfig, key: str) -> None:
    """A value set on the command line for an argument of a `_target_` (trainer, data, optimizer, …)
    must fit that argument's annotation: `trainer.devices=auto` passes (int | str | list),
    `trainer.max_steps=abc` does not (int). Null and interpolations are not judged."""
    parent_key, _, name = key.rpartition(".")
    parent = OmegaConf.select(config, parent_key) if parent_key else None
    if not isinstance(parent, DictConfig) or name not in parent or not isinstance(parent.get("_target_"), str):
        return
    expected = parameter_annotation(parent._target_, name)
    value = OmegaConf.to_container(parent, resolve=False)[name]
    if expected is not _NOT_JUDGED and value not in BERTLAB_VALUES.get(key, ()) and not accepts(expected, value):
        raise ConfigError(f"{key}={format_value(value)}: expected {type_name(expected)} "
                          f"(argument {name!r} of {parent._target_}), got {type(value).__name__}")


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


def parameter_annotation(target: str, name: str) -> Any:
    module_name, _, attribute = target.rpartition(".")
    try:
        function = getattr(importlib.import_module(module_name), attribute)
        function = function.__init__ if inspect.isclass(function) else function
        hints = typing.get_type_hints(function)
        parameters = inspect.signature(function).parameters
    except Exception:  # an unimportable target is reported when it is instantiated
        return _NOT_JUDGED
    return hints.get(name, _NOT_JUDGED) if name in parameters else _NOT_JUDGED


def accepts(expected: Any, value: Any) -> bool:
    if value is None or (isinstance(value, str) and "${" in value):
        return True
    origin = typing.get_origin(expected)
    if origin in (typing.Union, types.UnionType):
        return any(accepts(option, value) for option in typing.get_args(expected))
    if origin is typing.Literal:
        return value in typing.get_args(expected)
    if expected is typing.Any:
        return True
    if expected is type(None):
        return False
    expected = origin or expected
    if expected is bool:
        return isinstance(value, bool)
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if expected is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if expected is str:
        return isinstance(value, str)
    if inspect.isclass(expected) and issubclass(expected, Mapping):
        return isinstance(value, dict)
    if inspect.isclass(expected) and issubclass(expected, Sequence):
        return isinstance(value, list)
    return True  # other classes (paths, callbacks, tensors…): the target judges them


def type_name(expected: Any) -> str:
    origin = typing.get_origin(expected)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(option) for option in typing.get_args(expected))
    if origin is typing.Literal:
        return " or ".join(format_value(option) for option in typing.get_args(expected))
    if expected is type(None):
        return "null"
    return getattr(expected, "__name__", None) or str(expected).replace("typing.", "")


def format_value(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)
