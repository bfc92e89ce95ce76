"""The persistent storage of an Optuna study (hydra/sweeper=optuna, recipes/sst2_optuna.yaml): an
SQLite file in the sweep folder. Hydra's Optuna sweeper opens the study before Hydra creates that
folder, and SQLite does not create folders, so the storage's `_target_` makes it."""

from __future__ import annotations

from pathlib import Path


def sqlite_storage(path: str) -> str:
    """The storage URL of the SQLite file `path`, its folder created."""
    file = Path(path).absolute()
    file.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{file}"
