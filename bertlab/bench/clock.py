"""Timing: systems measured in turns (to cancel drift), summaries, the matmul peak, and a Lightning
callback that clocks training steps."""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import lightning as L
import torch

# A measurement runs its own warm-up, then the timed work, and returns the timed seconds.
Measurement = Callable[[], float]


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def autocast(device: torch.device, dtype: torch.dtype | None):
    """Mixed precision as Lightning's "bf16-mixed" (and transformers' bf16=True) apply it."""
    if dtype is None or dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)


@dataclass
class Timing:
    seconds: list[float]  # one per repeat

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def spread(self) -> float:
        """(slowest − fastest) / median of the repeats."""
        return (max(self.seconds) - min(self.seconds)) / self.median


def interleave(measurements: dict[str, Measurement], repeats: int) -> dict[str, Timing]:
    """Runs every measurement once per repeat, in turns, reversing the order on odd repeats
    (A B, B A, …) so that neither system always runs right after the other."""
    seconds: dict[str, list[float]] = {name: [] for name in measurements}
    names = list(measurements)
    for repeat in range(repeats):
        for name in names if repeat % 2 == 0 else reversed(names):
            seconds[name].append(measurements[name]())
    return {name: Timing(values) for name, values in seconds.items()}


def matmul_peak(device: torch.device, dtype: torch.dtype, size: int, seconds: float = 1.0) -> float:
    """FLOP/s of the best of ~`seconds` worth of size×size matrix products on this device."""
    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)
    torch.matmul(a, b)  # warm-up: kernel selection, allocation
    synchronize(device)
    best, deadline = float("inf"), time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        torch.matmul(a, b)
        synchronize(device)
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


class StepClock(L.Callback):
    """Times the training batches after the first `warmup` of a run of `trainer.max_steps`: from the end
    of batch `warmup` to the end of the last (so each timed batch's loading counts). The device is
    synchronised at those two points only, so on a GPU the host queues steps ahead as it would in a
    run (as `TransformersLoop` times its steps)."""

    def __init__(self, device: torch.device, warmup: int) -> None:
        if warmup < 1:
            raise ValueError(f"need at least 1 warm-up step, got {warmup}")
        self.device = device
        self.warmup = warmup
        self.batches = 0
        self.start: float | None = None
        self.end: float | None = None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.batches += 1
        if self.batches in (self.warmup, trainer.max_steps):
            synchronize(self.device)
            now = time.perf_counter()
            if self.batches == self.warmup:
                self.start = now
            self.end = now

    @property
    def seconds(self) -> float:
        if self.start is None or self.batches <= self.warmup:
            raise ValueError(f"need more steps than the {self.warmup} warm-up steps, ran {self.batches}")
        return self.end - self.start
