"""The data module a task reads its texts from in `setup`, refused when it is of another kind."""

from __future__ import annotations

from typing import TypeVar

import lightning as L

from bertlab.errors import ConfigError

Data = TypeVar("Data")


def task_data(module: L.LightningModule, kind: type[Data], texts: str, hint: str = "") -> Data:
    """The trainer's data module, which `module` reads `texts` from: a `kind` (`hint` says which data config
    gives one), or a ConfigError."""
    data = module.trainer.datamodule
    if not isinstance(data, kind):
        raise ConfigError(f"{type(module).__name__} reads {texts} from a {kind.__name__}{hint}; "
                          f"the trainer has {type(data).__name__}")
    return data
