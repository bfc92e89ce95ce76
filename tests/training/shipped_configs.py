"""Every composition of the shipped configs: each command with each option of each config group, each GLUE
task with fine_tune, each recipe with its command."""

from __future__ import annotations

import functools
import importlib.resources

from hydra import compose
from omegaconf import OmegaConf

from bertlab.recipe_files import recipe_names

GROUPS = ("model", "tokenizer", "data", "task", "optimizer", "scheduler", "trainer", "logger", "callbacks")
CONFIG_NAMES = ("train", "fine_tune")


def group_options(group: str) -> list[str]:
    files = importlib.resources.files("bertlab.conf").joinpath(group).iterdir()
    return sorted(entry.name[:-5] for entry in files if entry.name.endswith(".yaml"))


def compositions() -> list[tuple[str, list[str]]]:
    found = [(name, [f"{group}={option}"]) for name in CONFIG_NAMES for group in GROUPS
             for option in group_options(group)]
    found += [("fine_tune", [f"+glue={option}"]) for option in group_options("glue")]
    found += [("train" if recipe.startswith(("mlm", "embed_distill")) else "fine_tune", [f"+recipe={recipe}"])
              for recipe in recipe_names()]
    return found


@functools.lru_cache(maxsize=None)
def composed_trees() -> tuple[tuple[str, dict], ...]:
    """(config name, composed config as a container, interpolations unresolved) of each composition that
    composes; call it inside an initialised `bertlab.conf` config module, after `register_configs`."""
    trees = []
    for name, overrides in compositions():
        try:
            cfg = compose(name, overrides=overrides)
        except Exception:  # an option meant for the other command (a classification data set in train)
            continue
        trees.append((name, OmegaConf.to_container(cfg, resolve=False)))
    return tuple(trees)
