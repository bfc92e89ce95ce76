"""The rules a config key's annotation declares (bertlab.value_rules): an interval or a set of choices refuses
what lies outside it, saying what it expected."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import pytest

from bertlab.argument_checks import COUNT, Count, SomeOf
from bertlab.value_rules import Interval, OneOf, Size, field_problems, metadata, rules


@pytest.mark.parametrize("rule, value, problem", [
    (Interval("(0, inf)"), 0, "must be in (0, inf)"), (Interval("(0, inf)"), 1e38, None),
    (Interval("[0, 1)"), 1.0, "must be in [0, 1)"), (Interval("[0, 1)"), 0, None),
    (Interval("[-1, inf)"), -2, "must be in [-1, inf)"), (Interval("[1, inf)"), float("nan"), "must be in [1, inf)"),
    (OneOf("min", "max"), "mean", "must be one of min, max"), (OneOf("min", "max"), "max", None),
    (SomeOf("a", "b"), ["b", "c"], "must be some of a, b"), (SomeOf("a", "b"), ["b", "a"], None),
    (SomeOf("a"), [], None), (SomeOf("a", "b"), "c", "must be some of a, b"),
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
