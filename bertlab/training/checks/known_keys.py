"""Every key of a composed config is one that some part of bertlab reads: a key nothing reads would
leave its value without effect (`+max_epochs=3` trains for trainer.max_epochs). The keys are those of
the walk that finds each key's declaration (bertlab.training.checks.values.declarations)."""

from __future__ import annotations

import difflib
import re
from typing import Any

from omegaconf import DictConfig, OmegaConf

from bertlab.errors import ConfigError
from bertlab.training.checks.values import READ_BY_CODE, declarations
from bertlab.training.launch.schema import ModelSchema

INTERPOLATION = re.compile(r"\$\{([A-Za-z_][\w.]*)")


def check_known_keys(config: DictConfig, schema: type) -> None:
    """Every key of the composed config is one that some part of bertlab reads: a field of the command's
    schema at the top or of a group's schema (model, tokenizer), an argument of the `_target_` a group
    builds, a key read by an interpolation or by bertlab's code (READ_BY_CODE); whether it came from a
    recipe, `+` or `++`. The first reported: a top-level key, then a group's, then the model's."""
    tree = OmegaConf.to_container(config, resolve=False)
    read = interpolated_keys(tree) | set(READ_BY_CODE)
    tree.pop("hydra", None)
    unknown = sorted((declaration.key for declaration in declarations(tree, schema, read) if not declaration.known),
                     key=lambda key: ("." in key, key.startswith("model.")))
    if unknown:
        raise ConfigError(f"unknown config key {unknown[0]!r}{unknown_key_hint(unknown[0], tree)}")


def unknown_key_hint(key: str, tree: dict) -> str:
    """What to do instead of `key`: a `+model.…` key that Hydra's schema let in, one of BertConfig's fields;
    another, the key of `tree` spelt most like it."""
    if key.startswith("model."):
        fields = ", ".join(ModelSchema.__dataclass_fields__)
        return f"; the model group takes the fields of bertlab.BertConfig: {fields}"
    near = closest_key(key, dotted_keys(tree))
    return ": nothing in bertlab reads it" + (f"; did you mean {near}?" if near else
                                              "; see the group's keys with --cfg job")


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


def dotted_keys(node: Any, prefix: str = "") -> list[str]:
    if not isinstance(node, dict):
        return [prefix[:-1]] if prefix else []
    return [key for name, value in node.items() for key in dotted_keys(value, f"{prefix}{name}.")]
