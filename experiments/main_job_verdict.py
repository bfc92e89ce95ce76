"""The README's main job (`mlm_tiny_wiki`, three pretraining runs) judged from recorded figures, where the suites'
folders are not all at hand: each pretraining run is a unit (its task means over fine-tuning seeds).

    python experiments/main_job_verdict.py
        the headline: the three runs against scratch (the mean ± std of its seed units), Welch's test from those
        summaries (bertlab.stats.compare_summaries: the interval from the Welch–Satterthwaite degrees of freedom)
    python experiments/main_job_verdict.py --against-main-job SUITE.csv [SUITE.csv …]
        other pretraining runs (one GLUE suite's glue_seeds.csv each, e.g. docs/results/suites/) judged against the
        three runs: Welch's test on the run units (bertlab.stats.compare_scores), the test `bertlab compare` runs
        on two groups of suites

The main job's runs are docs/results/suites/mlm_tiny_wiki_s*_means.csv (docs/results/log/pretraining.md, "The main job
judged (2026-12-02)"); scratch's summary is below.
"""

from __future__ import annotations

import argparse
import csv
from collections import defaultdict
from pathlib import Path

import numpy as np

from bertlab.stats import compare_scores, compare_summaries, summarize

TASKS = ("cola", "sst2", "mrpc", "stsb", "rte")
# Each run's task means over its fine-tuning seeds (their per-seed scores were not kept), as one-seed suites
SUITES = Path(__file__).resolve().parent.parent / "docs" / "results" / "suites"
MAIN_JOB_SUITES = sorted(SUITES.glob("mlm_tiny_wiki_s*_means.csv"))
SCRATCH = {"cola": (10.4, 0.6, 3), "sst2": (82.6, 0.5, 3), "mrpc": (75.1, 0.4, 3), "stsb": (13.6, 2.6, 3),
           "rte": (51.4, 1.7, 3), "glue": (46.6, 0.7, 3)}  # mean, std, n over scratch seeds 0, 1, 2


def suite_means(path: str | Path) -> dict[str, float]:
    """A suite's task means over seeds, and GLUE-small, from its glue_seeds.csv; ValueError where a task has no
    score (a suite still running writes its files after each task)."""
    scores = defaultdict(list)
    with open(path, newline="") as file:
        for row in csv.DictReader(file):
            scores[row["task"]].append(float(row["score"]))
    missing = [task for task in TASKS if not scores[task]]
    if missing:
        raise ValueError(f"{path}: no scores for {', '.join(missing)}")
    means = {task: float(np.mean(scores[task])) for task in TASKS}
    return {**means, "glue": float(np.mean(list(means.values())))}


def against_scratch() -> None:
    runs = [suite_means(path) for path in MAIN_JOB_SUITES]
    print("| task | scratch (3 seeds) | runs | mean [95% CI] | difference [95% CI] | p | verdict | runs a side for 80% power |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for task in (*TASKS, "glue"):
        values = [run[task] for run in runs]
        side = summarize(values)
        result = compare_summaries(SCRATCH[task], (side.mean, side.std, side.n))
        print(f"| {task} | {SCRATCH[task][0]:.1f} | {' / '.join(f'{value:.1f}' for value in values)} | {side.mean:.1f} "
              f"[{side.low:.1f}, {side.high:.1f}] | {result.difference:+.1f} [{result.low:+.1f}, {result.high:+.1f}] | "
              f"{result.p_value:.2g} | {result.verdict} | {result.needed} |")


def against_main_job(paths: list[str]) -> None:
    if len(paths) < 2:
        raise ValueError(f"{len(paths)} pretraining run given: a verdict on runs as units needs two or more")
    runs, main_job = [suite_means(path) for path in paths], [suite_means(path) for path in MAIN_JOB_SUITES]
    print("| task | `mlm_tiny_wiki` (3 runs) | runs | mean ± std | difference [95% CI] | p | verdict | runs a side for 80% power |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for task in (*TASKS, "glue"):
        baseline, values = [run[task] for run in main_job], [run[task] for run in runs]
        base, side = summarize(baseline), summarize(values)
        result = compare_scores(baseline, values, paired=False)
        print(f"| {task} | {base.mean:.1f} ± {base.std:.1f} | {' / '.join(f'{value:.1f}' for value in values)} | "
              f"{side.mean:.1f} ± {side.std:.1f} | {result.difference:+.1f} [{result.low:+.1f}, {result.high:+.1f}] | "
              f"{result.p_value:.2g} | {result.verdict} | {result.needed} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against-main-job", nargs="+", metavar="SUITE.csv",
                        help="glue_seeds.csv of other pretraining runs, judged against the main job's three runs")
    arguments = parser.parse_args()
    try:
        if arguments.against_main_job:
            against_main_job(arguments.against_main_job)
        else:
            against_scratch()
    except ValueError as error:
        parser.exit(2, f"error: {error}\n")


if __name__ == "__main__":
    main()
