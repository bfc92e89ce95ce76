"""Every key of a composed config is one that some part of bertlab reads: a key nothing reads would
leave its value without effect (`+max_epochs=3` trains for trainer.max_epochs)."""

from __future__ import annotations

import difflib
import functools
import importlib
import inspect
import re
from typing import Any

from omegaconf import DictConfig, OmegaConf

from bertlab.errors import ConfigError
from bertlab.training.checks.values import HYDRA_KEYS, READ_BY_CODE
from bertlab.training.launch.schema import ModelSchema, TokenizerSchema

INTERPOLATION = re.compile(r"\$\{([A-Za-z_][\w.]*)")


def check_known_keys(config: DictConfig, schema: type) -> None:
    """Every key of the composed config is one that some part of bertlab reads: a field of the command's
    schema at the top, an argument of the `_target_` a group builds, a key read by an interpolation or by
    bertlab's code (READ_BY_CODE); whether it came from a recipe, `+` or `++`."""
    tree = OmegaConf.to_container(config, resolve=False)
    read = interpolated_keys(tree) | set(READ_BY_CODE)
    tree.pop("hydra", None)
    unknown = [key for key in tree if key not in schema.__dataclass_fields__]
    unknown += [key for name, node in tree.items() if isinstance(node, dict) for key in unknown_in_group(name, node, read)]
    if unknown:
        near = closest_key(unknown[0], dotted_keys(tree))
        raise ConfigError(f"unknown config key {unknown[0]!r}: nothing in bertlab reads it" +
                          (f"; did you mean {near}?" if near else "; see the group's keys with --cfg job"))


def check_model_keys(config: DictConfig) -> None:
    """The model group takes the fields of its schema (a `+model.…` key that Hydra's schema let in)."""
    unknown = sorted(set(config.model) - set(ModelSchema.__dataclass_fields__))
    if unknown:
        raise ConfigError(f"unknown config key 'model.{unknown[0]}'; the model group takes the fields of "
                          f"bertlab.BertConfig: {', '.join(ModelSchema.__dataclass_fields__)}")


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
    if prefix in ("model", "requires"):  # the model's keys: check_model_keys; the keys
        return []                        # of `requires` name other keys (bertlab.training.checks.requirements)
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
        return accepted_parameters(function)
    except Exception:  # an unimportable target is reported when it is instantiated
        return None


def accepted_parameters(function: Any) -> frozenset[str] | None:
    """The argument names of `function`; None when it takes any (**kwargs), unless it is a bertlab class that
    passes its **kwargs on to its base class (GeneralDistillationModule to PretrainingModule): the base's then."""
    parameters = inspect.signature(function).parameters
    if not any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters.values()):
        return frozenset(parameters)
    base = function.__mro__[1] if inspect.isclass(function) and function.__module__.startswith("bertlab.") else None
    inherited = accepted_parameters(base) if base is not None and base.__module__.startswith("bertlab.") else None
    if inherited is None:
        return None
    return inherited | {name for name, parameter in parameters.items() if parameter.kind is not parameter.VAR_KEYWORD}
