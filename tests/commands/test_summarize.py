"""`python -m bertlab summarize SWEEP_DIR`: final validation metrics per run and mean ± std, as CSV and
Markdown (the summary every sweep writes when it ends: tests/training/suites/test_sweeps.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bertlab_runs import run_in_process
from tests.training.suites.test_sweeps import read_table


def write_run(sweep: Path, job: str, seed: int, accuracies: list[float]) -> None:
    run = sweep / job
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text(f"- seed={seed}\n")
    lines = ["epoch,step,train/loss,val/accuracy,val/loss"]
    lines += [f"0,{10 * (i + 1)},,{accuracy},{1 - accuracy}" for i, accuracy in enumerate(accuracies)]
    lines.insert(1, "0,5,0.9,,")
    (run / "metrics.csv").write_text("\n".join(lines) + "\n")


def test_summarize_final_metrics_per_run_with_mean_and_std(tmp_path, capsys):
    for job, seed, final in (("0", 1, 0.5), ("1", 2, 0.6), ("2", 3, 0.7), ("10", 11, 0.6)):
        write_run(tmp_path, job, seed, [0.1, final])
    (tmp_path / "3").mkdir()  # a job that failed before logging anything
    outcome = run_in_process(["summarize", str(tmp_path)], capsys)
    assert outcome.code == 0, outcome.err
    rows = read_table(tmp_path / "summary.csv")
    assert [row["run"] for row in rows] == ["0", "1", "2", "10", "mean", "std"]
    assert [row["overrides"] for row in rows[:4]] == ["seed=1", "seed=2", "seed=3", "seed=11"]
    assert [float(row["val/accuracy"]) for row in rows[:4]] == [0.5, 0.6, 0.7, 0.6]
    assert float(rows[4]["val/accuracy"]) == pytest.approx(0.6)
    assert float(rows[5]["val/accuracy"]) == pytest.approx(0.0816497, abs=1e-6)  # sample std of .5 .6 .7 .6
    assert float(rows[4]["val/loss"]) == pytest.approx(0.4)
    assert "train/loss" not in rows[0]
    markdown = (tmp_path / "summary.md").read_text()
    assert markdown.startswith("Each run's last validation")  # a GLUE table reports each run's best beside it
    assert "| run | overrides | val/accuracy | val/loss |" in markdown
    assert "| 0 | seed=1 | 0.5000 | 0.5000 |" in markdown
    assert "| mean ± std | | 0.6000 ± 0.0816 | 0.4000 ± 0.0816 |" in markdown
    assert markdown in outcome.out


def test_summarize_a_folder_without_runs(tmp_path, capsys):
    outcome = run_in_process(["summarize", str(tmp_path)], capsys)
    assert outcome.code == 1
    assert outcome.err.strip() == (f"bertlab: error: {tmp_path}: no runs with a metrics.csv below it; expected a "
                                   f"sweep folder such as outputs/<recipe>/multirun/<time>")
