"""The GLUE suite: a sweep of fine-tunes over tasks × seeds (× learning rates) (`python -m bertlab glue`),
its progress, and its tables — per task the GLUE metric(s) as mean ± std and median over seeds, the
task's score (the mean of its metrics, ×100: MRPC and QQP F1 and accuracy, STS-B Pearson and Spearman),
at the learning rate with the best selection score where several were tried, and the GLUE average of the
task scores; then each task score and the average over seeds with its 95% interval — written as glue.csv,
glue.md, glue_seeds.csv (the scores per seed) and glue.png into the suite folder.

A job's checkpoint is the validation at the best step of its `monitor`, val/…: with a selection split
(data.selection_fraction, as `bertlab glue` runs by default) the held-out training rows, and the job reports
the validation split (dev/…) at that step; the step the validation split itself would have chosen gives the
dev-selected figure beside it. Without one, val/… is the validation split, which then both chooses and reports.
"""
from __future__ import annotations

import csv
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from omegaconf import DictConfig, OmegaConf

from bertlab.errors import ConfigError, DataError
from bertlab.hf_format import write_atomically
from bertlab.metrics import best_point, read_metrics, series
from bertlab.stats import compare_scores, summarize
from bertlab.training.preflight import refusing
from bertlab.training.run_folder import CONFIG, HF_MODEL
from bertlab.training.sweeps import run_overrides
from bertlab.value_rules import format_value

GLUE_TASKS = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "mnli_mm", "qnli", "rte", "wnli")
GLUE_SMALL = ("cola", "sst2", "mrpc", "stsb", "rte")
GLUE_CSV = "glue.csv"  # the suite folder's table, what `bertlab compare` reads
GLUE_AVERAGE = "GLUE average"  # the last row of glue.csv
GLUE_SEEDS = "glue_seeds.csv"  # each task's score per seed: what `bertlab compare` judges
DEV = "dev/"  # the validation split's metrics, when a selection split beside it is logged as val/
JOB_LAYOUTS = ("*/seed_*", "*/lr_*/seed_*")  # <task>/seed_<n>, and <task>/lr_<rate>/seed_<n> with `glue … lrs=`


def job_configs(suite_dir: Path) -> list[Path]:
    """The config.yaml of each job below a suite folder, in either layout, sorted."""
    return sorted(path for layout in JOB_LAYOUTS for path in suite_dir.glob(f"{layout}/{CONFIG}"))


def finished(job_dir: Path) -> bool:
    """A job of the suite that ran to its end: its export and metrics are there."""
    return (job_dir / HF_MODEL / "model.safetensors").is_file() and (job_dir / "metrics.json").is_file()


def job_settings(overrides: list[str], folder_keys: set[str]) -> dict[str, Any]:
    """The values a job's command line sets (parsed: Hydra records `false` as `False`), but for the keys that
    name its folder."""
    parsed = OverridesParser.create().parse_overrides(overrides)
    return {item.key_or_group: item.value() for item in parsed if item.key_or_group not in folder_keys}


def shown(settings: dict[str, Any], key: str) -> str:
    return format_value(settings[key]) if key in settings else "(not set)"


def check_finished_jobs(config: DictConfig) -> None:
    """A finished job is skipped when the suite runs again, so it must have run with this launch's settings:
    else the table would mix settings, and the user would not know."""
    suite_dir = Path(config.hydra.sweep.dir)
    subdir = OmegaConf.to_container(config.hydra.sweep, resolve=False)["subdir"]
    folder_keys = {"glue", "seed", *(["optimizer.lr"] if "optimizer.lr" in subdir else [])}
    wanted = job_settings(list(config.hydra.overrides.task), folder_keys)
    for job_dir in (path.parent for path in job_configs(suite_dir)):
        recorded = run_overrides(job_dir)  # none: a job folder without Hydra's record, not judged
        if not (finished(job_dir) and recorded):
            continue
        had = job_settings(recorded, folder_keys)
        if had != wanted:
            key = min(key for key in {*had, *wanted} if had.get(key) != wanted.get(key))
            raise ConfigError(
                f"{job_dir} finished before with {key}={shown(had, key)}, and this call sets "
                f"{key}={shown(wanted, key)}: a suite's jobs share their settings; give these another "
                f"suite folder (hydra.sweep.dir=…), or delete {suite_dir} to run it again")


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


def interval(low: float, high: float) -> str:
    return "–" if math.isnan(low) else f"[{low:.1f}, {high:.1f}]"


def write_glue_table(suite_dir: Path) -> str:
    """glue.csv, glue.md, glue_seeds.csv and glue.png in `suite_dir`; returns the Markdown."""
    rows, average = glue_table(suite_dir)
    seeds = seed_scores(suite_dir)
    scores = {row["task"]: row for row in score_table(seeds)}
    columns = ["task", "metric", "lr", "seeds", "mean", "std", "median", "task score", "other lrs",
               "task seeds", "task std", "task ci low", "task ci high", "dev-selected score"]

    def task_columns(task: str) -> dict[str, Any]:
        entry = scores.get(task, {})
        return {"task seeds": entry.get("seeds"), "task std": entry.get("std"), "task ci low": entry.get("ci low"),
                "task ci high": entry.get("ci high"), "dev-selected score": entry.get("dev-selected mean")}

    def write_csv(temp: str) -> None:
        with open(temp, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            writer.writerows({**row, **task_columns(row["task"])} for row in rows)
            writer.writerow({"task": GLUE_AVERAGE, "task score": average, **task_columns(GLUE_AVERAGE)})

    def write_seeds(temp: str) -> None:
        with open(temp, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(seeds[0]))
            writer.writeheader()
            writer.writerows(seeds)

    write_atomically(suite_dir / GLUE_CSV, write_csv)
    write_atomically(suite_dir / GLUE_SEEDS, write_seeds)
    grid = any(row["other lrs"] for row in rows)
    lines = ["| task | metric | lr | seeds | mean ± std | median | task score |" +
             (" other lrs: selection score |" * grid),
             "| --- | --- | --- | --- | --- | --- | --- |" + (" --- |" * grid)]
    lines += [f"| {r['task']} | {r['metric']} | {r['lr']:g} | {r['seeds']} | {r['mean']:.1f} ± {r['std']:.1f} | "
              f"{r['median']:.1f} | {r['task score']:.1f} |" + (f" {r['other lrs']} |" * grid) for r in rows]
    lines.append(f"| **{GLUE_AVERAGE}** | | | | | | **{average:.1f}** |" + (" |" * grid))
    lines += ["", *score_lines(list(scores.values())), "", selection_note(seeds)]
    markdown = "\n".join(lines) + "\n"
    write_atomically(suite_dir / "glue.md", lambda temp: Path(temp).write_text(markdown))
    plot_glue(list(scores.values()), suite_dir / "glue.png")
    return markdown


def score_lines(table: list[dict[str, Any]]) -> list[str]:
    """The task scores over seeds as Markdown, with the honest-vs-dev columns where the suite held rows out."""
    held_out = any("dev-selected mean" in entry for entry in table)
    lines = ["| task score | seeds | mean | std | 95% CI |" +
             (" dev-selected | held-out − dev-selected [95% CI] |" * held_out),
             "| --- | --- | --- | --- | --- |" + (" --- | --- |" * held_out)]
    for entry in table:
        name = f"**{entry['task']}**" if entry["task"] == GLUE_AVERAGE else entry["task"]
        line = (f"| {name} | {entry['seeds']} | {entry['mean']:.1f} | {entry['std']:.1f} | "
                f"{interval(entry['ci low'], entry['ci high'])} |")
        if held_out:
            line += (f" {entry['dev-selected mean']:.1f} | {entry['held-out − dev-selected']:+.1f} "
                     f"{interval(entry['difference ci low'], entry['difference ci high'])} |"
                     if "dev-selected mean" in entry else " | |")
        lines.append(line)
    return lines


def selection_note(seeds: list[dict[str, Any]]) -> str:
    if all(row["held out"] for row in seeds):
        return ("Reported: the validation split, once, at the checkpoint and learning rate chosen on a selection "
                "split held out of each task's training rows; dev-selected: the same jobs with the checkpoint and rate "
                "chosen on the validation split instead (95% CI: Student's t over seeds; docs/statistics.md).")
    return ("Reported: the validation split at the checkpoint and learning rate chosen on the validation split "
            "itself (dev selection, as papers report; 95% CI: Student's t over seeds; docs/statistics.md).")


def plot_glue(table: list[dict[str, Any]], path: Path) -> None:
    """Each task's score and the GLUE average: the mean over seeds with its 95% interval; the dev-selected mean
    beside it where the suite held out a selection split."""
    figure = Figure(figsize=(7, 0.5 * len(table) + 1.5), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    table = table[::-1]
    positions = range(len(table))
    means = [entry["mean"] for entry in table]
    errors = [[0 if math.isnan(entry["ci low"]) else entry["mean"] - entry["ci low"] for entry in table],
              [0 if math.isnan(entry["ci high"]) else entry["ci high"] - entry["mean"] for entry in table]]
    axes.barh(positions, means, xerr=errors, capsize=3, color=["C1" if entry["task"] == GLUE_AVERAGE else "C0"
                                                               for entry in table], label="reported (95% CI)")
    dev = [(position, entry["dev-selected mean"]) for position, entry in zip(positions, table)
           if "dev-selected mean" in entry]
    if dev:
        axes.scatter([value for _, value in dev], [position for position, _ in dev], marker="D", color="black",
                     zorder=3, label="dev-selected mean")
    axes.set_yticks(list(positions), [f"{entry['task']} (n={entry['seeds']})" for entry in table])
    axes.set_xlabel("task score ×100: mean over seeds, 95% CI (Student's t)")
    axes.legend(loc="lower right", fontsize=8)
    axes.grid(axis="x", alpha=0.3)
    write_atomically(path, lambda temp: figure.savefig(temp, format="png", dpi=100))


class GlueSuite(Callback):
    """Hydra callback of a `glue` sweep: progress over the whole suite (which task and seed, how many
    left, ETA from the jobs run so far), the check that the jobs it will skip ran with its settings, and the
    GLUE table when the sweep ends."""

    def __init__(self, jobs: int, done_before: int = 0):
        """`jobs` of the whole suite, `done_before` of them by the suite's earlier sweeps (tasks at other rates)."""
        self.jobs, self.started, self.ran, self.seconds = jobs, done_before, 0, 0.0
        self.job_start = time.perf_counter()

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        refusing(lambda: check_finished_jobs(config))

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.started += 1
        self.job_start = time.perf_counter()
        left = self.jobs - self.started + 1
        eta = f", about {self.seconds / self.ran * left / 60:.1f} min left" if self.ran else ""
        print(f"GLUE job {self.started}/{self.jobs}: {config.glue.task} seed {config.seed}, lr {config.optimizer.lr:g}"
              f"{eta}", flush=True)

    def on_job_end(self, config: DictConfig, job_return: Any = None, **kwargs: Any) -> None:
        if job_return is not None and job_return.return_value != "skipped":
            self.ran += 1
            self.seconds += time.perf_counter() - self.job_start

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        suite_dir = Path(config.hydra.sweep.dir)
        print(write_glue_table(suite_dir), end="")
        print(f"GLUE table: {suite_dir / 'glue.md'}, {suite_dir / GLUE_CSV}, {suite_dir / 'glue.png'}")
