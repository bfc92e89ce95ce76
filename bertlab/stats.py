"""Statistics over seeds (or pretraining runs): a mean's 95% confidence interval, and the verdict between two
sets of scores — their difference with its 95% interval, better / worse / no detectable difference, and how
many seeds or runs would resolve a difference of that size. docs/statistics.md names the tests and what they
assume.

Scores are higher-is-better (GLUE's); a difference is `b - a`, so "better" means b scores higher than a.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
POWER = 0.8  # of the seed counts a verdict suggests
MOST_SEEDS = 10_000  # beyond this many, a difference is called out of reach
BETTER, WORSE, UNDECIDED = "better", "worse", "no detectable difference"
NOT_TESTABLE = "not testable (no spread)"  # every pair differs alike, or every value is the same
PAIRED, WELCH = "paired t", "Welch t"


@dataclass(frozen=True)
class Summary:
    """Mean, sample standard deviation and Student's t 95% interval of the mean of `n` values
    (std and interval NaN for a single value)."""
    mean: float
    std: float
    low: float
    high: float
    n: int


@dataclass(frozen=True)
class Verdict:
    """b − a with its 95% interval and the two-sided p-value of `test`; `verdict` is BETTER or WORSE where
    the interval excludes zero, NOT_TESTABLE where the scores have no spread to test by. `needed`: the seeds
    (pairs for the paired test, per side for Welch's) at which the test would find this difference with 80%
    power, if it and the spread are as observed; None where the difference is zero or has no spread to judge
    it by."""
    test: str
    difference: float
    low: float
    high: float
    p_value: float
    verdict: str
    needed: int | None


def summarize(values: Sequence[float]) -> Summary:
    values = np.asarray(values, dtype=float)
    n = len(values)
    mean = float(values.mean()) if n else math.nan
    if n < 2:
        return Summary(mean, math.nan, math.nan, math.nan, n)
    std = float(values.std(ddof=1))
    half = float(stats.t.ppf((1 + CONFIDENCE) / 2, n - 1)) * std / math.sqrt(n)
    return Summary(mean, std, mean - half, mean + half, n)


def compare_scores(a: Sequence[float], b: Sequence[float], paired: bool, higher_is_better: bool = True) -> Verdict:
    """The verdict on b against a: the paired t-test on b − a where the values pair (the same seeds, the same
    data order: a[i] with b[i]), else Welch's unequal-variance t-test. With `higher_is_better` false (a loss),
    "better" is an interval below zero."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if paired and len(a) != len(b):
        raise ValueError(f"paired scores need as many values on each side, got {len(a)} and {len(b)}")
    test, difference = PAIRED if paired else WELCH, float(b.mean() - a.mean())
    if min(len(a), len(b)) < 2:
        return Verdict(test, difference, math.nan, math.nan, math.nan, UNDECIDED, None)
    if paired:
        spread = float((b - a).std(ddof=1))
        needed = paired_seeds_needed(difference, spread)
    else:
        spread = math.hypot(a.std(ddof=1), b.std(ddof=1))
        needed = welch_seeds_needed(difference, float(a.std(ddof=1)), float(b.std(ddof=1)))
    if spread == 0:  # an interval of one point: with 2-3 seeds of accuracies, ties say nothing of the next seed
        return Verdict(test, difference, difference, difference, math.nan, NOT_TESTABLE, None)
    result = stats.ttest_rel(b, a) if paired else stats.ttest_ind(b, a, equal_var=False)
    interval = result.confidence_interval(CONFIDENCE)
    low, high = float(interval.low), float(interval.high)
    return Verdict(test, difference, low, high, float(result.pvalue), judge(low, high, higher_is_better), needed)


def compare_summaries(a: tuple[float, float, int], b: tuple[float, float, int]) -> Verdict:
    """Welch's verdict on b against a where only each side's (mean, sample std, n) was kept, not its scores:
    compare_scores' Welch test, its interval from the Welch–Satterthwaite degrees of freedom."""
    (mean_a, std_a, n_a), (mean_b, std_b, n_b) = a, b
    difference = mean_b - mean_a
    if min(n_a, n_b) < 2:
        return Verdict(WELCH, difference, math.nan, math.nan, math.nan, UNDECIDED, None)
    variance_a, variance_b = std_a ** 2 / n_a, std_b ** 2 / n_b
    if variance_a + variance_b == 0:
        return Verdict(WELCH, difference, difference, difference, math.nan, NOT_TESTABLE, None)
    df = (variance_a + variance_b) ** 2 / (variance_a ** 2 / (n_a - 1) + variance_b ** 2 / (n_b - 1))
    half = float(stats.t.ppf((1 + CONFIDENCE) / 2, df)) * math.sqrt(variance_a + variance_b)
    p_value = float(stats.ttest_ind_from_stats(mean_b, std_b, n_b, mean_a, std_a, n_a, equal_var=False).pvalue)
    low, high = difference - half, difference + half
    needed = welch_seeds_needed(difference, std_a, std_b)
    return Verdict(WELCH, difference, low, high, p_value, judge(low, high), needed)


def judge(low: float, high: float, higher_is_better: bool = True) -> str:
    if not higher_is_better:
        low, high = -high, -low
    return BETTER if low > 0 else WORSE if high < 0 else UNDECIDED


def two_sided_power(noncentrality: float, df: float) -> float:
    """The power of a two-sided t-test at the 5% level whose statistic is noncentral t(df, noncentrality)."""
    critical = stats.t.ppf((1 + CONFIDENCE) / 2, df)
    return float(stats.nct.sf(critical, df, noncentrality) + stats.nct.cdf(-critical, df, noncentrality))


def paired_seeds_needed(difference: float, spread: float) -> int | None:
    """The pairs a paired t-test needs for 80% power, the true mean difference and the differences'
    standard deviation being `difference` and `spread`."""
    if difference == 0 or not spread > 0:
        return None
    return smallest_n(lambda n: two_sided_power(difference / spread * math.sqrt(n), n - 1))


def welch_seeds_needed(difference: float, std_a: float, std_b: float) -> int | None:
    """The values per side Welch's test needs for 80% power, as many on each side, the true difference and
    standard deviations being those given."""
    if difference == 0 or not std_a ** 2 + std_b ** 2 > 0:
        return None

    def power(n: int) -> float:
        variance = (std_a ** 2 + std_b ** 2) / n
        df = variance ** 2 / ((std_a ** 4 + std_b ** 4) / (n ** 2 * (n - 1)))
        return two_sided_power(difference / math.sqrt(variance), df)

    return smallest_n(power)


def smallest_n(power) -> int | None:
    """The smallest n >= 2 with power(n) >= POWER (power grows with n: a doubling search, then bisection);
    None beyond MOST_SEEDS."""
    high = 2
    while power(high) < POWER:
        if high >= MOST_SEEDS:
            return None
        high = min(2 * high, MOST_SEEDS)
    low = max(2, high // 2)
    while low < high:
        middle = (low + high) // 2
        if power(middle) >= POWER:
            high = middle
        else:
            low = middle + 1
    return high
