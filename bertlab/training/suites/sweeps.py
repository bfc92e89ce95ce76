"""Sweep summaries: the final validation metrics of every run of a sweep (`-m seed=1,2,3`), per run
and as mean ± std, written as summary.csv and summary.md in the sweep folder — when a sweep ends
(the Hydra callback bertlab.training.suites.hydra_callbacks.SweepSummary, conf/hydra/default.yaml) or on demand
(`bertlab summarize`)."""

from __future__ import annotations

import statistics
from pathlib import Path

import yaml

from bertlab.errors import DataError
from bertlab.metrics import VALIDATION_PREFIXES, final_values, named_for_their_sets, read_metrics
from bertlab.tables import markdown_row, markdown_table, write_csv, write_markdown


def run_overrides(run_dir: Path) -> list[str]:
    overrides = run_dir / ".hydra" / "overrides.yaml"
    return (yaml.safe_load(overrides.read_text()) or []) if overrides.is_file() else []


def varying_overrides(runs: list[Path]) -> list[str]:
    """Per run, its overrides that not every run of the sweep shares (what the sweep varied)."""
    overrides = [run_overrides(run) for run in runs]
    shared = set.intersection(*map(set, overrides)) if len(runs) > 1 else set()
    return [" ".join(item for item in items if item not in shared) for items in overrides]


def final_metrics(run_dir: Path) -> dict[str, float]:
    return final_values(named_for_their_sets(read_metrics(run_dir)), prefix=VALIDATION_PREFIXES)


def summarize(sweep_dir: Path) -> tuple[list[dict], list[str]]:
    # Hydra's jobs are sweep_dir/<number>; a GLUE suite's are sweep_dir/<task>/seed_<n> (or
    # <task>/lr_<rate>/seed_<n> over a learning-rate grid); an Optuna study's (recipes/sst2_optuna.yaml)
    # sweep_dir/<launch time>/<number>, every launch of the study
    depths = ("*/metrics.csv", "*/*/metrics.csv", "*/*/*/metrics.csv")
    runs = sorted((path.parent for pattern in depths for path in sweep_dir.glob(pattern)),
                  key=lambda run: job_order(run.relative_to(sweep_dir)))
    if not runs:
        raise DataError(f"{sweep_dir}: no runs with a metrics.csv below it; expected a sweep folder "
                        f"such as outputs/<recipe>/multirun/<time>")
    rows = [{"run": str(run.relative_to(sweep_dir)), "overrides": overrides, **final_metrics(run)}
            for run, overrides in zip(runs, varying_overrides(runs))]
    metrics = sorted({key for row in rows for key in row if key.startswith(VALIDATION_PREFIXES)})
    return rows, metrics


def job_order(job: Path) -> tuple[str, int, str]:
    """Hydra numbers a sweep's jobs 0, 1, …: job 10 comes after job 9 (within their folder)."""
    return str(job.parent), (int(job.name) if job.name.isdigit() else -1), job.name


def mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def write_tables(sweep_dir: Path, rows: list[dict], metrics: list[str]) -> str:
    columns = ["run", "overrides", *metrics]
    aggregate = {key: mean_std([row[key] for row in rows if key in row]) for key in metrics}
    write_csv(sweep_dir / "summary.csv", [*rows, {"run": "mean", **{k: m for k, (m, _) in aggregate.items()}},
                                          {"run": "std", **{k: s for k, (_, s) in aggregate.items()}}], columns)
    table = markdown_table(columns, ([row["run"], row["overrides"], *(f"{row[k]:.4f}" if k in row else ""
                                                                      for k in metrics)] for row in rows))
    total = markdown_row(["mean ± std", None, *(f"{m:.4f} ± {s:.4f}" for m, s in aggregate.values())])
    lines = ["Each run's last validation, not its best:", "", *table, total]
    return write_markdown(sweep_dir / "summary.md", "\n".join(lines) + "\n")
