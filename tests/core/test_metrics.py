"""A run's metrics.csv read back: the best value in each metric's direction, the summary printed at
the end of a run (bertlab.metrics)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bertlab.metrics import run_summary, summarise_metrics


def test_summary_picks_the_best_value_in_each_metrics_direction():
    frame = pd.DataFrame({"step": [9, 19, 29], "epoch": [0, 0, 0], "val/loss": [2.0, 1.0, 1.5],
                          "val/accuracy": [0.5, 0.4, 0.7], "train/loss": [3.0, None, 2.5]})
    summary = summarise_metrics(frame)
    assert summary["best"] == {"val/loss": {"value": 1.0, "step": 19}, "val/accuracy": {"value": 0.7, "step": 29}}
    assert summary["final"] == {"val/loss": 1.5, "val/accuracy": 0.7, "train/loss": 2.5}


def test_run_summary_names_the_best_value_of_the_monitored_metric(tmp_path: Path):
    (tmp_path / "metrics.csv").write_text(
        "epoch,step,train/loss,val/accuracy\n0,9,0.7,\n0,99,,0.80\n0,199,,0.84\n1,299,,0.82\n")
    lines = run_summary(tmp_path, 1.5, "val/accuracy", "max").splitlines()
    assert "val/accuracy: 0.8 (step 99) → 0.82 (step 299)" in lines
    assert lines[-1] == "best val/accuracy: 0.84 (step 199), the exported checkpoint"
    assert run_summary(tmp_path, 1.5, "val/accuracy", "min").splitlines()[-1].startswith("best val/accuracy: 0.8 ")
    assert "best" not in run_summary(tmp_path, 1.5)
