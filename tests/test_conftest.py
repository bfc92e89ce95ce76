"""The suite's own fixtures (tests/conftest.py): bertlab's cache folder is a temporary one for every test."""

from __future__ import annotations

from pathlib import Path

from bertlab.training.run import precision


def test_the_tests_never_write_to_the_users_cache():
    assert Path(precision.cache_folder()).resolve() != (Path.home() / ".cache" / "bertlab").resolve()
