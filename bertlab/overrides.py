"""Checks a Hydra command line before Hydra runs it, so that every mistake in it ends as one
`ConfigError` line (Hydra itself prints several lines and a HYDRA_FULL_ERROR hint).

Design: the config is composed once up front with Hydra's own compose API (the same config
module, recipes and override grammar), then each `key=value` override is checked:

- the key must exist in the config composed from the config-group overrides alone (`+key=value`
  adds a key);
- the value must fit the type of what it replaces. Where the key is an argument of a node with a
  `_target_` (trainer, data, optimizer, callbacks, …) the type is that argument's annotation, so
  `trainer.devices=auto` passes (int | str | list) and `trainer.max_steps=abc` does not (int).
  Other keys (seed, model.*, tokenizer.*) must keep the type of their default value; null is
  always allowed, and interpolations are not judged.

Sweep values (`-m seed=1,2,3`) are each checked; the first combination is composed.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_module
from hydra._internal.utils import get_args_parser
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException, MissingConfigException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from bertlab.errors import ConfigError

_NOT_JUDGED = object()  # an annotation or default the checks cannot judge


def hydra_order(argv: list[str]) -> list[str]:
    """`argv` with Hydra's flags (-m, --cfg job, …) before the overrides, where Hydra's parser wants
    them: bertlab takes them anywhere, as in `fine-tune +recipe=sst2 -m seed=1,2,3`."""
    overrides = list(parse_arguments(argv, intermixed=True).overrides)
    flags, pending = [], list(overrides)
    for token in argv:
        if pending and token == pending[0]:
            pending.pop(0)
        else:
            flags.append(token)
    return [*flags, *overrides]


def parse_arguments(argv: list[str], intermixed: bool = False) -> argparse.Namespace:
    parser = get_args_parser()

    def error(message: str) -> typing.NoReturn:
        raise ConfigError(f"command line: {message}; see --help for the flags")

    parser.error = error
    return parser.parse_intermixed_args(argv) if intermixed else parser.parse_args(argv)


def check_command_line(config_module: str, config_name: str, argv: list[str]) -> None:
    """Raises ConfigError (one line) for a command line Hydra would reject or a value of the wrong type."""
    args = parse_arguments(argv)
    try:
        overrides = OverridesParser.create().parse_overrides(args.overrides)
    except HydraException as error:
        raise ConfigError(f"cannot parse the command line: {one_line(error)}") from None
    if not args.multirun:
        sweeps = [override.input_line for override in overrides if override.is_sweep_override()]
        if sweeps:
            raise ConfigError(f"{sweeps[0]}: several values need -m (--multirun) to sweep over them; "
                              f"for a list write key=[a,b], for a string with commas quote it: key='a,b'")
    first_job = [first_combination(override) for override in overrides]
    first_job = [line for line in first_job if line is not None]
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module=config_module, version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()

        def is_group(override: Override) -> bool:
            return override.is_hydra_override() or bool(loader.get_group_options(override.key_or_group))

        groups = [override for override in overrides if is_group(override)]
        values = [override for override in overrides if not is_group(override)]
        base = compose_or_fail(config_name, [first_combination(override) for override in groups
                                             if first_combination(override) is not None])
        for override in values:
            check_value_override(base, override)
        composed = compose_or_fail(config_name, first_job)
    check_output_folder(composed.hydra.sweep.dir if args.multirun else composed.hydra.run.dir)


def first_combination(override: Override) -> str | None:
    """The override as it is in a sweep's first job (None for sweeps that cannot be enumerated)."""
    if not override.is_sweep_override():
        return override.input_line
    if not override.is_discrete_sweep():
        return None
    return f"{override.get_key_element()}={next(iter(override.sweep_string_iterator()))}"


def compose_or_fail(config_name: str, overrides: list[str]) -> DictConfig:
    try:
        return compose(config_name, overrides=overrides, return_hydra_config=True)
    except MissingConfigException as error:
        group, _, name = (error.missing_cfg_file or "").rpartition("/")
        if error.options is not None and group:
            what = "recipe" if group == "recipe" else f"{group} config"
            raise ConfigError(f"unknown {what} {name!r}; known {what}s: {', '.join(error.options)}") from None
        raise ConfigError(one_line(error)) from None
    except (HydraException, OmegaConfBaseException) as error:
        raise ConfigError(one_line(error)) from None


def check_output_folder(folder: str) -> None:
    """Hydra creates the run folder before bertlab runs: make sure it can (as far as one can tell
    without writing), so that the failure is one clear line."""
    path = Path(folder).absolute()
    existing = next(parent for parent in (path, *path.parents) if parent.exists())
    problem = ("is not a folder" if not existing.is_dir() else
               "is not writable" if not os.access(existing, os.W_OK | os.X_OK) else None)
    if problem:
        raise ConfigError(f"output folder {path} cannot be created: {existing} {problem}; choose another "
                          f"with hydra.run.dir=… (or hydra.sweep.dir=… with -m), or set BERTLAB_OUTPUT_DIR")


def one_line(error: BaseException) -> str:
    """Hydra's message without its blank lines, search-path listing and documentation links."""
    lines = []
    for line in str(error).splitlines():
        line = line.strip()
        if line.startswith("Config search path"):
            break
        if line and not line.startswith("See https://"):
            lines.append(line)
    return " ".join(line if line.endswith((".", ":")) or line is lines[-1] else f"{line};"
                    for line in lines) or type(error).__name__


def check_value_override(base: DictConfig, override: Override) -> None:
    key = override.key_or_group
    parent_key, _, name = key.rpartition(".")
    parent = OmegaConf.select(base, parent_key) if parent_key else base
    if override.is_delete():
        return  # composing reports a missing key to delete
    exists = isinstance(parent, DictConfig) and name in parent
    if not exists:
        if override.is_add() or override.is_force_add():
            return
        if not isinstance(parent, DictConfig):
            raise ConfigError(f"unknown config key {key!r}: there is no {parent_key!r} section")
        target = parent.get("_target_")
        if isinstance(target, str) and parameter_annotation(target, name) is not _NOT_JUDGED:
            raise ConfigError(f"config key {key!r} is not set in the config; it is an argument of {target}: "
                              f"add it with +{key}=…")
        known = ", ".join(str(k) for k in parent.keys() if k != "_target_") or "no keys"
        where = f"{parent_key!r} has" if parent_key else "top-level keys are"
        raise ConfigError(f"unknown config key {key!r}; {where}: {known}. To add a new key write +{key}=…")
    if override.is_add():
        return  # composing reports "already exists"
    expected, described = expected_type(parent, name)
    if expected is _NOT_JUDGED:
        return
    values = list(override.sweep_iterator()) if override.is_discrete_sweep() else (
        [] if override.is_sweep_override() else [override.value()])
    for value in values:
        if not accepts(expected, value):
            raise ConfigError(f"{key}={format_value(value)}: expected {type_name(expected)} ({described}), "
                              f"got {type(value).__name__}")


def expected_type(parent: DictConfig, name: str) -> tuple[Any, str]:
    """(annotation or type, description) for `parent[name]`: the annotated type of the parameter of
    the parent's `_target_`, else the type of the current value."""
    target = parent.get("_target_") if "_target_" in parent else None
    if isinstance(target, str):
        annotation = parameter_annotation(target, name)
        if annotation is not _NOT_JUDGED:
            return annotation, f"argument {name!r} of {target}"
    raw = OmegaConf.to_container(parent, resolve=False)[name]
    if raw is None or (isinstance(raw, str) and "${" in raw):
        return _NOT_JUDGED, ""
    return type(raw), f"like the default {format_value(raw)}"


def parameter_annotation(target: str, name: str) -> Any:
    module_name, _, attribute = target.rpartition(".")
    try:
        function = getattr(importlib.import_module(module_name), attribute)
        function = function.__init__ if inspect.isclass(function) else function
        hints = typing.get_type_hints(function)
        parameters = inspect.signature(function).parameters
    except Exception:  # an unimportable target is reported when it is instantiated
        return _NOT_JUDGED
    if name not in parameters:
        return _NOT_JUDGED
    return hints.get(name, _NOT_JUDGED)


def accepts(expected: Any, value: Any) -> bool:
    if value is None or (isinstance(value, str) and "${" in value):
        return True
    origin = typing.get_origin(expected)
    if origin in (typing.Union, types.UnionType):
        return any(accepts(option, value) for option in typing.get_args(expected))
    if origin is typing.Literal:
        return value in typing.get_args(expected)
    if expected is typing.Any or expected is _NOT_JUDGED:
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
