"""The README's headline (`mlm_tiny_wiki` pretraining beats scratch on GLUE-small) judged over pretraining runs,
from recorded figures where the suites' folders are not all at hand: each run a unit (its task means over
fine-tuning seeds), scratch as the mean ± std of its seed units. Welch's test from those summaries
(rejudge_claims.welch_from_stats: the interval from the Welch–Satterthwaite degrees of freedom), the test
`bertlab compare` runs on two groups.

    python benchmarks/main_job_verdict.py runs/glue_s2/glue_seeds.csv [more suites' glue_seeds.csv …]

The recorded figures are those of docs/results/pretraining.md, "The main job judged (2026-12-02)".
"""

from __future__ import annotations

import csv
import sys
from collections import defaultdict

import numpy as np
from rejudge_claims import S, welch_from_stats

from bertlab.stats import summarize

TASKS = ("cola", "sst2", "mrpc", "stsb", "rte")
RECORDED_RUNS = {"seed 0": {"cola": 8.6, "sst2": 81.3, "mrpc": 75.1, "stsb": 69.8, "rte": 53.9, "glue": 57.8},
                 "seed 1": {"cola": 2.4, "sst2": 82.1, "mrpc": 76.0, "stsb": 72.8, "rte": 53.3, "glue": 57.3}}
SCRATCH = {"cola": S(10.4, 0.6), "sst2": S(82.6, 0.5), "mrpc": S(75.1, 0.4), "stsb": S(13.6, 2.6), "rte": S(51.4, 1.7),
           "glue": S(46.6, 0.7)}  # mean, std over scratch seeds 0, 1, 2


def suite_means(path: str) -> dict[str, float]:
    """A suite's task means over seeds, and GLUE-small, from its glue_seeds.csv."""
    scores = defaultdict(list)
    with open(path, newline="") as file:
        for row in csv.DictReader(file):
            scores[row["task"]].append(float(row["score"]))
    means = {task: float(np.mean(scores[task])) for task in TASKS}
    return {**means, "glue": float(np.mean(list(means.values())))}


def main(paths: list[str]) -> None:
    runs = [*RECORDED_RUNS.values(), *map(suite_means, paths)]
    print("| task | scratch (3 seeds) | runs | mean [95% CI] | difference [95% CI] | p | verdict | runs a side for 80% power |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for task in (*TASKS, "glue"):
        values = [run[task] for run in runs]
        side = summarize(values)
        result = welch_from_stats(SCRATCH[task], S(side.mean, side.std, side.n))
        print(f"| {task} | {SCRATCH[task].mean:.1f} | {' / '.join(f'{value:.1f}' for value in values)} | {side.mean:.1f} "
              f"[{side.low:.1f}, {side.high:.1f}] | {result.difference:+.1f} [{result.low:+.1f}, {result.high:+.1f}] | "
              f"{result.p:.2g} | {result.verdict} | {result.needed} |")


if __name__ == "__main__":
    main(sys.argv[1:])
