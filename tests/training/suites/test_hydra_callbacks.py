"""What Hydra calls back during bertlab's sweeps (bertlab.training.suites.hydra_callbacks), called here as Hydra
calls it: the sweep summary when a sweep ends (a warning where no run finished), a GLUE suite's progress and ETA
and its table when it ends, and a GLUE job that runs its fine-tune or skips a finished one. Sweeps that Hydra runs:
tests/training/suites/test_sweeps.py."""

from __future__ import annotations

import csv
import logging
from pathlib import Path

import pandas as pd
import pytest
from hydra.conf import HydraConf
from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import DictConfig, OmegaConf

from bertlab.training.suites import hydra_callbacks
from bertlab.training.suites.hydra_callbacks import GlueSuite, SweepSummary, glue_job
from tests.training.fake_clocks import FakeClock
from tests.training.suites.test_glue_scores import write_job


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """The suite's clock, moved by hand."""
    fake = FakeClock(0.0)
    monkeypatch.setattr(hydra_callbacks.time, "perf_counter", fake)
    return fake


def sweep_config(sweep_dir: Path) -> DictConfig:
    return OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep_dir)}}})


def job_config(task: str, seed: int, lr: float) -> DictConfig:
    return OmegaConf.create({"glue": {"task": task}, "seed": seed, "optimizer": {"lr": lr}})


def returned(value) -> JobReturn:
    return JobReturn(status=JobStatus.COMPLETED, _return_value=value)


def test_the_sweep_summary_is_written_into_the_sweep_folder_and_printed(tmp_path, capsys):
    for job, losses in (("0", [3.0, 2.0]), ("1", [3.5, 3.0])):
        (tmp_path / job).mkdir()
        pd.DataFrame({"step": [9, 19], "val/loss": losses}).to_csv(tmp_path / job / "metrics.csv", index=False)
    SweepSummary().on_multirun_end(sweep_config(tmp_path))
    with (tmp_path / "summary.csv").open(newline="") as handle:
        rows = {row["run"]: row for row in csv.DictReader(handle)}
    assert list(rows) == ["0", "1", "mean", "std"]
    assert float(rows["mean"]["val/loss"]) == pytest.approx(2.5)  # the last validations, 2.0 and 3.0
    assert float(rows["std"]["val/loss"]) == pytest.approx(0.5 ** 0.5)
    markdown = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert capsys.readouterr().out == (f"{markdown}Sweep summary: {tmp_path / 'summary.csv'}, "
                                       f"{tmp_path / 'summary.md'}\n")


def test_a_sweep_without_a_finished_run_gets_a_warning_and_no_summary(tmp_path, capsys, caplog):
    (tmp_path / "0").mkdir()  # a job that failed before it logged
    with caplog.at_level(logging.WARNING, logger="bertlab"):
        SweepSummary().on_multirun_end(sweep_config(tmp_path))
    assert [record.getMessage() for record in caplog.records] == [
        f"no sweep summary: {tmp_path}: no runs with a metrics.csv below it; expected a sweep folder such as "
        f"outputs/<recipe>/multirun/<time>"]
    assert capsys.readouterr().out == "" and not (tmp_path / "summary.csv").exists()


def test_a_failed_job_is_not_counted_and_its_error_is_not_raised_again(clock, capsys):
    suite = GlueSuite(jobs=3, done_before=0)
    suite.on_job_start(job_config("rte", 0, 1e-3))
    clock.time += 30.0
    suite.on_job_end(job_config("rte", 0, 1e-3), JobReturn(status=JobStatus.FAILED, _return_value=ValueError("x")))
    suite.on_job_start(job_config("rte", 1, 1e-3))
    assert suite.ran == 0 and capsys.readouterr().out.splitlines()[-1] == "GLUE job 2/3: rte seed 1, lr 0.001"


def test_the_suites_progress_counts_earlier_sweeps_and_estimates_from_the_jobs_that_ran(clock, capsys):
    suite = GlueSuite(jobs=5, done_before=1)
    suite.on_job_start(job_config("rte", 0, 1e-3))
    clock.time += 120.0
    suite.on_job_end(job_config("rte", 0, 1e-3), returned(None))  # ran: 2 minutes
    suite.on_job_start(job_config("rte", 1, 1e-3))
    clock.time += 1.0
    suite.on_job_end(job_config("rte", 1, 1e-3), returned("skipped"))  # finished before: no measure of a job
    suite.on_job_start(job_config("stsb", 0, 3e-4))
    clock.time += 60.0
    suite.on_job_end(job_config("stsb", 0, 3e-4), None)  # no return: not counted either
    suite.on_job_start(job_config("stsb", 1, 3e-4))
    # 2 minutes a job that ran: 3 jobs left (this one too) after the first, 2 after the second, 1 after the third.
    assert capsys.readouterr().out.splitlines() == [
        "GLUE job 2/5: rte seed 0, lr 0.001",
        "GLUE job 3/5: rte seed 1, lr 0.001, about 6.0 min left",
        "GLUE job 4/5: stsb seed 0, lr 0.0003, about 4.0 min left",
        "GLUE job 5/5: stsb seed 1, lr 0.0003, about 2.0 min left"]


def test_the_suite_writes_and_prints_its_glue_table_when_the_sweep_ends(tmp_path, capsys):
    for seed, accuracy in enumerate((0.60, 0.64)):
        write_job(tmp_path, "rte", seed, [{"step": 9, "val/accuracy": accuracy}], "val/accuracy", ["accuracy"])
    GlueSuite(jobs=2).on_multirun_end(sweep_config(tmp_path))
    markdown = (tmp_path / "glue.md").read_text(encoding="utf-8")
    assert "| rte | accuracy | 0.001 | 2 | 62.0 ± 2.8 | 62.0 | 62.0 |" in markdown
    assert capsys.readouterr().out == (f"{markdown}GLUE table: {tmp_path / 'glue.md'}, {tmp_path / 'glue.csv'}, "
                                       f"{tmp_path / 'glue.png'}\n")
    assert (tmp_path / "glue_seeds.csv").is_file() and (tmp_path / "glue.png").is_file()


@pytest.fixture
def job_dir(tmp_path):
    """The folder Hydra gives the job (HydraConfig's runtime.output_dir), Hydra's config put back afterwards."""
    folder = tmp_path / "rte" / "seed_0"
    folder.mkdir(parents=True)
    hydra = OmegaConf.create({"hydra": OmegaConf.structured(HydraConf)})
    hydra.hydra.runtime.output_dir = str(folder)
    previous = HydraConfig.instance().cfg
    HydraConfig.instance().set_config(hydra)
    yield folder
    HydraConfig.instance().cfg = previous


def test_a_glue_job_runs_its_fine_tune_in_the_folder_hydra_gave_it(job_dir, monkeypatch):
    trained = []
    monkeypatch.setattr(hydra_callbacks, "run_training", trained.append)
    config = job_config("rte", 0, 1e-3)
    assert glue_job(config) is None and trained == [config]


def test_a_finished_glue_job_is_skipped_without_training(job_dir, monkeypatch, capsys):
    (job_dir / "hf_model").mkdir()
    (job_dir / "hf_model" / "model.safetensors").write_bytes(b"")
    (job_dir / "metrics.json").write_text("{}")
    monkeypatch.setattr(hydra_callbacks, "run_training", lambda config: pytest.fail("a finished job trained again"))
    assert glue_job(job_config("rte", 0, 1e-3)) == "skipped"
    assert capsys.readouterr().out == f"{job_dir}: finished before, skipped\n"
