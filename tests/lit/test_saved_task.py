"""A bertlab LightningModule records its class in every checkpoint it saves (bertlab.lit.saved_task)."""

from __future__ import annotations

from bertlab.lit.classification import ClassificationModule
from bertlab.lit.saved_task import SAVED_BY
from tests.lit.helpers import pretraining_module, small_config


def test_a_module_records_its_class_in_the_checkpoints_it_saves():
    for module in (pretraining_module(), ClassificationModule(small_config())):
        checkpoint = {"global_step": 3}
        module.on_save_checkpoint(checkpoint)
        assert checkpoint == {"global_step": 3, SAVED_BY: type(module).__name__}
