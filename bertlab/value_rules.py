"""The allowed values of a config key, declared once, in the annotation of the argument or dataclass field
that takes the value: `mlm_probability: Annotated[float, Interval("(0, 1)")]`, `schedule: Annotated[str,
OneOf(*SCHEDULES)]`, or one of the names below (`batch_size: Count`). Before a run starts,
bertlab.training.checks.values checks every key of the composed config against the annotation of what takes
it: `bertlab: error: <key>=<value>: must be in (0, inf)`. A taker decorated with `checks_arguments` also
refuses such a value when Python code calls it: `warmup_schedule(schedule='step'): must be one of …`. Null is
left to the code that takes the value.

An interval "[a, b]" includes its ends, "(a, b)" excludes them, "inf" is unbounded; it takes numbers only,
unless `takes_text` (Lightning also reads words: devices=auto, a validation interval as a duration).
"""

from __future__ import annotations

import functools
import inspect
import math
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from bertlab.errors import ConfigError


@dataclass(frozen=True)
class Interval:
    bounds: str
    takes_text: bool = False

    def violation(self, value: Any) -> str | None:
        """What `value` breaks of the interval ("must be …"), or None when it fits."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None if self.takes_text else f"must be a number in {self.bounds}"
        low, high = (float(bound) for bound in self.bounds[1:-1].split(","))
        inside = ((low < value if self.bounds[0] == "(" else low <= value)
                  and (value < high if self.bounds[-1] == ")" else value <= high))
        return None if inside and math.isfinite(value) else f"must be in {self.bounds}"


class OneOf(tuple):
    """The choices of a value: `OneOf("min", "max")`."""

    def __new__(cls, *choices: Any) -> OneOf:
        return super().__new__(cls, choices)

    def violation(self, value: Any) -> str | None:
        return None if value in self else f"must be one of {', '.join(map(str, self))}"


@dataclass(frozen=True)
class CheckedBy:
    """The rule of the fields of a class that checks its own values when it is built: BertConfig, whose
    config.json files are untrusted input too, is the model group's."""
    name: str

    def violation(self, value: Any) -> None:
        return None


Rule = Interval | OneOf | CheckedBy
PROBABILITY, OPEN_PROBABILITY, POSITIVE, NON_NEGATIVE, COUNT = (
    Interval("[0, 1]"), Interval("[0, 1)"), Interval("(0, inf)"), Interval("[0, inf)"), Interval("[1, inf)"))
Probability = Annotated[float, PROBABILITY]
Dropout = Annotated[float, OPEN_PROBABILITY]  # a dropout probability: 1 would drop everything
Positive = Annotated[float, POSITIVE]
NonNegative = Annotated[float, NON_NEGATIVE]
Count = Annotated[int, COUNT]
Seed = Annotated[int, Interval(f"[0, {2**32 - 1}]")]
SequenceLength = Annotated[int, Interval("[8, 1048576]")]  # [CLS] A [SEP] B [SEP] and room for text
Workers = Annotated[int, Interval("[0, 1024]")]  # a DataLoader's processes


def metadata(annotation: Any) -> list:
    """The `Annotated` metadata of `annotation`, also inside a union: `Count | None` → [Interval("[1, inf)")]."""
    if typing.get_origin(annotation) is Annotated:
        return [*annotation.__metadata__, *metadata(typing.get_args(annotation)[0])]
    return [item for argument in typing.get_args(annotation) for item in metadata(argument)]


def rules(annotation: Any) -> tuple[Rule, ...]:
    return tuple(item for item in metadata(annotation) if isinstance(item, (Interval, OneOf, CheckedBy)))


def format_value(value: Any) -> str:
    """A value as a message shows it: strings quoted, `trainer.precision='fp8'`."""
    return repr(value) if isinstance(value, str) else str(value)


def violation(rules_: Sequence[Rule], value: Any) -> str | None:
    """What `value` breaks of the first of `rules_` it breaks ("must be …"); None when it fits them or is null."""
    return next((problem for rule in rules_ if value is not None and (problem := rule.violation(value))), None)


def check_rules(key: str, value: Any, rules_: Sequence[Rule]) -> None:
    """ConfigError when `value` of `key` breaks one of `rules_`: `optimizer.lr=-0.5: must be in (0, inf)`."""
    if problem := violation(rules_, value):
        raise ConfigError(f"{key}={format_value(value)}: {problem}")


Taker = TypeVar("Taker", bound=Callable)


def checks_arguments(taker: Taker) -> Taker:
    """`taker`, a function or a class (its `__init__`), checking each argument it is called with against the
    rules of that argument's annotation before it runs, as the checks before a run do for config values."""
    is_class = inspect.isclass(taker)
    function = taker.__init__ if is_class else taker
    offset = 1 if is_class else 0  # `self`, bound by the call

    @functools.wraps(function)
    def checked(*args: Any, **kwargs: Any) -> Any:
        signature, rules_of = argument_rules(function)
        try:
            arguments = signature.bind_partial(*args[offset:], **kwargs).arguments
        except TypeError:  # a call that does not fit the signature fails as it would unchecked
            return function(*args, **kwargs)
        for name, value in arguments.items():
            if problem := violation(rules_of.get(name, ()), value):
                raise ConfigError(f"{taker.__qualname__}({name}={format_value(value)}): {problem}")
        return function(*args, **kwargs)

    if is_class:
        taker.__init__ = checked
        return taker
    return checked  # type: ignore[return-value]


@functools.lru_cache(maxsize=None)
def argument_rules(function: Callable) -> tuple[inspect.Signature, Mapping[str, tuple[Rule, ...]]]:
    """The signature of `function` without `self`, and the rules of each of its arguments that has any; read
    at the first call, when every name its annotations use is defined."""
    signature = inspect.signature(function)
    parameters = [parameter for parameter in signature.parameters.values() if parameter.name != "self"]
    return signature.replace(parameters=parameters), {
        name: found for name, annotation in argument_annotations(function).items() if (found := rules(annotation))}


def argument_annotations(function: Callable) -> dict[str, Any]:
    """The annotation of each annotated argument of `function`, evaluated one by one: an annotation naming
    what is imported only for type checkers stays its text, and the others still count."""
    function = inspect.unwrap(function)
    annotations = {}
    for name, annotation in getattr(function, "__annotations__", {}).items():
        if name == "return":
            continue
        if isinstance(annotation, str):
            try:
                annotation = eval(annotation, function.__globals__)  # as typing.get_type_hints does
            except Exception:
                pass
        annotations[name] = annotation
    return annotations
