"""A value refused where it enters, as a ConfigError that names it: a config key's before a run
(`check_rules`: `optimizer.lr=-0.5: must be in (0, inf)`), and an argument's when Python code calls a taker
decorated with `checks_arguments` (`warmup_schedule(schedule='step'): must be one of …`). The rules are those
the annotation of the argument declares (bertlab.value_rules, and those below), and a taker refuses null where
that annotation does not admit it (`augment(p_mask=None): must be a number in [0, 1]`); where a bound is known only
at run time (a teacher's layers), `check_rules` takes the Interval (or Divides) made then. `check_between`: the rules between
values (a config's keys, a taker's arguments), each saying what is wrong of them together, or None.

The rules only the arguments of a run's takers declare live here, beside bertlab.value_rules' scalar ones (those a
model config's fields declare too; an export carries them, and not these).

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

import functools
import inspect
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from bertlab.errors import ConfigError
from bertlab.value_rules import Interval, Rule, base_types, rules

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


def format_value(value: Any) -> str:
    """A value as a message shows it: strings quoted, `trainer.precision='fp8'`."""
    return repr(value) if isinstance(value, str) else str(value)


def violation(rules_: Sequence[Rule], value: Any, null: bool = True) -> str | None:
    """What `value` breaks of the first of `rules_` it breaks ("must be …"); None when it fits them, or is null and
    `null` lets it be (an annotation that admits None, or a config value left to its taker)."""
    if value is None and null:
        return None
    return next((problem for rule in rules_ if (problem := rule.violation(value))), None)


def check_rules(key: str, value: Any, rules_: Sequence[Rule], *, taker: str = "", null: bool = True) -> None:
    """ConfigError when `value` of `key` breaks one of `rules_`: `optimizer.lr=-0.5: must be in (0, inf)`; `key` an
    argument of `taker`, `warmup_schedule(schedule='step'): must be one of …`. Null passes where `null` lets it."""
    if problem := violation(rules_, value, null):
        given = f"{key}={format_value(value)}"
        raise ConfigError(f"{f'{taker}({given})' if taker else given}: {problem}")


def check_between(values: Mapping[str, Any], rules_: Sequence[Between]) -> None:
    """ConfigError saying what the first of `rules_` finds wrong of `values` together: `task.compile_mode=default
    needs task.compile=true`."""
    if problem := next(filter(None, (rule(values) for rule in rules_)), None):
        raise ConfigError(problem)


Taker = TypeVar("Taker", bound=Callable)


def checks_arguments(taker: Taker | None = None, *, between: Sequence[Between] = ()) -> Taker:
    """`taker`, a function or a class (its `__init__`), checking each argument it is called with against the
    rules of that argument's annotation before it runs, as the checks before a run do for config values, then
    its arguments (defaults filled in) against the rules `between` them: `@checks_arguments(between=(…,))`."""
    if taker is None:
        return functools.partial(checks_arguments, between=between)  # type: ignore[return-value]
    is_class = inspect.isclass(taker)
    function = taker.__init__ if is_class else taker
    offset = 1 if is_class else 0  # `self`, bound by the call

    @functools.wraps(function)
    def checked(*args: Any, **kwargs: Any) -> Any:
        signature, rules_of, nullable = argument_rules(function)
        try:
            arguments = signature.bind_partial(*args[offset:], **kwargs)
        except TypeError:  # a call that does not fit the signature fails as it would unchecked
            return function(*args, **kwargs)
        for name, value in arguments.arguments.items():
            check_rules(name, value, rules_of.get(name, ()), taker=taker.__qualname__, null=name in nullable)
        arguments.apply_defaults()
        check_between(arguments.arguments, between)
        return function(*args, **kwargs)

    checked.between = tuple(between)  # for check_taken_together, which judges a config's values before a run
    if is_class:
        taker.__init__ = checked
        return taker
    return checked  # type: ignore[return-value]


def check_taken_together(taker: Callable, values: Mapping[str, Any]) -> None:
    """The rules `between` that `taker` (a function, or a class's own `__init__`) declares with `checks_arguments`,
    on `values`, the arguments a config gives it, defaults filled in: a config refused before anything is built, in
    the words the call would use. A base class's rules wait for the call: a subclass may pass it arguments of its own
    making (TokenClassificationDataModule its num_labels). So does a rule that reads an argument only the run
    supplies (a model config)."""
    checked = vars(taker).get("__init__") if inspect.isclass(taker) else taker
    if not getattr(checked, "between", ()):
        return
    signature = argument_rules(inspect.unwrap(checked))[0]  # cached with the call's own check, `self` left out
    takes_any = any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in signature.parameters.values())
    try:
        arguments = signature.bind_partial(**(values if takes_any else
                                              {name: value for name, value in values.items()
                                               if name in signature.parameters}))
    except TypeError:  # values that do not fit the signature are refused where they are walked
        return
    arguments.apply_defaults()
    check_between(arguments.arguments, [functools.partial(judged_if_given, rule) for rule in checked.between])


def judged_if_given(rule: Between, values: Mapping[str, Any]) -> str | None:
    """`rule` on `values`, or None where it reads an argument that only the run supplies (a model config)."""
    try:
        return rule(values)
    except KeyError:
        return None


@functools.lru_cache(maxsize=None)
def argument_rules(function: Callable
                   ) -> tuple[inspect.Signature, Mapping[str, tuple[Rule, ...]], frozenset[str]]:
    """The signature of `function` without `self`, the rules of each of its arguments that has any, and those of
    them whose annotation admits None (`Count | None`: the others refuse it); read at the first call, when every
    name its annotations use is defined."""
    signature = inspect.signature(function)
    parameters = [parameter for parameter in signature.parameters.values() if parameter.name != "self"]
    annotations = argument_annotations(function)
    rules_of = {name: found for name, annotation in annotations.items() if (found := rules(annotation))}
    nullable = frozenset(name for name in rules_of if type(None) in base_types(annotations[name]))
    return signature.replace(parameters=parameters), rules_of, nullable


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
