"""bertlab.stats against hand-computed cases, scipy.stats' own formulas and published power tables, and
synthetic scores: a real difference is found, a null one is not, and the same scores give the same verdict."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from bertlab.stats import (BETTER, NOT_TESTABLE, PAIRED, UNDECIDED, WELCH, WORSE, compare_scores, compare_summaries,
                           paired_seeds_needed, summarize, welch_seeds_needed)

T_975_2 = 4.302653  # Student's t, 97.5th percentile, 2 degrees of freedom (any t table)


def test_the_interval_of_three_values_is_the_hand_computed_one():
    summary = summarize([1.0, 2.0, 3.0])  # mean 2, std 1, half-width t(0.975, 2) · 1 / √3
    assert (summary.mean, summary.std, summary.n) == (2.0, 1.0, 3)
    assert summary.low == pytest.approx(2 - T_975_2 / math.sqrt(3), abs=1e-6)
    assert summary.high == pytest.approx(2 + T_975_2 / math.sqrt(3), abs=1e-6)


def test_the_interval_matches_scipys_t_interval():
    values = np.random.default_rng(0).normal(80, 2, size=7)
    low, high = stats.t.interval(0.95, 6, loc=values.mean(), scale=stats.sem(values))
    summary = summarize(values)
    assert (summary.low, summary.high) == (pytest.approx(low), pytest.approx(high))


def test_one_value_has_no_spread_and_no_interval():
    summary = summarize([81.5])
    assert summary.mean == 81.5 and summary.n == 1 and math.isnan(summary.std) and math.isnan(summary.low)


def test_the_paired_difference_is_the_hand_computed_one():
    # b − a = 1, 2, 2: mean 5/3, std √(1/3), so the half-width is t(0.975, 2) · √(1/3) / √3 = t / 3.
    verdict = compare_scores([1.0, 2.0, 3.0], [2.0, 4.0, 5.0], paired=True)
    assert verdict.test == PAIRED and verdict.difference == pytest.approx(5 / 3)
    assert (verdict.low, verdict.high) == (pytest.approx(5 / 3 - T_975_2 / 3, abs=1e-6),
                                           pytest.approx(5 / 3 + T_975_2 / 3, abs=1e-6))
    assert verdict.verdict == BETTER and verdict.p_value == pytest.approx(stats.ttest_rel([2, 4, 5], [1, 2, 3]).pvalue)


def test_welchs_interval_is_the_hand_computed_one():
    # a = 1, 2, 3 and b = 4, 6, 8, 10: variances 1 and 20/3, Welch–Satterthwaite degrees of freedom from them.
    a, b = [1.0, 2.0, 3.0], [4.0, 6.0, 8.0, 10.0]
    se = math.sqrt(1 / 3 + (20 / 3) / 4)
    df = se ** 4 / ((1 / 3) ** 2 / 2 + ((20 / 3) / 4) ** 2 / 3)
    half = stats.t.ppf(0.975, df) * se
    verdict = compare_scores(a, b, paired=False)
    assert verdict.test == WELCH and verdict.difference == pytest.approx(5.0)
    assert (verdict.low, verdict.high) == (pytest.approx(5 - half), pytest.approx(5 + half))
    assert verdict.verdict == BETTER


@pytest.mark.parametrize("seed", range(3))
def test_welch_from_summaries_is_welch_from_the_scores(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(50, 2, size=3), rng.normal(52, 4, size=5)
    from_scores = compare_scores(a, b, paired=False)
    from_summaries = compare_summaries((a.mean(), a.std(ddof=1), 3), (b.mean(), b.std(ddof=1), 5))
    assert from_summaries.test == WELCH and from_summaries.verdict == from_scores.verdict
    assert from_summaries.needed == from_scores.needed
    for field in ("difference", "low", "high", "p_value"):
        assert getattr(from_summaries, field) == pytest.approx(getattr(from_scores, field))


def test_welch_from_summaries_needs_two_values_a_side():
    verdict = compare_summaries((50.0, 1.0, 3), (60.0, math.nan, 1))
    assert verdict.difference == 10.0 and verdict.verdict == UNDECIDED and math.isnan(verdict.low)


@pytest.mark.parametrize("seed", range(5))
def test_a_real_difference_is_found_and_a_null_one_is_not(seed):
    rng = np.random.default_rng(seed)
    # Five seeds sharing a seed effect (data order) of std 2, noise of std 0.5 on each side.
    shared = rng.normal(80, 2, size=5)
    a = shared + rng.normal(0, 0.5, size=5)
    real = compare_scores(a, shared + 3 + rng.normal(0, 0.5, size=5), paired=True)
    null = compare_scores(a, shared + rng.normal(0, 0.5, size=5), paired=True)
    assert real.verdict == BETTER and real.low > 0
    assert null.verdict == UNDECIDED and null.low < 0 < null.high


def test_welch_finds_a_large_unpaired_difference_and_not_a_null_one():
    rng = np.random.default_rng(7)
    a, b, c = rng.normal(58, 1, size=6), rng.normal(62, 1, size=6), rng.normal(58, 1, size=6)
    assert compare_scores(a, b, paired=False).verdict == BETTER
    assert compare_scores(b, a, paired=False).verdict == WORSE
    assert compare_scores(a, c, paired=False).verdict == UNDECIDED


def test_the_same_scores_give_the_same_verdict():
    a, b = [57.2, 59.0, 61.1], [58.0, 60.5, 60.9]
    assert compare_scores(a, b, paired=True) == compare_scores(a, b, paired=True)


def test_seed_counts_match_the_published_power_tables():
    # Cohen's d = 0.5 at α = 0.05 two-sided, 80% power: 34 pairs (paired t), 64 per group (two-sample t).
    assert paired_seeds_needed(0.5, 1.0) == 34
    assert welch_seeds_needed(0.5, 1.0, 1.0) == 64
    assert paired_seeds_needed(0.0, 1.0) is None and welch_seeds_needed(1.0, 0.0, 0.0) is None


def test_a_constant_difference_has_a_one_point_interval_and_is_not_testable():
    verdict = compare_scores([1.0, 2.0, 3.0], [2.0, 3.0, 4.0], paired=True)
    assert (verdict.low, verdict.high, verdict.verdict) == (1.0, 1.0, NOT_TESTABLE)
    assert math.isnan(verdict.p_value) and verdict.needed is None


def test_tied_seeds_on_each_side_are_not_testable():
    verdict = compare_scores([80.0, 80.0], [82.0, 82.0], paired=False)
    assert (verdict.difference, verdict.verdict) == (2.0, NOT_TESTABLE)


def test_too_few_seeds_give_no_verdict():
    verdict = compare_scores([80.0], [82.0], paired=True)
    assert verdict.verdict == UNDECIDED and math.isnan(verdict.low) and verdict.needed is None
