"""The rules a config key's annotation declares (bertlab.value_rules): an interval or a set of choices refuses
what lies outside it, saying what it expected."""

from __future__ import annotations

from typing import Annotated

import pytest

from bertlab.value_rules import COUNT, CheckedBy, Count, Interval, OneOf, metadata, rules


@pytest.mark.parametrize("rule, value, problem", [
    (Interval("(0, inf)"), 0, "must be in (0, inf)"), (Interval("(0, inf)"), 1e38, None),
    (Interval("[0, 1)"), 1.0, "must be in [0, 1)"), (Interval("[0, 1)"), 0, None),
    (Interval("[-1, inf)"), -2, "must be in [-1, inf)"), (Interval("[1, inf)"), float("nan"), "must be in [1, inf)"),
    (OneOf("min", "max"), "mean", "must be one of min, max"), (OneOf("min", "max"), "max", None),
    (Interval("(0, 1)"), "abc", "must be a number in (0, 1)"), (Interval("[1, inf)"), True, "must be a number in [1, inf)"),
])
def test_a_rule_refuses_what_lies_outside_it(rule, value, problem):
    assert rule.violation(value) == problem


def test_a_rule_that_takes_text_leaves_words_to_the_code_that_reads_them():
    assert Interval("[1, 65536]", takes_text=True).violation("auto") is None
    assert Interval("[1, 65536]", takes_text=True).violation(0) == "must be in [1, 65536]"


def test_the_rules_of_an_annotation_are_found_inside_unions():
    assert rules(Count | None) == (COUNT,)
    assert rules(Annotated[str, OneOf("a", "b")] | None) == (OneOf("a", "b"),)
    assert rules(int | None) == () and rules(Annotated[dict, dict]) == () and metadata(Annotated[dict, dict]) == [dict]
    assert CheckedBy("bertlab.BertConfig").violation(-1) is None
