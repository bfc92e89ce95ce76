"""What Hydra calls back during bertlab's sweeps, handed the whole config as its API has it: the callbacks it
instantiates, `SweepSummary` for every sweep (conf/hydra/default.yaml) and `GlueSuite` for a `glue` sweep (which
bertlab.commands.glue registers on its command lines), and `glue_job`, the task function of a `glue` sweep's jobs.
Each reads the values it needs and leaves the work to the modules that do it. Hydra builds `SweepSummary` for every
run, a single one too, so the sweep summary's and the glue suite's modules are imported where a sweep needs them,
not with this one."""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from bertlab.errors import DataError
from bertlab.training.run.fit import run_training

log = logging.getLogger("bertlab")


class SweepSummary(Callback):
    """Hydra callback: when a sweep (-m) ends, writes summary.csv and summary.md into its folder
    (bertlab.training.suites.sweeps). A sweep without any finished run only gets a warning: the runs' own errors
    were reported."""

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        from bertlab.training.suites.sweeps import summarize, write_tables

        sweep_dir = Path(config.hydra.sweep.dir)
        try:
            rows, metrics = summarize(sweep_dir)
        except DataError as error:
            log.warning("no sweep summary: %s", error)
            return
        print(write_tables(sweep_dir, rows, metrics), end="")
        print(f"Sweep summary: {sweep_dir / 'summary.csv'}, {sweep_dir / 'summary.md'}")


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
        # A failed job's return_value re-raises its error, which Hydra's launcher reports already.
        if (job_return is not None and job_return.status == JobStatus.COMPLETED
                and job_return.return_value != "skipped"):
            self.ran += 1
            self.seconds += time.perf_counter() - self.job_start

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from bertlab.training.suites.glue import GLUE_CSV
        from bertlab.training.suites.glue_report import write_glue_table
        suite_dir = Path(config.hydra.sweep.dir)
        print(write_glue_table(suite_dir), end="")
        print(f"GLUE table: {suite_dir / 'glue.md'}, {suite_dir / GLUE_CSV}, {suite_dir / 'glue.png'}")


def glue_job(config: DictConfig) -> str | None:
    """Hydra's task function of a `glue` sweep's job: the fine-tune (bertlab.training.run.fit.run_training), or
    "skipped" where the job's folder holds a finished job (bertlab.training.suites.glue.check_finished_jobs has made
    sure that it ran with this launch's settings)."""
    from bertlab.training.suites.glue import finished
    job_dir = Path(HydraConfig.get().runtime.output_dir)
    if finished(job_dir):
        print(f"{job_dir}: finished before, skipped", flush=True)
        return "skipped"
    run_training(config)
    return None
