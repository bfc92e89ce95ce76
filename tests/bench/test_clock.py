"""The benchmark's clock (bertlab.bench.clock): systems timed in turns, and the step clock's synchronisation."""

from __future__ import annotations

import torch

from bertlab.bench import clock
from bertlab.bench.clock import StepClock, interleave


def test_interleave_takes_turns_and_keeps_each_systems_times():
    calls = []

    def measurement(name, seconds):
        def measure():
            calls.append(name)
            return seconds
        return measure

    timings = interleave({"a": measurement("a", 1.0), "b": measurement("b", 3.0)}, repeats=3)
    assert calls == ["a", "b", "b", "a", "a", "b"]
    assert timings["a"].seconds == [1.0, 1.0, 1.0] and timings["b"].median == 3.0


def test_step_clock_synchronises_only_after_the_warm_up_and_the_last_step(monkeypatch):
    synchronised_after = []
    step_clock = StepClock(torch.device("cpu"), warmup=2)
    monkeypatch.setattr(clock, "synchronize", lambda device: synchronised_after.append(step_clock.batches))
    trainer = type("Trainer", (), {"max_steps": 5})()
    for batch_idx in range(5):
        step_clock.on_train_batch_end(trainer, None, None, None, batch_idx)
    assert synchronised_after == [2, 5]
    assert step_clock.seconds == step_clock.end - step_clock.start > 0
