"""Clocks that tests put in place of bertlab.training.run.trial's, so that what a trial measures is the same every run."""

from __future__ import annotations


class FakeClock:
    """Every reading `tick` seconds after the last."""

    def __init__(self, tick: float):
        self.tick, self.time = tick, 0.0

    def __call__(self) -> float:
        self.time += self.tick
        return self.time


def never_read() -> float:
    raise AssertionError("the clock was read: the run ran a trial")
