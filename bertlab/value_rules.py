"""The allowed values of a config key, declared once, in the annotation of the argument or dataclass field
that takes the value: `mlm_probability: Annotated[float, Interval("(0, 1)")]`, `schedule: Annotated[str,
OneOf(*SCHEDULES)]`, or one of the names below (`batch_size: Count`). Before a run starts,
bertlab.training.checks.values checks every key of the composed config against the annotation of what takes
it: `bertlab: error: <key>=<value>: must be in (0, inf)`. Null is left to the code that takes the value.

An interval "[a, b]" includes its ends, "(a, b)" excludes them, "inf" is unbounded; it takes numbers only,
unless `takes_text` (Lightning also reads words: devices=auto, a validation interval as a duration).
"""

from __future__ import annotations

import math
import typing
from dataclasses import dataclass
from typing import Annotated, Any


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
