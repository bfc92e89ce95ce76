"""The teacher tests build tiny models as the Lightning-module tests do: on one thread, seeded."""

from tests.lit.conftest import one_thread_and_seeded

__all__ = ["one_thread_and_seeded"]  # the autouse fixture, shared
