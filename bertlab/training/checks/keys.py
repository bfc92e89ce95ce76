"""The one walk over the keys of a composed config, and the one checker of their values. Each key has one
declaration: the annotation of what takes its value (bertlab.value_rules) — an argument of the `_target_` its group
builds, a field of the command's schema, of the tokenizer group's or of a settings dataclass an argument names
(`data.transfer`: TransferSettings); for the arguments of other libraries' classes, the type of their annotation and
the range in LIBRARY_ARGUMENTS. The model group's fields are BertConfig's, annotated with their rules; BertConfig runs
them itself, in a model config's words (bertlab.training.run.model_group.check_model).

LIBRARY_ARGUMENTS: the ranges and choices of the arguments of other libraries' classes that config groups build —
Lightning's Trainer and callbacks, torch's AdamW — which bertlab cannot declare in their annotations
(bertlab.value_rules); their types are those annotations. The keys: `trainer.*` (conf/trainer), `optimizer.*`
(conf/optimizer), `callbacks.checkpoint.save_top_k` and `callbacks.progress_bar.refresh_rate` (conf/callbacks).

`ConfigKeys.walk` reads each key's declaration once. `check_known`: every key is one that some part of bertlab reads —
a key nothing reads would leave its value without effect (`+max_epochs=3` trains for trainer.max_epochs).
`check_values`: every value against its range or choices; a value the command line set for a `_target_`'s argument
also against its type (Hydra's schemas type the other keys while composing).
tests/training/checks/test_keys.py walks `declarations` of every shipped config: each key has exactly one.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib
import inspect
import re
import types
import typing
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import torch
from lightning.pytorch import Trainer
from lightning.pytorch.callbacks import ModelCheckpoint, TQDMProgressBar
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from bertlab.argument_checks import (COUNT, NON_NEGATIVE, POSITIVE, argument_annotations, check_rules,
                                     check_taken_together, format_value)
from bertlab.errors import ConfigError
from bertlab.tokenizer import WordPieceOptions
from bertlab.training.launch.config_tree import SCHEMAS, ModelSchema, TokenizerSchema
from bertlab.training.run import precision
from bertlab.value_rules import Interval, OneOf, Rule, metadata, rules

NOT_JUDGED = object()  # no annotation the checks can judge
HYDRA_KEYS = ("_target_", "_partial_", "_convert_", "_recursive_", "_args_")
GROUP_SCHEMAS = {"model": ModelSchema, "tokenizer": TokenizerSchema}  # the groups Hydra's schemas type
NAMED_SPECS = ("callbacks", "logger")  # groups of named `_target_` nodes, each null to leave it out
# Keys of groups without a `_target_` or schema that bertlab's code reads (the others are read through
# interpolations, `${paths.data_dir}`): the GLUE task's record and the paths.
READ_BY_CODE = {"glue.task": str, "glue.metrics": list[str], "paths.data_dir": str | None, "paths.output_dir": str,
                "paths.run_dir": str}
INTERPOLATION = re.compile(r"\$\{([A-Za-z_][\w.]*)")
DEVICES = Interval("[1, 65536]")
UNLIMITED = Interval("[-1, inf)")  # -1: no limit
LIBRARY_ARGUMENTS = {
    Trainer: {
        "accelerator": OneOf("cpu", "gpu", "cuda", "mps", "tpu", "auto"),
        "precision": OneOf("32-true", "32", 32, "64-true", "64", 64, "bf16-mixed", "bf16", "bf16-true", "16-mixed",
                           "16", 16, "16-true", "transformer-engine", precision.FASTEST),
        "devices": Interval(DEVICES.bounds, takes_text=True),  # also auto, or "0,1"
        "num_nodes": DEVICES,
        "max_steps": UNLIMITED,
        "max_epochs": UNLIMITED,
        "val_check_interval": Interval(POSITIVE.bounds, takes_text=True),  # also a duration, "00:00:30:00"
        "check_val_every_n_epoch": COUNT,
        "limit_val_batches": NON_NEGATIVE,
        "num_sanity_val_steps": UNLIMITED,
        "gradient_clip_val": NON_NEGATIVE,
        "accumulate_grad_batches": COUNT,
        "log_every_n_steps": COUNT,
    },
    torch.optim.AdamW: {"lr": POSITIVE, "eps": Interval("(0, 1)"), "weight_decay": NON_NEGATIVE},
    ModelCheckpoint: {"save_top_k": UNLIMITED},  # -1 keeps all
    TQDMProgressBar: {"refresh_rate": NON_NEGATIVE},
}


@dataclass(frozen=True)
class Declaration:
    """What declares the values of config key `key`: the annotation of its `taker` and the rules of its
    range or choices (one at most). `value` as composed, interpolations unresolved."""
    key: str
    value: Any
    taker: str
    annotation: Any = NOT_JUDGED
    rules: tuple[Rule, ...] = ()
    known: bool = True  # whether some part of bertlab reads the key
    argument: bool = False  # an argument of a `_target_`, which Hydra's schemas do not type


def overridden_keys(overrides: Sequence[str]) -> list[str]:
    """The config keys (or groups) the command line set, from Hydra's record of its overrides."""
    return [override.split("=", 1)[0].lstrip("+~") for override in overrides]


@dataclass(frozen=True)
class ConfigKeys:
    """The keys of a composed config, walked once (`walk`): `tree`, its container without `hydra`, interpolations
    unresolved, and the declaration of each leaf key. bertlab.training.checks.before_run runs `check_known`, the
    model group's checks, then `check_values`."""
    config: DictConfig
    overridden: Collection[str]  # the keys the command line set (`overridden_keys`)
    tree: dict
    declarations: tuple[Declaration, ...]

    @classmethod
    def walk(cls, config: DictConfig, overridden: Collection[str] = ()) -> ConfigKeys:
        """Each key of `config` once, with its declaration; a key is read where an interpolation, anywhere in the
        config (`hydra` too), or bertlab's code reads it."""
        tree = OmegaConf.to_container(config, resolve=False)
        read = interpolated_keys(tree) | set(READ_BY_CODE)
        tree.pop("hydra", None)
        return cls(config, overridden, tree,
                   tuple(declarations(tree, SCHEMAS[config.hydra.job.config_name], read)))

    def check_known(self) -> None:
        """Every key is one that some part of bertlab reads: a field of the command's schema at the top or of a
        group's schema (model, tokenizer), an argument of the `_target_` a group builds, a key read by an
        interpolation or by bertlab's code (READ_BY_CODE); whether it came from a recipe, `+` or `++`. The first
        reported: a top-level key, then a group's, then the model's."""
        unknown = sorted((declaration.key for declaration in self.declarations if not declaration.known),
                         key=lambda key: ("." in key, key.startswith("model.")))
        if unknown:
            raise ConfigError(f"unknown config key {unknown[0]!r}{unknown_key_hint(unknown[0], self.tree)}")

    def check_values(self) -> None:
        """Every value against its range or choices, then each value the command line set for a `_target_`'s
        argument against its type (`check_type`)."""
        # The model group's values are checked by BertConfig (model_group.check_model, check_loaded_model).
        judged = [declaration for declaration in self.declarations if not declaration.key.startswith("model.")]
        for declaration in judged:
            value = declaration.value
            if declaration.rules and isinstance(value, str) and "${" in value:
                value = OmegaConf.select(self.config, declaration.key, default=None)  # as its taker will get it
            check_rules(declaration.key, value, declaration.rules)
        arguments = {declaration.key: declaration for declaration in judged if declaration.argument}
        for declaration in (arguments[key] for key in self.overridden if key in arguments):
            check_type(declaration)

    def check_taken_together(self) -> None:
        """The rules between the arguments of each `_target_` the config builds, that its taker declares
        (`checks_arguments(between=…)`): refused here, before the data is prepared, rather than when it is built."""
        for key in target_keys(self.tree):
            try:
                values = OmegaConf.to_container(OmegaConf.select(self.config, key), resolve=True)
            except OmegaConfBaseException:  # a value that cannot be resolved is reported by the run
                continue
            if (taker := taker_of(str(values["_target_"]))) is not None:
                check_taken_together(taker, {name: value for name, value in values.items() if name not in HYDRA_KEYS})


def check_type(declaration: Declaration) -> None:
    """The value of a `_target_`'s argument against the type of its annotation: `trainer.devices=auto` passes
    (int | str | list), `trainer.max_steps=abc` does not (int). Null, interpolations and declared choices are not
    judged."""
    expected, value = declaration.annotation, declaration.value
    if expected is NOT_JUDGED or isinstance(expected, str) or any(isinstance(rule, OneOf) and value in rule
                                                                  for rule in declaration.rules):
        return
    if not accepts(expected, value):
        raise ConfigError(f"{declaration.key}={format_value(value)}: expected {type_name(expected)} "
                          f"({declaration.taker}), got {type(value).__name__}")


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


def check_tokenizer_options(tokenizer: DictConfig | None) -> None:
    """The tokenizer group's training options, as `WordPieceOptions` checks them (a never-split token with spaces)."""
    if tokenizer is not None:
        WordPieceOptions(**{option.name: tokenizer[option.name] for option in dataclasses.fields(WordPieceOptions)})


def declarations(tree: dict, schema: type, read: Collection[str] = ()) -> Iterator[Declaration]:
    """The declaration of each leaf key of a composed config (`tree`, its container without `hydra`, and
    the command's `schema`); a key that nothing declares has neither annotation nor rules, and is `known`
    only where `read` (the keys interpolations read) or READ_BY_CODE names it or a key below it."""
    hints = typing.get_type_hints(schema, include_extras=True)
    for name, value in tree.items():
        if name in GROUP_SCHEMAS and isinstance(value, dict):
            yield from field_declarations(name, value, GROUP_SCHEMAS[name])
        elif isinstance(value, dict) and hints.get(name) in (Any, typing.Optional[Any]):  # a group
            yield from group_declarations(name, value, {*read, *READ_BY_CODE})
        else:
            annotation = hints.get(name, NOT_JUDGED)
            yield Declaration(name, value, f"field {name!r} of {schema.__name__}", annotation, rules(annotation),
                              known=name in hints)


def field_declarations(prefix: str, node: dict, fields_of: type, settings: bool = False) -> Iterator[Declaration]:
    """The fields of a schema, or of `settings` that report an unknown key themselves (TransferSettings)."""
    hints = typing.get_type_hints(fields_of, include_extras=True)
    for name, value in node.items():
        annotation = hints.get(name, NOT_JUDGED)
        yield Declaration(f"{prefix}.{name}", value, f"field {name!r} of {fields_of.__qualname__}", annotation,
                          rules(annotation), known=settings or name in hints)


def group_declarations(prefix: str, node: dict, read: Collection[str], reach: str | None = None
                       ) -> Iterator[Declaration]:
    """The keys below `node` at `prefix`. A plain mapping's keys (no `_target_`) are read as a whole from
    `reach`, the key of the group entry they lie in: `paths.data_dir`, or a mapping an interpolation reads."""
    target = node.get("_target_")
    parameters = target_parameters(target) if isinstance(target, str) else None
    for name, value in node.items():
        key = f"{prefix}.{name}"
        if name in HYDRA_KEYS:
            continue
        if isinstance(value, dict) and "_target_" in value:
            yield from group_declarations(key, value, read)
        elif isinstance(target, str):
            annotation, rules_ = argument_declaration(target, name)
            settings = next((item for item in metadata(annotation) if isinstance(item, type)
                             and dataclasses.is_dataclass(item)), None)  # whose fields are the mapping's keys
            if settings is not None and isinstance(value, dict):
                yield from field_declarations(key, value, settings, settings=True)
            else:
                yield Declaration(key, value, f"argument {name!r} of {target}", annotation, rules_,
                                  known=parameters is None or name in parameters, argument=True)
        elif prefix in NAMED_SPECS and not isinstance(value, dict):  # each entry is built by its own `_target_`
            yield Declaration(key, value, f"an entry of the {prefix} group, null: left out", Mapping | None)
        elif isinstance(value, dict):
            yield from group_declarations(key, value, read, None if prefix in NAMED_SPECS else reach or key)
        else:
            path = reach or key
            yield Declaration(key, value, "bertlab's code" if key in READ_BY_CODE else "nothing",
                              READ_BY_CODE.get(key, NOT_JUDGED),
                              known=any(ref == path or ref.startswith(f"{path}.") or path.startswith(f"{ref}.")
                                        for ref in read))


@functools.lru_cache(maxsize=None)
def argument_declaration(target: str, name: str) -> tuple[Any, tuple[Rule, ...]]:
    """The annotation of the argument `name` of the class or function `target` (for a class, of the first
    `__init__` up its MRO that names it) and its rules: those in the annotation and in LIBRARY_ARGUMENTS.
    An annotation that cannot be evaluated stays its text; NOT_JUDGED where there is none."""
    taker = taker_of(target)
    if taker is None:
        return NOT_JUDGED, ()
    owners = inspect.getmro(taker) if inspect.isclass(taker) else (taker,)
    annotation = NOT_JUDGED
    for owner in owners:
        function = vars(owner).get("__init__") if inspect.isclass(owner) else owner
        if function is not None and name in signature_parameters(function):
            annotation = argument_annotations(function).get(name, NOT_JUDGED)
            break
    library = tuple(LIBRARY_ARGUMENTS[owner][name] for owner in owners if name in LIBRARY_ARGUMENTS.get(owner, {}))
    return annotation, rules(annotation) + library[:1]


@functools.lru_cache(maxsize=None)
def target_parameters(target: str) -> frozenset[str] | None:
    """The argument names of `target`; None when it takes any (**kwargs) or cannot be imported."""
    taker = taker_of(target)
    return None if taker is None else accepted_parameters(taker)


@functools.lru_cache(maxsize=None)
def taker_of(target: str) -> Any:
    """The class or function a `_target_` names; None where it cannot be imported (reported when it is built)."""
    module_name, _, attribute = target.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except Exception:
        return None


def target_keys(node: dict, prefix: str = "") -> Iterator[str]:
    """The keys of the `_target_` nodes in `node` (a config's container), outermost first."""
    if "_target_" in node and prefix:
        yield prefix[:-1]
    for name, value in node.items():
        if isinstance(value, dict):
            yield from target_keys(value, f"{prefix}{name}.")


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


def signature_parameters(function: Any) -> Mapping[str, inspect.Parameter]:
    try:
        return inspect.signature(function).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return {}


def accepts(expected: Any, value: Any) -> bool:
    if value is None or (isinstance(value, str) and "${" in value):
        return True
    origin = typing.get_origin(expected)
    if origin is Annotated:
        return accepts(typing.get_args(expected)[0], value)
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
    if origin is Annotated:
        return type_name(typing.get_args(expected)[0])
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(option) for option in typing.get_args(expected))
    if origin is typing.Literal:
        return " or ".join(format_value(option) for option in typing.get_args(expected))
    if expected is type(None):
        return "null"
    return getattr(expected, "__name__", None) or str(expected).replace("typing.", "")
