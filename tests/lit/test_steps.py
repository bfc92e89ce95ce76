"""The per-step callbacks (bertlab.lit.steps): the final step validated between two intervals, each step's
draws seeded by the seed and the step, and the finite-loss guard: a NaN loss stops the run at its step, and the
checkpoints before it are kept."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

from bertlab.errors import BertlabError
from bertlab.lit.classification import ClassificationModule
from bertlab.lit.steps import FiniteLossGuard, SeedEveryStep, ValidateFinalStep
from tests.lit.helpers import adamw, classification_batch, loader, small_config, trainer

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # Lightning's hints about workers, logging


@pytest.mark.parametrize(("limits", "intervals"), [({"max_steps": 7}, [2, 5]),
                                                   ({"max_steps": -1, "max_epochs": 2}, [2, 5, 8])],
                         ids=["max_steps", "max_epochs"])  # 2 epochs of 5 batches: 10 steps
@pytest.mark.parametrize("validate_final_step", [False, True])
def test_the_final_step_is_validated_between_two_intervals(tmp_path, limits, intervals, validate_final_step):
    callbacks = [ValidateFinalStep()] if validate_final_step else []
    run = trainer(tmp_path, val_check_interval=3, check_val_every_n_epoch=None, callbacks=callbacks, **limits)
    run.fit(ClassificationModule(small_config(), optimizer=adamw()), loader([classification_batch()] * 5),
            loader([classification_batch()]))

    frame = pd.read_csv(run.logger.log_dir + "/metrics.csv")
    validated = frame.loc[frame["val/loss"].notna(), "step"].tolist()
    final_step = run.global_step - 1
    assert final_step == (6 if "max_epochs" not in limits else 9)
    assert validated == intervals + [final_step] * validate_final_step


def test_seed_every_step_makes_each_steps_draws_a_function_of_seed_and_step():
    def draws(seed: int, step: int) -> tuple:
        trainer = SimpleNamespace(global_rank=0, global_step=step)
        SeedEveryStep(seed).on_train_batch_start(trainer, SimpleNamespace(device=torch.device("cpu")), None, step)
        return random.random(), float(np.random.rand()), torch.rand(()).item()

    first = draws(seed=7, step=3)
    torch.rand(5), random.random()  # whatever ran in between
    assert draws(seed=7, step=3) == first
    assert all(a != b for a, b in zip(draws(seed=7, step=4), first))
    assert all(a != b for a, b in zip(draws(seed=8, step=3), first))


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
