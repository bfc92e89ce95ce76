"""The GLUE suite's layout (`python -m bertlab glue`): its tasks, its files, and where its jobs' folders lie.
The suite is a sweep of fine-tunes over tasks × seeds (× learning rates) into one folder: its progress and skip
check are bertlab.training.suites.glue_suite, the scores of its jobs glue_scores, its tables and figure glue_report.
"""
from __future__ import annotations

from pathlib import Path

from bertlab.training.run.run_folder import CONFIG, HF_MODEL

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
