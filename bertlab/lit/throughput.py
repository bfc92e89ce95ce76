"""Token throughput and MFU of training (TokenThroughputMonitor), clocked only on the steps it logs."""

from __future__ import annotations

import time
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import ThroughputMonitor
from lightning.pytorch.trainer.states import RunningStage
from lightning.pytorch.utilities import rank_zero_only

from bertlab.flops import dense_bf16_peak_flops
from bertlab.value_rules import Positive, checks_arguments


def _sequences(batch: dict[str, torch.Tensor]) -> int:
    return batch["input_ids"].shape[0]


def _tokens(batch: dict[str, torch.Tensor]) -> int:
    return batch["input_ids"].numel()  # padding included: counting real tokens would sync the device


@checks_arguments
class TokenThroughputMonitor(ThroughputMonitor):
    """Lightning's ThroughputMonitor for bertlab's dict batches: logs train/device/samples_per_sec
    (sequences), train/device/items_per_sec (tokens, padding included), train/device/flops_per_sec
    (the module's `flops_per_batch`, bertlab.lit.model_flops) and train/device/mfu, those FLOP/s over
    the device's peak: `peak_flops` (FLOP/s of one device), else the datasheet's dense bf16 peak for a
    bf16 run on a GPU bertlab.flops lists, else Lightning's table of GPUs for the training precision
    (no peak on CPU: no MFU).

    Lightning's monitor reads the clock after every batch, and on a GPU that is a device sync: the host
    stops queueing the next step's kernels until the device has finished this one, and the device idles
    while it launches them. This one counts every training batch but reads the clock only on the steps
    it logs (trainer.log_every_n_steps) and before a validation, so `window_size` counts logged steps.
    Lightning (2.6) has no public hook for when the clock is read: this overrides the monitor's private `_start`
    and `_update` and keeps its counters, and asks `trainer._logger_connector.should_update_logs`, as the
    monitor's own `_compute` does; tests/lit/test_throughput.py pins what that gives.
    """

    def __init__(self, peak_flops: Positive | None = None, **kwargs: Any):
        super().__init__(batch_size_fn=_sequences, length_fn=_tokens, **kwargs)
        self.peak_flops = peak_flops
        self._unclocked_flops: dict[RunningStage, float] = {}
        self._unclocked_batches: dict[RunningStage, int] = {}

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        device = trainer.strategy.root_device
        if self.peak_flops is None and device.type == "cuda" and "bf16" in str(trainer.precision):
            self.peak_flops = dense_bf16_peak_flops(torch.cuda.get_device_name(device))
        if self.peak_flops is not None:
            self.available_flops = self.peak_flops
            for throughput in self._throughputs.values():  # made in super().setup with the device's peak
                throughput.available_flops = self.peak_flops

    def _start(self, trainer: L.Trainer) -> None:
        super()._start(trainer)
        self._unclocked_flops[trainer.state.stage] = 0.0
        self._unclocked_batches[trainer.state.stage] = 0

    def _update(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, iter_num: int) -> None:
        stage = trainer.state.stage
        self._samples[stage] += self.batch_size_fn(batch)
        self._lengths[stage] += self.length_fn(batch)
        self._batches[stage] += 1
        self._unclocked_batches[stage] += 1
        self._unclocked_flops[stage] += pl_module.flops_per_batch or 0.0  # None before the first batch is counted
        if stage != RunningStage.TRAINING or trainer._logger_connector.should_update_logs:
            self._clock(trainer, stage)

    def _clock(self, trainer: L.Trainer, stage: RunningStage) -> None:
        """Records the counts so far against the time the device has taken for them."""
        device = trainer.strategy.root_device
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        self._throughputs[stage].update(time=time.perf_counter() - self._t0s[stage], batches=self._batches[stage],
                                        samples=self._samples[stage], lengths=self._lengths[stage],
                                        flops=self._unclocked_flops[stage])
        self._unclocked_flops[stage] = 0.0
        self._unclocked_batches[stage] = 0

    @rank_zero_only
    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # The training batches since the last logged step end before the validation's time is set aside.
        if not trainer.sanity_checking and self._unclocked_batches.get(RunningStage.TRAINING):
            self._clock(trainer, RunningStage.TRAINING)
        super().on_validation_start(trainer, pl_module)
