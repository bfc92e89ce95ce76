"""Each checkpoint of a bertlab LightningModule records which module saved it: `resume=` refuses a checkpoint
of another task by reading it (bertlab.training.checks.run_folder_checks)."""

from __future__ import annotations

from typing import Any

import lightning as L

SAVED_BY = "bertlab_task"  # the checkpoint's key: the class name of the LightningModule that saved it


class RecordsTask(L.LightningModule):
    """LightningModule mixin: its class name in every checkpoint it saves, under SAVED_BY."""

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_save_checkpoint(checkpoint)
        checkpoint[SAVED_BY] = type(self).__name__
