"""The README's headline (`mlm_tiny_wiki` pretraining beats scratch on GLUE-small) judged over pretraining runs,
from recorded figures where the suites' folders are not all at hand: each run a unit (its task means over
fine-tuning seeds), scratch as the mean ± std of its seed units. Welch's test from those summaries
(scipy.stats.ttest_ind_from_stats, the interval from the Welch–Satterthwaite degrees of freedom): the test
`bertlab compare` runs on two groups.

    python benchmarks/main_job_verdict.py runs/glue_s2/glue_seeds.csv [more suites' glue_seeds.csv …]

The recorded figures are those of docs/results/pretraining.md, "The main job judged (2026-12-02)".
"""

from __future__ import annotations

import csv
import math
import sys
from collections import defaultdict

import numpy as np
from scipy import stats

from bertlab.stats import CONFIDENCE, judge, welch_seeds_needed

TASKS = ("cola", "sst2", "mrpc", "stsb", "rte")
RECORDED_RUNS = {"seed 0": {"cola": 8.6, "sst2": 81.3, "mrpc": 75.1, "stsb": 69.8, "rte": 53.9, "glue": 57.8},
                 "seed 1": {"cola": 2.4, "sst2": 82.1, "mrpc": 76.0, "stsb": 72.8, "rte": 53.3, "glue": 57.3}}
SCRATCH = {"cola": (10.4, 0.6), "sst2": (82.6, 0.5), "mrpc": (75.1, 0.4), "stsb": (13.6, 2.6), "rte": (51.4, 1.7),
           "glue": (46.6, 0.7)}  # mean, std over scratch seeds 0, 1, 2
SCRATCH_SEEDS = 3


def suite_means(path: str) -> dict[str, float]:
    """A suite's task means over seeds, and GLUE-small, from its glue_seeds.csv."""
    scores = defaultdict(list)
    with open(path, newline="") as file:
        for row in csv.DictReader(file):
            scores[row["task"]].append(float(row["score"]))
    means = {task: float(np.mean(scores[task])) for task in TASKS}
    return {**means, "glue": float(np.mean(list(means.values())))}


def welch(mean_a: float, std_a: float, n_a: int, values_b: np.ndarray) -> tuple[float, float, float, float]:
    """b − a, its interval and p."""
    mean_b, std_b, n_b = values_b.mean(), values_b.std(ddof=1), len(values_b)
    var_a, var_b = std_a**2 / n_a, std_b**2 / n_b
    df = (var_a + var_b) ** 2 / (var_a**2 / (n_a - 1) + var_b**2 / (n_b - 1))
    half = stats.t.ppf(0.5 + CONFIDENCE / 2, df) * math.sqrt(var_a + var_b)
    p = stats.ttest_ind_from_stats(mean_b, std_b, n_b, mean_a, std_a, n_a, equal_var=False).pvalue
    difference = float(mean_b - mean_a)
    return difference, difference - half, difference + half, float(p)


def main(paths: list[str]) -> None:
    runs = [*RECORDED_RUNS.values(), *map(suite_means, paths)]
    print("| task | scratch (3 seeds) | runs | mean [95% CI] | difference [95% CI] | p | verdict | runs a side for 80% power |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for task in (*TASKS, "glue"):
        values = np.array([run[task] for run in runs])
        (mean_a, std_a), n_b = SCRATCH[task], len(values)
        half = stats.t.ppf(0.5 + CONFIDENCE / 2, n_b - 1) * values.std(ddof=1) / math.sqrt(n_b)
        difference, low, high, p = welch(mean_a, std_a, SCRATCH_SEEDS, values)
        print(f"| {task} | {mean_a:.1f} | {' / '.join(f'{value:.1f}' for value in values)} | {values.mean():.1f} "
              f"[{values.mean() - half:.1f}, {values.mean() + half:.1f}] | {difference:+.1f} [{low:+.1f}, {high:+.1f}] | "
              f"{p:.2g} | {judge(low, high)} | {welch_seeds_needed(difference, std_a, float(values.std(ddof=1)))} |")


if __name__ == "__main__":
    main(sys.argv[1:])
