"""The throughput monitor (bertlab.lit.throughput.TokenThroughputMonitor): the MFU it logs from `flops_per_batch`,
and when it reads the clock."""

from __future__ import annotations

import pandas as pd
import pytest

from bertlab.lit.throughput import TokenThroughputMonitor
from tests.lit.helpers import loader, pretraining_batch, pretraining_module, trainer


def test_mfu_is_the_flops_per_second_over_the_configured_peak(tmp_path):
    module = pretraining_module()
    monitor = TokenThroughputMonitor(window_size=2, peak_flops=1e9)
    fit = trainer(tmp_path, max_steps=5, callbacks=[monitor], log_every_n_steps=1, limit_val_batches=0)
    fit.fit(module, train_dataloaders=loader([pretraining_batch()] * 5))
    frame = pd.read_csv(next(tmp_path.glob("logs/**/metrics.csv")))
    flops_per_sec = frame["train/device/flops_per_sec"].dropna()
    assert len(flops_per_sec) == 4 and (flops_per_sec > 0).all()  # from the second batch on (a window of 2)
    assert frame["train/device/mfu"].dropna().tolist() == pytest.approx((flops_per_sec / 1e9).tolist())


class CountingClock:
    """time.perf_counter for the throughput monitors: each read is one second after the last."""

    def __init__(self):
        self.reads = 0

    def perf_counter(self) -> float:
        self.reads += 1
        return float(self.reads)


def test_the_monitor_reads_the_clock_only_on_the_steps_it_logs(tmp_path, monkeypatch):
    # On a GPU each read of the clock is a device sync, which keeps the host from queueing the next step.
    clock = CountingClock()
    monkeypatch.setattr("lightning.pytorch.callbacks.throughput_monitor.time", clock)
    monkeypatch.setattr("bertlab.lit.throughput.time", clock)
    monitor = TokenThroughputMonitor(window_size=2)
    fit = trainer(tmp_path, max_steps=12, callbacks=[monitor], log_every_n_steps=4, limit_val_batches=0)
    fit.fit(pretraining_module(), train_dataloaders=loader([pretraining_batch()] * 12))
    assert clock.reads == 4  # the start, then steps 4, 8 and 12
    frame = pd.read_csv(next(tmp_path.glob("logs/**/metrics.csv")))
    rates = frame.dropna(subset=["train/device/batches_per_sec"])
    assert rates["step"].tolist() == [7, 11]  # the window holds two readings from the second on
    assert rates["train/device/batches_per_sec"].tolist() == [4.0, 4.0]  # 4 batches between readings 1 s apart
    assert rates["train/device/samples_per_sec"].tolist() == [32.0, 32.0]  # 8 rows a batch
    assert frame["train/batches"].dropna().tolist() == [4, 8, 12]


def test_the_batches_before_a_validation_are_clocked_before_its_time_is_set_aside(tmp_path, monkeypatch):
    clock = CountingClock()
    monkeypatch.setattr("lightning.pytorch.callbacks.throughput_monitor.time", clock)
    monkeypatch.setattr("bertlab.lit.throughput.time", clock)
    monitor = TokenThroughputMonitor(window_size=2)
    fit = trainer(tmp_path, max_steps=8, callbacks=[monitor], log_every_n_steps=4, val_check_interval=6,
                  limit_val_batches=1)
    fit.fit(pretraining_module(), train_dataloaders=loader([pretraining_batch()] * 8),
            val_dataloaders=loader([pretraining_batch()]))
    frame = pd.read_csv(next(tmp_path.glob("logs/**/metrics.csv")))
    rates = frame.dropna(subset=["train/device/batches_per_sec"])
    # Readings: the start (1), step 4 (2), steps 5–6 before the validation (3), the validation (4, 5), step 8 (6):
    # steps 7 and 8 took the one second between readings 3 and 6 that the validation did not.
    assert rates.set_index("step")["train/device/batches_per_sec"].to_dict() == {7: 2.0}
