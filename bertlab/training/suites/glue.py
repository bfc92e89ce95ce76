"""The GLUE suite's layout (`python -m bertlab glue`): its tasks, its files, where its jobs' folders lie, which
of them finished, and the check that those a suite run again skips ran with its settings.
The suite is a sweep of fine-tunes over tasks × seeds (× learning rates) into one folder: its jobs' task function
and its progress are bertlab.training.suites.hydra_callbacks, the scores of its jobs glue_scores, its tables and
figure glue_report.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from bertlab.argument_checks import format_value
from bertlab.errors import ConfigError
from bertlab.training.run.run_folder import CONFIG, HF_MODEL
from bertlab.training.suites.sweeps import run_overrides

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


def check_finished_jobs(hydra: DictConfig) -> None:
    """A finished job is skipped when the suite runs again, so it must have run with this launch's settings:
    else the table would mix settings, and the user would not know. `hydra` is the sweep's Hydra config: its folder,
    the pattern of its jobs' folders and its command line."""
    suite_dir = Path(hydra.sweep.dir)
    subdir = OmegaConf.to_container(hydra.sweep, resolve=False)["subdir"]
    folder_keys = {"glue", "seed", *(["optimizer.lr"] if "optimizer.lr" in subdir else [])}
    wanted = job_settings(list(hydra.overrides.task), folder_keys)
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
