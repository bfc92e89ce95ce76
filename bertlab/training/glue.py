"""The GLUE suite: a sweep of fine-tunes over tasks × seeds (× learning rates) (`python -m bertlab glue`),
its progress, and its table — per task the GLUE metric(s) as mean ± std and median over seeds, the
task's score (the mean of its metrics, ×100: MRPC and QQP F1 and accuracy, STS-B Pearson and Spearman),
at the learning rate with the best score where several were tried, and the GLUE average of the task
scores — written as glue.csv, glue.md and glue.png into the suite folder.

Each job's numbers are those of its exported checkpoint: the validation at the best step of the
job's `monitor`.
"""

from __future__ import annotations

import csv
import statistics
import time
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
from bertlab.training.preflight import format_value, refusing
from bertlab.training.run_folder import CONFIG, HF_MODEL
from bertlab.training.sweeps import run_overrides

GLUE_TASKS = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "mnli_mm", "qnli", "rte", "wnli")
GLUE_SMALL = ("cola", "sst2", "mrpc", "stsb", "rte")
GLUE_CSV = "glue.csv"  # the suite folder's table, what `bertlab compare` reads
GLUE_AVERAGE = "GLUE average"  # the last row of glue.csv
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


def job_result(job_dir: Path) -> tuple[str, float, dict[str, float]]:
    """(task, learning rate, {GLUE metric: value at the exported checkpoint}) of a finished job."""
    cfg = OmegaConf.load(job_dir / CONFIG)
    frame = read_metrics(job_dir)
    step, _ = best_point(series(frame, cfg.monitor), cfg.monitor_mode, cfg.monitor)
    values = {name: float(series(frame, f"val/{name}")[step]) for name in cfg.glue.metrics}
    return cfg.glue.task, float(cfg.optimizer.lr), values


def metric_rows(task: str, lr: float, results: dict[str, list[float]]) -> list[dict[str, Any]]:
    """One row per metric (mean, std and median over seeds), each with the task's score: their means' mean."""
    rows = [{"task": task, "metric": name, "lr": lr, "seeds": len(values), "mean": statistics.fmean(values),
             "std": statistics.stdev(values) if len(values) > 1 else 0.0, "median": statistics.median(values)}
            for name, values in results.items()]
    score = statistics.fmean(row["mean"] for row in rows)
    return [{**row, "task score": score} for row in rows]


def glue_table(suite_dir: Path) -> tuple[list[dict[str, Any]], float]:
    """Rows (task, metric, learning rate, seeds, mean, std, median, ×100; each task's score; the scores
    at the other learning rates tried) and the GLUE average. A task run at several learning rates
    is reported at the one with the best score."""
    results: dict[str, dict[float, dict[str, list[float]]]] = {}
    for job_dir in (path.parent for path in job_configs(suite_dir) if finished(path.parent)):
        task, lr, values = job_result(job_dir)
        for name, value in values.items():
            results.setdefault(task, {}).setdefault(lr, {}).setdefault(name, []).append(100 * value)
    if not results:
        raise DataError(f"{suite_dir}: no finished GLUE jobs below it "
                        f"(expected <task>/seed_<n>/ or <task>/lr_<rate>/seed_<n>/ folders)")
    rows, scores = [], []
    for task in sorted(results, key=lambda name: GLUE_TASKS.index(name) if name in GLUE_TASKS else len(GLUE_TASKS)):
        by_lr = {lr: metric_rows(task, lr, results[task][lr]) for lr in sorted(results[task])}
        best = max(by_lr, key=lambda lr: by_lr[lr][0]["task score"])
        others = ", ".join(f"{lr:g}: {task_rows[0]['task score']:.1f}" for lr, task_rows in by_lr.items() if lr != best)
        rows += [{**row, "other lrs": others} for row in by_lr[best]]
        scores.append(by_lr[best][0]["task score"])
    return rows, statistics.fmean(scores)


def write_glue_table(suite_dir: Path) -> str:
    """glue.csv, glue.md and glue.png in `suite_dir`; returns the Markdown."""
    rows, average = glue_table(suite_dir)
    columns = ["task", "metric", "lr", "seeds", "mean", "std", "median", "task score", "other lrs"]

    def write_csv(temp: str) -> None:
        with open(temp, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            writer.writerows(rows)
            writer.writerow({"task": GLUE_AVERAGE, "task score": average})

    write_atomically(suite_dir / GLUE_CSV, write_csv)
    grid = any(row["other lrs"] for row in rows)
    lines = ["| task | metric | lr | seeds | mean ± std | median | task score |" + (" other lrs: score |" * grid),
             "| --- | --- | --- | --- | --- | --- | --- |" + (" --- |" * grid)]
    lines += [f"| {r['task']} | {r['metric']} | {r['lr']:g} | {r['seeds']} | {r['mean']:.1f} ± {r['std']:.1f} | "
              f"{r['median']:.1f} | {r['task score']:.1f} |" + (f" {r['other lrs']} |" * grid) for r in rows]
    lines.append(f"| **{GLUE_AVERAGE}** | | | | | | **{average:.1f}** |" + (" |" * grid))
    markdown = "\n".join(lines) + "\n"
    write_atomically(suite_dir / "glue.md", lambda temp: Path(temp).write_text(markdown))
    plot_glue(rows, average, suite_dir / "glue.png")
    return markdown


def plot_glue(rows: list[dict[str, Any]], average: float, path: Path) -> None:
    """One bar per task and metric (mean over seeds, ±std), and the GLUE average as a line."""
    figure = Figure(figsize=(7, 0.45 * len(rows) + 1.5), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    labels = [f"{row['task']} {row['metric']} (lr {row['lr']:g})" for row in rows][::-1]
    axes.barh(labels, [row["mean"] for row in rows][::-1], xerr=[row["std"] for row in rows][::-1], capsize=3)
    axes.axvline(average, color="black", linestyle="--", label=f"{GLUE_AVERAGE} {average:.1f}")
    axes.set_xlabel("score ×100 (mean ± std over seeds)")
    axes.legend(loc="best")
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
