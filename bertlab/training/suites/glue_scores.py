"""A GLUE suite's scores, read from its finished jobs: per task the GLUE metric(s) ×100 over seeds, the task's
score (the mean of its metrics: MRPC and QQP F1 and accuracy, STS-B Pearson and Spearman) at the learning rate
with the best selection score where several were tried, and each task's score per seed (glue_seeds.csv).

A job's checkpoint is the validation at the best step of its `monitor`, val/…: with a selection split
(data.selection_fraction, as `bertlab glue` runs by default) the held-out training rows, and the job reports
the validation split (dev/…) at that step; the step the validation split itself would have chosen gives the
dev-selected figure beside it. Without one, val/… is the validation split, which then both chooses and reports.
"""
from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from bertlab.errors import DataError
from bertlab.metrics import best_point, read_metrics, series
from bertlab.stats import compare_scores, summarize
from bertlab.training.run.run_folder import CONFIG
from bertlab.training.suites.glue import DEV, GLUE_AVERAGE, GLUE_TASKS, finished, job_configs


@dataclass(frozen=True)
class JobResult:
    """A finished job's GLUE metrics ×100. `reported`: on the validation split at the exported checkpoint;
    `selection`: the task score that checkpoint was chosen by (on the held-out selection split, or on the
    validation split itself under dev selection); `dev_selected`: on the validation split at the checkpoint
    the validation split would have chosen (what papers that select on dev report; `reported` itself when
    the job held nothing out)."""
    task: str
    lr: float
    seed: int
    held_out: bool
    reported: dict[str, float]
    selection: float
    dev_selected: dict[str, float]


def job_result(job_dir: Path) -> JobResult:
    cfg = OmegaConf.load(job_dir / CONFIG)
    frame = read_metrics(job_dir)
    names = list(cfg.glue.metrics)

    def values(prefix: str, monitor: str) -> dict[str, float]:
        step, _ = best_point(series(frame, monitor), cfg.monitor_mode, monitor)
        return {name: 100 * float(series(frame, f"{prefix}{name}")[step]) for name in names}

    chosen = values("val/", cfg.monitor)
    held_out = all(f"{DEV}{name}" in frame for name in names)
    reported = values(DEV, cfg.monitor) if held_out else chosen
    dev_selected = values(DEV, DEV + cfg.monitor.removeprefix("val/")) if held_out else chosen
    return JobResult(cfg.glue.task, float(cfg.optimizer.lr), int(cfg.seed), held_out, reported,
                     task_score(chosen), dev_selected)


def task_score(values: dict[str, float]) -> float:
    """GLUE's score of a task: the mean of its metrics."""
    return statistics.fmean(values.values())


def suite_results(suite_dir: Path) -> dict[str, dict[float, list[JobResult]]]:
    """The finished jobs by task (in GLUE's order) and learning rate (ascending), each list by seed."""
    results: dict[str, dict[float, list[JobResult]]] = {}
    for job_dir in (path.parent for path in job_configs(suite_dir) if finished(path.parent)):
        job = job_result(job_dir)
        results.setdefault(job.task, {}).setdefault(job.lr, []).append(job)
    if not results:
        raise DataError(f"{suite_dir}: no finished GLUE jobs below it "
                        f"(expected <task>/seed_<n>/ or <task>/lr_<rate>/seed_<n>/ folders)")
    order = sorted(results, key=lambda name: GLUE_TASKS.index(name) if name in GLUE_TASKS else len(GLUE_TASKS))
    return {task: {lr: sorted(results[task][lr], key=lambda job: job.seed) for lr in sorted(results[task])}
            for task in order}


def chosen_rate(by_lr: dict[float, list[JobResult]], score: Callable[[JobResult], float]) -> float:
    """The learning rate whose jobs have the best mean `score`."""
    return max(by_lr, key=lambda lr: statistics.fmean(score(job) for job in by_lr[lr]))


def honest_score(job: JobResult) -> float:
    return job.selection


def dev_score(job: JobResult) -> float:
    return task_score(job.dev_selected)


def metric_rows(task: str, lr: float, results: dict[str, list[float]]) -> list[dict[str, Any]]:
    """One row per metric (mean, std and median over seeds), each with the task's score: their means' mean."""
    rows = [{"task": task, "metric": name, "lr": lr, "seeds": len(values), "mean": statistics.fmean(values),
             "std": statistics.stdev(values) if len(values) > 1 else 0.0, "median": statistics.median(values)}
            for name, values in results.items()]
    score = statistics.fmean(row["mean"] for row in rows)
    return [{**row, "task score": score} for row in rows]


def glue_table(suite_dir: Path) -> tuple[list[dict[str, Any]], float]:
    """Rows (task, metric, learning rate, seeds, mean, std, median, ×100; each task's score; the selection
    scores at the other learning rates tried) and the GLUE average. A task run at several learning rates
    is reported at the one with the best mean selection score."""
    rows, scores = [], []
    for task, by_lr in suite_results(suite_dir).items():
        best = chosen_rate(by_lr, honest_score)
        task_rows = metric_rows(task, best, {name: [job.reported[name] for job in by_lr[best]]
                                             for name in by_lr[best][0].reported})
        others = ", ".join(f"{lr:g}: {statistics.fmean(map(honest_score, jobs)):.1f}"
                           for lr, jobs in by_lr.items() if lr != best)
        rows += [{**row, "other lrs": others} for row in task_rows]
        scores.append(task_rows[0]["task score"])
    return rows, statistics.fmean(scores)


def seed_scores(suite_dir: Path) -> list[dict[str, Any]]:
    """Each task's score per seed (×100), at the learning rate chosen as `glue_table` chooses it, and beside it
    the dev-selected score (rate and checkpoints chosen on the validation split); then the GLUE average of each
    seed that every task ran. What glue_seeds.csv holds and `bertlab compare` judges."""
    rows = []
    for task, by_lr in suite_results(suite_dir).items():
        honest, dev = chosen_rate(by_lr, honest_score), chosen_rate(by_lr, dev_score)
        dev_jobs = {job.seed: job for job in by_lr[dev]}
        rows += [{"task": task, "seed": job.seed, "lr": honest, "score": task_score(job.reported),
                  "dev-selected lr": dev, "dev-selected score": dev_score(dev_jobs[job.seed]) if job.seed in dev_jobs
                  else math.nan, "held out": job.held_out} for job in by_lr[honest]]
    tasks = list(dict.fromkeys(row["task"] for row in rows))
    for seed in sorted({row["seed"] for row in rows}):
        of_seed = [row for row in rows if row["seed"] == seed and row["task"] != GLUE_AVERAGE]
        if len(of_seed) == len(tasks):
            rows.append({"task": GLUE_AVERAGE, "seed": seed, "lr": "",
                         "score": statistics.fmean(row["score"] for row in of_seed), "dev-selected lr": "",
                         "dev-selected score": statistics.fmean(row["dev-selected score"] for row in of_seed),
                         "held out": all(row["held out"] for row in of_seed)})
    return rows


def read_seed_scores(path: Path) -> list[dict[str, Any]]:
    """The rows of a glue_seeds.csv (or of a file laid out as one: task, seed, score; the other columns
    optional), with numbers as numbers."""
    try:
        with path.open(newline="") as handle:
            lines = list(csv.DictReader(handle))
        rows = [{**line, "seed": int(line["seed"]), "score": float(line["score"]),
                 "dev-selected score": float(line.get("dev-selected score") or math.nan),
                 "held out": line.get("held out") == "True"} for line in lines]
    except (KeyError, ValueError) as error:
        raise DataError(f"{path}: expected a CSV with columns task, seed, score (as glue_seeds.csv), and numbers "
                        f"in seed and score; {type(error).__name__}: {error}") from None
    if not rows:
        raise DataError(f"{path}: no rows; expected task, seed, score per line")
    return rows


def score_table(seed_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per task and the GLUE average: seeds, mean, std and 95% interval of the score over seeds, and where the
    suite held out a selection split, the dev-selected score and the held-out − dev-selected difference
    (paired over seeds)."""
    table = []
    for task in dict.fromkeys(row["task"] for row in seed_rows):
        rows = [row for row in seed_rows if row["task"] == task]
        honest = [row["score"] for row in rows]
        summary = summarize(honest)
        entry = {"task": task, "seeds": summary.n, "mean": summary.mean, "std": summary.std,
                 "ci low": summary.low, "ci high": summary.high}
        dev = [row["dev-selected score"] for row in rows]
        if all(row["held out"] for row in rows) and not any(map(math.isnan, dev)):
            change = compare_scores(dev, honest, paired=True)
            entry.update({"dev-selected mean": statistics.fmean(dev), "held-out − dev-selected": change.difference,
                          "difference ci low": change.low, "difference ci high": change.high})
        table.append(entry)
    return table
