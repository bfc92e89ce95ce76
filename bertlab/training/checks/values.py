"""Every value of a composed config fits its rule: its range or choices (bertlab.training.ranges), and for
a value the command line set, the annotation of the `_target_` argument that takes it."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

from bertlab.errors import ConfigError
from bertlab.tokenizer import WordPieceOptions
from bertlab.training import precision
from bertlab.training.ranges import RULES, check_ranges

_NOT_JUDGED = object()  # an annotation or default the checks cannot judge
# Values that bertlab replaces before their `_target_` sees them.
BERTLAB_VALUES = {"trainer.precision": (precision.FASTEST,)}


def overridden_keys(overrides: Sequence[str]) -> list[str]:
    """The config keys (or groups) the command line set, from Hydra's record of its overrides."""
    return [override.split("=", 1)[0].lstrip("+~") for override in overrides]


def check_values(config: DictConfig, overridden: list[str]) -> None:
    check_ranges({key: OmegaConf.select(config, key, default=None) for key in RULES})
    for key in overridden:
        check_target_argument(config, key)


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
