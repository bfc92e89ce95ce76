"""The Hydra callback that checks a composed config before Hydra writes anything
(bertlab.training.checks.before_run.check), and the way its refusal gets past Hydra.

Hydra calls `Preflight` before it creates the run (or sweep) folder. Hydra turns an Exception raised
in a callback into a warning, so a refusal travels out inside `Stop`, which
`bertlab.training.app.launch` reports. A job that a launcher such as submitit runs in a process of
its own raises its refusal as the job's error instead, which comes back to the launching process
inside the job's result.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from bertlab.errors import BertlabError
from bertlab.training.checks.before_run import check
from bertlab.training.run_folder_checks import check_output_folder

BASIC_LAUNCHER = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"


class Stop(BaseException):
    """Carries an error past Hydra's `except Exception`, which would turn it into a warning (in a
    callback) or print its own lines about it (in a job), to the one place that reports it."""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


@dataclass
class LaunchState:
    """What the callbacks saw of this launch, for cleaning up after a refused sweep; in a job that runs
    in a process of its own, the refusal the job raises."""
    sweep_folder_created: Path | None = None
    run_folder_created: Path | None = None  # the outermost folder a run's launch is about to create
    job_started: bool = False
    job_refusal: BertlabError | None = None

    def reset(self) -> None:
        self.sweep_folder_created, self.run_folder_created, self.job_started, self.job_refusal = None, None, False, None


launch_state = LaunchState()


class Preflight(Callback):
    """Hydra callback: `check` before a run or each job of a sweep starts."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        refusing(lambda: check(config, config.hydra.run.dir, new_run=True))
        run_dir = Path(config.hydra.run.dir).absolute()
        if not run_dir.exists():
            launch_state.run_folder_created = next(folder for folder in reversed((run_dir, *run_dir.parents))
                                                   if not folder.exists())

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        folder = Path(config.hydra.sweep.dir)
        refusing(lambda: (check(config, None), check_output_folder(folder)))
        if not folder.exists() and jobs_run_here(config.hydra):  # jobs elsewhere start unseen: keep their folder
            launch_state.sweep_folder_created = folder

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        if config.hydra.mode.name == "MULTIRUN":  # a run was checked in on_run_start
            checks = functools.partial(check, config, config.hydra.runtime.output_dir)
            if jobs_run_here(config.hydra):
                refusing(checks)
            else:  # a Stop would end the job's process without a result: the job raises the refusal instead
                launch_state.job_refusal = refusal(checks)
        launch_state.job_started = True


def jobs_run_here(hydra: DictConfig) -> bool:
    """Whether the jobs run in the launching process (Hydra's basic launcher), rather than in processes
    of their own (submitit), whose errors come back only as the job's result."""
    return hydra.launcher._target_ == BASIC_LAUNCHER


def raise_job_refusal() -> None:
    """In a job that runs in a process of its own, the refusal of its checks, as the job's own error."""
    if launch_state.job_refusal is not None:
        raise launch_state.job_refusal


def refusal(checks: Callable[[], object]) -> BertlabError | None:
    try:
        checks()
    except BertlabError as error:
        return error
    return None


def refusing(checks: Callable[[], object]) -> None:
    if (error := refusal(checks)) is not None:
        raise Stop(error)
