"""The recipes that ship inside the package (`bertlab.recipes`, the repository's `recipes/`): whole
experiments, each a YAML file whose header comments say how to run it and what to make first."""

from __future__ import annotations

import importlib.resources


def recipe_names() -> list[str]:
    recipes = importlib.resources.files("bertlab.recipes")
    return sorted(entry.name[:-5] for entry in recipes.iterdir() if entry.name.endswith(".yaml"))


def recipe_text(name: str) -> str | None:
    recipe = importlib.resources.files("bertlab.recipes").joinpath(f"{name}.yaml")
    return recipe.read_text(encoding="utf-8") if recipe.is_file() else None
