"""The finite-loss guard (bertlab.lit.finite_loss): a NaN loss stops the run at its step, and the checkpoints
before it are kept."""

from __future__ import annotations

import pytest
from lightning.pytorch.callbacks import ModelCheckpoint

from bertlab.errors import BertlabError
from bertlab.lit.classification import ClassificationModule
from bertlab.lit.finite_loss import FiniteLossGuard
from tests.lit.helpers import adamw, classification_batch, loader, small_config, trainer

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # Lightning's hints about workers, logging


class NaNAtStep3(ClassificationModule):
    def training_step(self, batch, batch_idx):
        loss = super().training_step(batch, batch_idx)
        return loss * float("nan") if self.global_step == 3 else loss


def test_finite_loss_guard_stops_at_the_bad_step_and_keeps_the_good_checkpoints(tmp_path):
    module = NaNAtStep3(small_config(), optimizer=adamw())
    checkpoints = ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=1, save_top_k=-1)
    run = trainer(tmp_path, max_steps=10, enable_checkpointing=True, logger=False,
                  callbacks=[checkpoints, FiniteLossGuard(check_every_n_steps=4)])
    with pytest.raises(BertlabError, match=r"NaN or inf at training step 3 .*kept in"):
        run.fit(module, loader([classification_batch()] * 10))
    saved = sorted(path.name for path in (tmp_path / "ckpt").iterdir())
    assert saved == ["epoch=0-step=1.ckpt", "epoch=0-step=2.ckpt", "epoch=0-step=3.ckpt"]
