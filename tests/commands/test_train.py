"""A `train` run logs the model FLOP/s of its steps (and MFU where the peak is known) in metrics.csv,
without Lightning's warning about a missing `flops_per_batch`."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.bertlab_runs import pretraining, run_in_process


@pytest.mark.slow
def test_a_train_run_logs_its_flops_per_second(tiny_data_dir, tmp_path, capsys, recwarn):
    run = tmp_path / "run"
    outcome = run_in_process(pretraining(tiny_data_dir, tmp_path / "cache", run, "trainer.max_steps=6",
                                         "trainer.val_check_interval=3", "trainer.log_every_n_steps=1",
                                         "callbacks.throughput.window_size=2"), capsys)
    assert outcome.code == 0, outcome.err
    frame = pd.read_csv(run / "metrics.csv")
    assert (frame["train/device/flops_per_sec"].dropna() > 0).sum() >= 4
    assert "train/device/mfu" not in frame  # a CPU has no known peak: callbacks.throughput.peak_flops sets one
    assert [str(warning.message) for warning in recwarn if "flops_per_batch" in str(warning.message)] == []
