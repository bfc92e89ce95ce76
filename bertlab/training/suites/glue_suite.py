"""The Hydra callback of a `glue` sweep, which bertlab.commands.glue registers on its command lines, and the check
of the jobs a suite run again skips."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from bertlab.argument_checks import format_value
from bertlab.errors import ConfigError
from bertlab.training.suites.glue import GLUE_CSV, finished, job_configs
from bertlab.training.suites.glue_report import write_glue_table
from bertlab.training.suites.sweeps import run_overrides


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


class GlueSuite(Callback):
    """Hydra callback of a `glue` sweep: progress over the whole suite (which task and seed, how many
    left, ETA from the jobs run so far), and the GLUE table when the sweep ends."""

    def __init__(self, jobs: int, done_before: int = 0):
        """`jobs` of the whole suite, `done_before` of them by the suite's earlier sweeps (tasks at other rates)."""
        self.jobs, self.started, self.ran, self.seconds = jobs, done_before, 0, 0.0
        self.job_start = time.perf_counter()

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
