"""The rules only the arguments of a run's takers declare, beside bertlab.value_rules' scalar ones (those a model
config's fields declare too; an export carries them, and not these). bertlab.argument_checks runs both.

The named scalar rules of a run's arguments: `batch_size: Count`, `seed: Seed`, `p_mask: Probability`, … (their
Intervals in capitals, for the arguments of Lightning's and torch's classes: bertlab.training.checks.keys.LIBRARY_ARGUMENTS).

`SomeOf` is `OneOf` for each item of a list: `relations: Annotated[Sequence[str], SomeOf(*RELATIONS)]`; `Entries`,
the keys of each mapping of a list; `Tokens`, a list of tokens, each text without spaces (a tokenizer's never-split
tokens); `Items`, how many items a list has. `Divides`: a whole number that divides sizes known only at run time
(check_rules takes it made then: a relation head count and two models' widths).

A rule between values (a config's keys, a taker's arguments) is a function of their mapping by name that says what
is wrong of them together, or None; `Shares` is one: probabilities of one draw's exclusive outcomes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from bertlab.value_rules import Interval, Rule

PROBABILITY, POSITIVE, NON_NEGATIVE, COUNT = (
    Interval("[0, 1]"), Interval("(0, inf)"), Interval("[0, inf)"), Interval("[1, inf)"))
Probability = Annotated[float, PROBABILITY]
Positive = Annotated[float, POSITIVE]
NonNegative = Annotated[float, NON_NEGATIVE]
Count = Annotated[int, COUNT]
Seed = Annotated[int, Interval(f"[0, {2**32 - 1}]")]
SequenceLength = Annotated[int, Interval("[8, 1048576]")]  # [CLS] A [SEP] B [SEP] and room for text
Workers = Annotated[int, Interval("[0, 1024]")]  # a DataLoader's processes


class SomeOf(tuple, Rule):
    """The choices of each item of a list value: `SomeOf("query-query", "key-key")`."""

    def __new__(cls, *choices: Any) -> SomeOf:
        return super().__new__(cls, choices)

    def violation(self, value: Any) -> str | None:
        items = [value] if isinstance(value, str) or not isinstance(value, Iterable) else value
        return None if all(item in self for item in items) else f"must be some of {', '.join(map(str, self))}"


class Entries(tuple, Rule):
    """The keys of each entry (a mapping) of a list value, the first of them required: `Entries("source",
    "text_column")`."""

    def __new__(cls, *keys: str) -> Entries:
        return super().__new__(cls, keys)

    def violation(self, value: Any) -> str | None:
        fits = isinstance(value, Iterable) and not isinstance(value, (str, Mapping)) and all(
            isinstance(item, Mapping) and self[0] in item and set(item) <= set(self) for item in value)
        return None if fits else f"must be a list of {{{', '.join(self)}}} entries, each with its {self[0]}"


@dataclass(frozen=True)
class Tokens(Rule):
    """A list of tokens, each text without spaces (a tokenizer's never-split tokens); `example` is one, for messages."""
    example: str

    def violation(self, value: Any) -> str | None:
        if isinstance(value, str):
            return f"must be a list of tokens, such as [{value!r}]"
        if isinstance(value, Mapping) or not isinstance(value, Iterable):
            return f"must be a list of tokens, such as [{self.example!r}]"
        not_tokens = [item for item in value
                      if not isinstance(item, str) or not item or any(character.isspace() for character in item)]
        if not_tokens:
            return (f"must be a list of tokens, text without spaces such as {self.example}; {not_tokens[0]!r} is not "
                    "a token")
        return None


@dataclass(frozen=True)
class Items(Rule):
    """A list of `least` to `most` items, a text alone one item (a sentence's text column, or a pair's two); `says`
    words the rule after "must be"."""
    least: int
    most: int
    says: str

    def violation(self, value: Any) -> str | None:
        items = [value] if isinstance(value, str) else value
        fits = (isinstance(items, Collection) and not isinstance(items, Mapping)
                and self.least <= len(items) <= self.most)
        return None if fits else f"must be {self.says}"


@dataclass(frozen=True)
class Divides(Rule):
    """A whole number from 1 that divides each of `sizes`, known at run time (two models' widths); `says` words the
    rule after "must"."""
    sizes: tuple[int, ...]
    says: str

    def violation(self, value: Any) -> str | None:
        whole = isinstance(value, int) and not isinstance(value, bool) and value >= 1
        return None if whole and not any(size % value for size in self.sizes) else f"must {self.says}"


Between = Callable[[Mapping[str, Any]], str | None]


@dataclass(frozen=True)
class Shares:
    """The probabilities `names` of the exclusive outcomes of one draw (`outcomes` says which) add up to at most 1:
    `p_mask + p_replace must be at most 1 (each word is masked, replaced or kept), got 0.6 + 0.5`. Each share's own
    range is its annotation's."""
    names: tuple[str, ...]
    outcomes: str

    def __call__(self, values: Mapping[str, Any]) -> str | None:
        shares = [values[name] for name in self.names]
        return None if sum(shares) <= 1 else \
            f"{' + '.join(self.names)} must be at most 1 ({self.outcomes}), got {' + '.join(map(str, shares))}"
