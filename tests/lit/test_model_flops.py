"""`flops_per_batch` of the LightningModules, and the MFU that TokenThroughputMonitor logs from it."""

from __future__ import annotations

import pandas as pd
import pytest

from bertlab.flops import classification_forward_flops, mlm_forward_flops
from bertlab.lit import ClassificationModule
from bertlab.lit.callbacks import TokenThroughputMonitor
from tests.lit.helpers import (classification_batch, loader, pretraining_batch, pretraining_module, tiny_config,
                               trainer)


def test_a_training_batch_counts_forward_and_backward_an_evaluation_batch_the_forward():
    module = pretraining_module()  # mlm_probability 0.3
    assert module.flops_per_batch is None  # before any batch
    module.count_batch(pretraining_batch())  # 8 rows of 16 tokens, [CLS] and [SEP] never masked
    forward = mlm_forward_flops(module.model.config, batch_size=8, length=16, predicted=8 * 14 * 0.3)
    assert module.train().flops_per_batch == pytest.approx(3 * forward)
    assert module.eval().flops_per_batch == pytest.approx(forward)
    classifier = ClassificationModule(config=tiny_config(num_labels=2))
    classifier.count_batch(classification_batch())  # 16 × 12
    assert classifier.eval().flops_per_batch == classification_forward_flops(classifier.model.config, 16, 12)


def test_mfu_is_the_flops_per_second_over_the_configured_peak(tmp_path):
    module = pretraining_module()
    monitor = TokenThroughputMonitor(window_size=2, peak_flops=1e9)
    fit = trainer(tmp_path, max_steps=5, callbacks=[monitor], log_every_n_steps=1, limit_val_batches=0)
    fit.fit(module, train_dataloaders=loader([pretraining_batch()] * 5))
    frame = pd.read_csv(next(tmp_path.glob("logs/**/metrics.csv")))
    flops_per_sec = frame["train/device/flops_per_sec"].dropna()
    assert len(flops_per_sec) == 4 and (flops_per_sec > 0).all()  # from the second batch on (a window of 2)
    assert frame["train/device/mfu"].dropna().tolist() == pytest.approx((flops_per_sec / 1e9).tolist())
