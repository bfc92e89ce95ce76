"""The allowed values of a config key, declared once, in the annotation of the argument or dataclass field that takes
the value (`mlm_probability: Annotated[float, Interval("(0, 1)")]`, `hidden_dropout_prob: Dropout`; docs/configs.md),
and what a value breaks of them ("must be …"), null left to the code that takes the value. Nothing here raises:
bertlab.argument_checks refuses a value that breaks its rule; BertConfig (its config.json files are untrusted input)
runs the same rules on its fields, and checks their base types, with `field_problems`, and words its own refusal.

An interval "[a, b]" includes its ends, "(a, b)" excludes them, "inf" is unbounded; it takes numbers only,
unless `takes_text` (Lightning also reads words: devices=auto, a validation interval as a duration), whole
numbers only where `whole`; `says` words it in messages ("positive" for "(0, inf)"). `Size`: a size a file may
ask for. `Maps`: a mapping whose pairs convert to the taker's types (BertConfig's id2label, label2id and
pruned_heads). The rules only a run's arguments declare are bertlab.argument_checks', which an export does not carry.
"""

from __future__ import annotations

import functools
import math
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any


class Rule:
    """What an `Annotated` item that rules a value is (these classes, bertlab.argument_checks'): `violation` says what
    a value breaks of it ("must be …"), or None when it fits."""

    def violation(self, value: Any) -> str | None:
        raise NotImplementedError


@dataclass(frozen=True)
class Interval(Rule):
    bounds: str
    takes_text: bool = False
    whole: bool = False
    says: str = ""

    def violation(self, value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int if self.whole else (int, float)):
            number = "a whole number" if self.whole else "a number"
            return None if self.takes_text else f"must be {self.says or f'{number} in {self.bounds}'}"
        low, high = (float(bound) for bound in self.bounds[1:-1].split(","))
        inside = ((low < value if self.bounds[0] == "(" else low <= value)
                  and (value < high if self.bounds[-1] == ")" else value <= high))
        return None if inside and math.isfinite(value) else f"must be {self.says or f'in {self.bounds}'}"


class OneOf(tuple, Rule):
    """The choices of a value: `OneOf("min", "max")`."""

    def __new__(cls, *choices: Any) -> OneOf:
        return super().__new__(cls, choices)

    def violation(self, value: Any) -> str | None:
        return None if value in self else f"must be one of {', '.join(map(str, self))}"


@dataclass(frozen=True)
class Size(Rule):
    """A size a file may ask for, which bertlab must not allocate blindly: a whole number from 1 (or 0, where
    `zero` means none) to `limit`."""
    limit: int
    zero: bool = False

    def violation(self, value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int) or value < (0 if self.zero else 1):
            return "must be a positive integer"
        return f"is {value:,}; bertlab accepts at most {self.limit:,}" if value > self.limit else None


@dataclass(frozen=True)
class Maps(Rule):
    """A mapping whose (key, value) pairs `convert` makes into the value its taker keeps (JSON's keys are text: a
    config.json's `id2label` maps "0" to a name); `expected` words what it maps, after "must map"."""
    expected: str
    convert: Callable[[Iterable[tuple[Any, Any]]], dict]

    def converted(self, value: Any) -> dict:
        return self.convert(value.items())

    def violation(self, value: Any) -> str | None:
        try:
            self.converted(value)
        except (AttributeError, TypeError, ValueError):
            return f"must map {self.expected}"
        return None


OPEN_PROBABILITY = Interval("[0, 1)")
Dropout = Annotated[float, OPEN_PROBABILITY]  # a dropout probability: 1 would drop everything


def metadata(annotation: Any) -> list:
    """The `Annotated` metadata of `annotation`, also inside a union: `Count | None` → [Interval("[1, inf)")]."""
    if typing.get_origin(annotation) is Annotated:
        return [*annotation.__metadata__, *metadata(typing.get_args(annotation)[0])]
    return [item for argument in typing.get_args(annotation) for item in metadata(argument)]


def rules(annotation: Any) -> tuple[Rule, ...]:
    return tuple(item for item in metadata(annotation) if isinstance(item, Rule))


TYPE_WORDS = {bool: "true or false", int: "an integer", float: "a number", str: "text"}


def field_problems(instance: Any) -> Iterator[tuple[str, Any, Rule | None, str]]:
    """(field, value, the rule it breaks or None for its type, "must be …") for each field of the dataclass `instance`
    whose value breaks its annotation's rules or is not of its type (bool, int, float or str; null where admitted)."""
    for name, annotation in field_annotations(type(instance)).items():
        value = getattr(instance, name)
        if value is None and type(None) in base_types(annotation):
            continue
        rules_ = rules(annotation)
        rule = next((rule for rule in rules_ if rule.violation(value)), None)
        if rule is not None:
            yield name, value, rule, rule.violation(value)
        elif not rules_ and not is_of(value, base_types(annotation)):
            yield name, value, None, f"must be {' or '.join(TYPE_WORDS[kind] for kind in base_types(annotation))}"


@functools.lru_cache(maxsize=None)
def field_annotations(cls: type) -> Mapping[str, Any]:
    """The annotation of each field of the dataclass `cls` whose rules or base type the checks can judge."""
    hints = typing.get_type_hints(cls, include_extras=True)
    return {name: hints[name] for name in cls.__dataclass_fields__
            if rules(hints[name]) or set(base_types(hints[name])) - {type(None)} <= set(TYPE_WORDS)}


def base_types(annotation: Any) -> tuple[Any, ...]:
    """The types `annotation` admits, without its metadata: `Dropout | None` → (float, NoneType)."""
    if typing.get_origin(annotation) is Annotated:
        return base_types(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return tuple(kind for argument in typing.get_args(annotation) for kind in base_types(argument))
    return (annotation,)


def is_of(value: Any, kinds: Sequence[Any]) -> bool:
    """Whether `value` is of one of the scalar `kinds` as a config reads them: true is no integer, 1 a float."""
    if isinstance(value, bool):
        return bool in kinds
    return any(kind is not bool and isinstance(value, (int, float) if kind is float else kind) for kind in kinds
               if isinstance(kind, type))
