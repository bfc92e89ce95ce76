"""The rules a config key's annotation declares (bertlab.value_rules): an interval or a set of choices refuses
what lies outside it, saying what it expected."""

from __future__ import annotations

import importlib
import inspect
import math
import pkgutil
import re
from dataclasses import dataclass
from typing import Annotated, Any

import pytest

import bertlab
from bertlab.config import BertConfig
from bertlab.errors import ConfigError
from bertlab.value_rules import (COUNT, Count, Interval, OneOf, Size, argument_annotations, field_problems, format_value,
                                 metadata, rules)


@pytest.mark.parametrize("rule, value, problem", [
    (Interval("(0, inf)"), 0, "must be in (0, inf)"), (Interval("(0, inf)"), 1e38, None),
    (Interval("[0, 1)"), 1.0, "must be in [0, 1)"), (Interval("[0, 1)"), 0, None),
    (Interval("[-1, inf)"), -2, "must be in [-1, inf)"), (Interval("[1, inf)"), float("nan"), "must be in [1, inf)"),
    (OneOf("min", "max"), "mean", "must be one of min, max"), (OneOf("min", "max"), "max", None),
    (Interval("(0, 1)"), "abc", "must be a number in (0, 1)"), (Interval("[1, inf)"), True, "must be a number in [1, inf)"),
])
def test_a_rule_refuses_what_lies_outside_it(rule, value, problem):
    assert rule.violation(value) == problem


@pytest.mark.parametrize("rule, value, problem", [
    (Interval("(0, inf)", says="positive"), 0, "must be positive"),
    (Interval("(0, inf)", says="positive"), "x", "must be positive"),
    (Interval("[0, inf)", whole=True), 1.5, "must be a whole number in [0, inf)"),
    (Interval("[0, inf)", whole=True), 2, None),
    (Size(1_000), 0, "must be a positive integer"), (Size(1_000), 32.0, "must be a positive integer"),
    (Size(1_000), 1_001, "is 1,001; bertlab accepts at most 1,000"), (Size(1_000, zero=True), 0, None),
])
def test_a_rule_words_what_it_expects(rule, value, problem):
    assert rule.violation(value) == problem


def test_field_problems_judge_each_field_by_its_rules_and_its_type():
    @dataclass
    class Fields:
        size: Annotated[int, Size(10)] = 1
        switch: bool = True
        rate: Annotated[float, Interval("[0, 1)")] | None = None
        names: list[str] | None = None

    assert list(field_problems(Fields())) == []
    assert list(field_problems(Fields(rate=None, names=["a"]))) == []
    assert [(name, value, problem) for name, value, _, problem in field_problems(Fields(size=11, switch=1, rate=1.0))] \
        == [("size", 11, "is 11; bertlab accepts at most 10"), ("switch", 1, "must be true or false"),
            ("rate", 1.0, "must be in [0, 1)")]
    assert [problem for *_, problem in field_problems(Fields(switch=None))] == ["must be true or false"]


def test_a_rule_that_takes_text_leaves_words_to_the_code_that_reads_them():
    assert Interval("[1, 65536]", takes_text=True).violation("auto") is None
    assert Interval("[1, 65536]", takes_text=True).violation(0) == "must be in [1, 65536]"


def test_the_rules_of_an_annotation_are_found_inside_unions():
    assert rules(Count | None) == (COUNT,)
    assert rules(Annotated[str, OneOf("a", "b")] | None) == (OneOf("a", "b"),)
    assert rules(int | None) == () and rules(Annotated[dict, dict]) == () and metadata(Annotated[dict, dict]) == [dict]


def ruled_arguments() -> list[tuple[Any, str, tuple]]:
    """(taker, argument, its rules) for each argument with rules of a function or class of the package. Left out:
    Hydra's schemas (the checks before a run read them, nobody calls them) and the modelling code an export
    folder carries (bertlab.checkpoint.remote_code, imported from that folder)."""
    found = []
    for module_info in pkgutil.walk_packages(bertlab.__path__, "bertlab."):
        if module_info.name.endswith("__main__") or module_info.name.startswith(("bertlab.training.launch.schema",
                                                                                  "bertlab.checkpoint.remote_code")):
            continue
        module = importlib.import_module(module_info.name)
        for item in vars(module).values():
            if getattr(item, "__module__", None) != module.__name__:
                continue
            function = vars(item).get("__init__") if inspect.isclass(item) else item
            if not inspect.isfunction(function):
                continue
            found += [(item, name, rules(annotation)) for name, annotation in argument_annotations(function).items()
                      if rules(annotation)]
    return found


def outside(rule) -> Any:
    if isinstance(rule, OneOf):
        return "surely-not-a-choice"
    low, high = (float(bound) for bound in rule.bounds[1:-1].split(","))
    return low - 1 if math.isfinite(low) else high + 1


RULED = [(taker, name, rules_) for taker, name, rules_ in ruled_arguments()
         if taker is not BertConfig]  # it words its refusals as a model config: test_config


def test_the_package_declares_rules_on_the_arguments_of_its_api():
    takers = {taker.__name__ for taker, _, _ in RULED}
    assert {"warmup_schedule", "PretrainingModule", "ClassificationDataModule", "TransferSettings"} <= takers


@pytest.mark.parametrize("taker, name, rules_", RULED, ids=[f"{taker.__name__}.{name}" for taker, name, _ in RULED])
def test_every_ruled_argument_is_refused_when_python_code_passes_a_value_outside_its_rule(taker, name, rules_):
    """The checks before a run refuse a bad config value; the same value passed by a user's own code is
    refused the same way, before the taker runs (its other arguments are not even given)."""
    value = outside(rules_[0])
    with pytest.raises(ConfigError, match=re.escape(f"{taker.__qualname__}({name}={format_value(value)}): must be")):
        taker(**{name: value})
