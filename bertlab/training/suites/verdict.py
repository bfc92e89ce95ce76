"""The verdict between two sides of GLUE scores (`bertlab compare`): each side one suite, or a group of suites
of several pretraining runs. Per task and for the GLUE average: each side's mean with its 95% interval, the
difference (this side − the baseline) with its interval, the test, and better / worse / no detectable
difference (bertlab.stats; docs/statistics.md): verdict.csv's rows and a Markdown table.

One suite a side: the unit is the fine-tuning seed, paired by seed number where both sides ran the same seeds
(the same data order and held-out rows), else Welch's test. Groups: the unit is the pretraining run, each
scored by the mean over its fine-tuning seeds, and Welch's test judges the runs' spread.

Pretraining runs are judged the same way on the plain-text measure (`text_verdicts`): each run scored by the
log of its last `text/perplexity_ratio`, lower being better.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from bertlab.metrics import TEXT_RATIO, final_values, read_metrics
from bertlab.stats import compare_scores, summarize
from bertlab.tables import interval, markdown_table
from bertlab.training.suites.glue import GLUE_AVERAGE, GLUE_SEEDS, finished, job_configs
from bertlab.training.suites.glue_scores import read_seed_scores, seed_scores

SeedRows = list[dict[str, Any]]  # glue_seeds.csv's rows: task, seed, score, …


def suite_seed_scores(path: Path) -> SeedRows | None:
    """The per-seed scores of a suite folder (its glue_seeds.csv, else its jobs) or of a CSV file laid out as
    glue_seeds.csv; None for a folder without them (a pretraining run, a suite with no finished job)."""
    if path.is_file():
        return with_averages(read_seed_scores(path))
    if (path / GLUE_SEEDS).is_file():
        return with_averages(read_seed_scores(path / GLUE_SEEDS))
    if any(finished(config.parent) for config in job_configs(path)):
        return seed_scores(path)
    return None


def with_averages(rows: SeedRows) -> SeedRows:
    """`rows` with a GLUE average row for each seed that every task ran, where the rows give none."""
    if any(row["task"] == GLUE_AVERAGE for row in rows):
        return rows
    tasks = {row["task"] for row in rows}
    averages = []
    for seed in sorted({row["seed"] for row in rows}):
        of_seed = [row["score"] for row in rows if row["seed"] == seed]
        if len(of_seed) == len(tasks):
            averages.append({"task": GLUE_AVERAGE, "seed": seed, "score": statistics.fmean(of_seed)})
    return [*rows, *averages]


def tasks_of(rows: SeedRows) -> list[str]:
    return list(dict.fromkeys(row["task"] for row in rows if row["task"] != GLUE_AVERAGE))


def by_seed(rows: SeedRows, task: str) -> dict[int, float]:
    return {row["seed"]: row["score"] for row in rows if row["task"] == task}


def verdicts(baseline: list[SeedRows], other: list[SeedRows]) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows of the verdict of `other` against `baseline` (each a list of suites: one, or a group), per task both
    sides ran and for the GLUE average where both averaged the same tasks; and notes on what was left out."""
    tasks = [task for task in tasks_of(baseline[0]) if all(task in tasks_of(rows) for rows in [*baseline, *other])]
    notes = []
    same_tasks = len({frozenset(tasks_of(rows)) for rows in [*baseline, *other]}) == 1
    if same_tasks:
        tasks.append(GLUE_AVERAGE)
    else:
        notes.append(f"{GLUE_AVERAGE}: not judged, the sides ran different tasks")
    grouped = len(baseline) > 1 or len(other) > 1
    table = []
    for task in tasks:
        if grouped:  # a pretraining run's score: the mean over its fine-tuning seeds
            a = [statistics.fmean(by_seed(rows, task).values()) for rows in baseline if by_seed(rows, task)]
            b = [statistics.fmean(by_seed(rows, task).values()) for rows in other if by_seed(rows, task)]
            paired, unit = False, "pretraining runs"
        else:
            first, second = by_seed(baseline[0], task), by_seed(other[0], task)
            paired, unit = first.keys() == second.keys() and len(first) > 1, "seeds"
            seeds = sorted(first) if paired else None
            a = [first[seed] for seed in seeds] if paired else list(first.values())
            b = [second[seed] for seed in seeds] if paired else list(second.values())
        if not a or not b:
            continue
        verdict = compare_scores(a, b, paired=paired)
        table.append({"task": task, "unit": unit, "baseline": summarize(a), "other": summarize(b), "verdict": verdict})
    return table, notes


def log_text_ratio(folder: Path) -> float | None:
    """The log of a pretraining run's last `text/perplexity_ratio` (its model's loss on the plain-text measure
    minus the unigram model's, in nats); None for a folder that logged none."""
    ratio = final_values(read_metrics(folder), TEXT_RATIO).get(TEXT_RATIO) if folder.is_dir() else None
    return None if ratio is None else math.log(ratio)


def text_verdicts(baseline: list[float], other: list[float]) -> tuple[list[dict[str, Any]], list[str]]:
    """The verdict of `other` against `baseline` on the plain-text measure, each a list of runs' `log_text_ratio`:
    Welch's test with the run as the unit, lower being better."""
    verdict = compare_scores(baseline, other, paired=False, higher_is_better=False)
    entry = {"task": f"log {TEXT_RATIO}", "unit": "pretraining runs", "baseline": summarize(baseline),
             "other": summarize(other), "verdict": verdict, "digits": 3}
    note = (f"log {TEXT_RATIO}: lower is better; a difference d means the perplexity is exp(d) times the "
            f"baseline's (−0.105: 10% lower)")
    return [entry], [note]


def verdict_row(entry: dict[str, Any]) -> dict[str, Any]:
    """A verdict table entry as flat columns, for verdict.csv."""
    a, b, verdict = entry["baseline"], entry["other"], entry["verdict"]
    return {"task": entry["task"], "unit": entry["unit"], "baseline n": a.n, "baseline mean": a.mean,
            "baseline ci low": a.low, "baseline ci high": a.high, "n": b.n, "mean": b.mean, "ci low": b.low,
            "ci high": b.high, "difference": verdict.difference, "difference ci low": verdict.low,
            "difference ci high": verdict.high, "test": verdict.test, "p": verdict.p_value,
            "verdict": verdict.verdict, "needed for 80% power": verdict.needed}


def verdict_lines(table: list[dict[str, Any]]) -> list[str]:
    """The verdict table as Markdown."""
    rows = []
    for entry in table:
        a, b, verdict = entry["baseline"], entry["other"], entry["verdict"]
        needed = "–" if verdict.needed is None else f"{verdict.needed} {entry['unit']}" + (
            " a side" if verdict.test == "Welch t" else "")
        digits = entry.get("digits", 1)
        rows.append([entry["task"], f"{a.mean:.{digits}f} {span(a.low, a.high, digits)} ({a.n})",
                     f"{b.mean:.{digits}f} {span(b.low, b.high, digits)} ({b.n})",
                     f"{verdict.difference:+.{digits}f} {span(verdict.low, verdict.high, digits)}", verdict.test,
                     "–" if math.isnan(verdict.p_value) else f"{verdict.p_value:.3f}", verdict.verdict, needed])
    return markdown_table(["task", "baseline mean [95% CI] (n)", "mean [95% CI] (n)", "difference [95% CI]", "test",
                           "p", "verdict", "n for 80% power"], rows)


def span(low: float, high: float, digits: int = 1) -> str:
    return interval(low, high, missing="[–]", digits=digits)
