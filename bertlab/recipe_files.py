"""The recipes that ship inside the package (`bertlab.recipes`, the repository's `recipes/`): whole experiments,
each a YAML file whose header comments say how to run it; the command each is for; and what a run needs made
first: the folders its config names (a student, a teacher, a masked LM for the transfer set, a tokenizer) and
the command that makes each one.

A recipe says so in its `requires` key, a config key that names a folder mapped to the command that makes
the folder the recipe's own value points at (null: the recipe does not read that key's folder):

    requires:
      model.init_from: python -m bertlab train +recipe=embed_distill_tiny
      task.teacher: python -m bertlab fine-tune +recipe=sst2_minilm

A folder that does not exist is refused before the run starts, in one line that names the command. Where
the command line chose another folder for such a key, the recipe's command does not make it; the hint then
comes from the recipe that requires a folder of that name (a command whose `--output` writes it), or from
a `<recipe>/latest` path, which that recipe's own run makes.
"""

from __future__ import annotations

import importlib.resources
import shlex
from collections.abc import Collection, Mapping
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from bertlab.errors import CheckpointError


def recipe_names() -> list[str]:
    recipes = importlib.resources.files("bertlab.recipes")
    return sorted(entry.name[:-5] for entry in recipes.iterdir() if entry.name.endswith(".yaml"))


def recipe_text(name: str) -> str | None:
    recipe = importlib.resources.files("bertlab.recipes").joinpath(f"{name}.yaml")
    return recipe.read_text(encoding="utf-8") if recipe.is_file() else None


def folder_keys(requires: Mapping[str, str | None]) -> list[str]:
    """The keys whose folders a run needs made first: `model.init_from` and those of a recipe's `requires`."""
    return list(dict.fromkeys(["model.init_from", *requires]))


def check_requirements(folders: Mapping[str, str | None], requires: Mapping[str, str | None], run_name: str,
                       overridden: Collection[str]) -> None:
    """Every folder of `folders` (each key of `folder_keys(requires)` → the folder its value names) exists (null
    values are not asked for); `run_name` is the run's `name`, `overridden` the keys the command line set."""
    for key, folder in folders.items():
        if folder and not Path(folder).is_dir():
            own_command = requires.get(key) if key not in overridden else None
            raise CheckpointError(f"{key}={folder}: no such checkpoint folder"
                                  f"{hint(own_command or producing_command(Path(folder), run_name))}")


def hint(command: str | None) -> str:
    return f"; make one first with: {command}" if command else ""


def producing_command(folder: Path, run_name: str) -> str | None:
    """The command that makes `folder`: the `train` recipe of a `<recipe>/latest` path, or the command of a
    recipe's `requires` (the running recipe's first) whose --output is a folder of that name."""
    parts = folder.parts
    producer = parts[parts.index("latest") - 1] if "latest" in parts[1:] else None
    if producer and recipe_text(producer) is not None:
        return f"python -m bertlab {recipe_command(producer)} +recipe={producer}"
    for recipe in sorted(recipe_names(), key=lambda name: name != run_name):
        for command in recipe_requirements(recipe).values():
            if output_of(command) == folder.name:
                return command
    return None


def recipe_file(recipe: str) -> DictConfig:
    """A recipe file as written: its own keys, not those of the recipes it extends."""
    return OmegaConf.create(recipe_text(recipe) or "")


def recipe_requirements(recipe: str) -> dict[str, str]:
    return {key: command for key, command in (recipe_file(recipe).get("requires") or {}).items() if command}


def recipe_command(recipe: str) -> str:
    """The command a recipe is for: its `command`, or that of the recipe it extends."""
    values = recipe_file(recipe)
    if "command" in values:
        return values.command
    extended = [entry for entry in values.get("defaults", []) if isinstance(entry, str) and entry in recipe_names()]
    return recipe_command(extended[0]) if extended else "train"


def output_of(command: str) -> str | None:
    """The name of the folder a `python -m bertlab … --output DIR` command writes."""
    words = shlex.split(command)
    return Path(words[words.index("--output") + 1]).name if "--output" in words[:-1] else None
