"""Sweep summaries (bertlab.training.suites.sweeps): the one every sweep (-m) writes when it ends, through Hydra's basic,
Optuna and submitit sweepers and launchers: final validation metrics per run and mean ± std, as CSV and Markdown
(the same on demand: tests/commands/test_summarize.py)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from tests.bertlab_runs import fine_tuning, run_in_process, sentiment_tokenizer


def read_table(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.slow
def test_a_seed_sweep_writes_its_summary_when_it_ends(tiny_data_dir, tmp_path, capsys):
    tokenizer = sentiment_tokenizer(tiny_data_dir, tmp_path / "tokenizer")
    sweep = tmp_path / "sweep"
    outcome = run_in_process(fine_tuning(
        tiny_data_dir, tokenizer, tmp_path / "unused", "-m", "seed=1,2", f"hydra.sweep.dir={sweep}",
        "data.limit_train_samples=32", "data.limit_eval_samples=16", "trainer.max_steps=4",
        "trainer.val_check_interval=2", "callbacks.artifacts=null"), capsys)
    assert outcome.code == 0, outcome.err
    rows = read_table(sweep / "summary.csv")
    assert [(row["run"], row["overrides"]) for row in rows] == [("0", "seed=1"), ("1", "seed=2"), ("mean", ""),
                                                                ("std", "")]
    assert {"val/accuracy", "val/f1", "val/loss", "val/mcc"} <= set(rows[0])
    assert rows[0]["val/loss"] != rows[1]["val/loss"]  # the seeds made a difference
    assert "| mean ± std |" in (sweep / "summary.md").read_text()


TINY_JOBS = ["data.limit_train_samples=32", "data.limit_eval_samples=16", "trainer.max_steps=4",
             "trainer.val_check_interval=2", "callbacks.artifacts=null"]


@pytest.mark.slow
def test_an_optuna_study_rerun_goes_on_from_its_trials(tiny_data_dir, tmp_path, capsys):
    import optuna

    tokenizer = sentiment_tokenizer(tiny_data_dir, tmp_path / "tokenizer")
    study_dir = tmp_path / "study"

    def launch(trials: int) -> list[dict[str, str]]:
        outcome = run_in_process(fine_tuning(
            tiny_data_dir, tokenizer, tmp_path / "unused", "recipe=sst2_optuna", "-m", f"hydra.sweep.dir={study_dir}",
            f"hydra.sweeper.n_trials={trials}", *TINY_JOBS), capsys)
        assert outcome.code == 0, outcome.err
        return read_table(study_dir / "summary.csv")

    def study() -> optuna.Study:
        return optuna.load_study(study_name="lr_batch_epochs", storage=f"sqlite:///{study_dir / 'study.db'}")

    first = launch(2)
    assert [trial.state.name for trial in study().trials] == ["COMPLETE"] * 2
    assert study().direction.name == "MAXIMIZE"  # the recipe's monitor, val/accuracy, is best at its max
    # Each trial's value is its best validation accuracy, and its run used the values Optuna chose
    # (data.batch_size is fixed on the command line, so Optuna does not choose it).
    assert [trial.value for trial in study().trials] == [float(row["val/accuracy"]) for row in first[:2]]
    for trial, row in zip(study().trials, first[:2]):
        config = OmegaConf.load(study_dir / row["run"] / "config.yaml")
        assert trial.params == {"optimizer.lr": config.optimizer.lr, "trainer.max_epochs": config.trainer.max_epochs}
    rows = launch(1)
    assert len(study().trials) == 3
    runs = [row["run"] for row in rows[:-2]]  # the summary covers the whole study: both launches
    assert len(runs) == 3 and runs[:2] == [row["run"] for row in first[:2]] and runs[2].endswith("/0")


def submitit_sweep(tiny_data_dir, tmp_path, seeds: str, capsys):
    """A tiny fine-tune sweep over `seeds` through submitit's local launcher, into tmp_path/sweep."""
    tokenizer = sentiment_tokenizer(tiny_data_dir, tmp_path / "tokenizer")
    return run_in_process(fine_tuning(
        tiny_data_dir, tokenizer, tmp_path / "unused", "-m", seeds, "hydra/launcher=submitit_local",
        f"hydra.sweep.dir={tmp_path / 'sweep'}", *TINY_JOBS), capsys)


@pytest.mark.slow
def test_a_submitit_sweep_writes_its_summary(tiny_data_dir, tmp_path, capsys):
    sweep = tmp_path / "sweep"
    outcome = submitit_sweep(tiny_data_dir, tmp_path, "seed=1,2", capsys)
    assert outcome.code == 0, outcome.err
    rows = read_table(sweep / "summary.csv")
    assert [(row["run"], row["overrides"]) for row in rows] == [("0", "seed=1"), ("1", "seed=2"), ("mean", ""),
                                                                ("std", "")]
    assert list((sweep / ".submitit").glob("*/*_result.pkl"))  # the jobs ran in processes of submitit's


@pytest.mark.slow
def test_a_job_refused_in_a_submitit_sweep_is_one_line_before_any_job_runs(tiny_data_dir, tmp_path, capsys):
    sweep = tmp_path / "sweep"
    outcome = submitit_sweep(tiny_data_dir, tmp_path, "seed=1,-1", capsys)
    assert outcome.code == 1
    assert outcome.error_lines[-1] == "bertlab: error: seed=-1: must be in [0, 4294967295]"
    assert not sweep.exists()  # each job is checked before the sweep starts
