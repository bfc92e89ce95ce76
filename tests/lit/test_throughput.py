"""The throughput monitor (bertlab.lit.throughput.TokenThroughputMonitor): the MFU it logs from `flops_per_batch`,
and when it reads the clock; `flops_per_batch` of the LightningModules (ModelFlopsPerBatch)."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from bertlab.flops import classification_forward_flops, mlm_forward_flops
from bertlab.lit.classification import ClassificationModule
from bertlab.lit.masking import masking_generator
from bertlab.lit.throughput import TokenThroughputMonitor
from tests.lit.helpers import (classification_batch, loader, pretraining_batch, pretraining_module, small_config,
                               trainer)


def test_mfu_is_the_flops_per_second_over_the_configured_peak(tmp_path):
    module = pretraining_module()
    monitor = TokenThroughputMonitor(window_size=2, peak_flops=1e9)
    fit = trainer(tmp_path, max_steps=5, callbacks=[monitor], log_every_n_steps=1, limit_val_batches=0)
    fit.fit(module, train_dataloaders=loader([pretraining_batch()] * 5))
    frame = pd.read_csv(next(tmp_path.glob("logs/**/metrics.csv")))
    flops_per_sec = frame["train/device/flops_per_sec"].dropna()
    assert len(flops_per_sec) == 4 and (flops_per_sec > 0).all()  # from the second batch on (a window of 2)
    assert frame["train/device/mfu"].dropna().tolist() == pytest.approx((flops_per_sec / 1e9).tolist())


class CountingClock:
    """time.perf_counter for the throughput monitors: each read is one second after the last."""

    def __init__(self):
        self.reads = 0

    def perf_counter(self) -> float:
        self.reads += 1
        return float(self.reads)


def test_the_monitor_reads_the_clock_only_on_the_steps_it_logs(tmp_path, monkeypatch):
    # On a GPU each read of the clock is a device sync, which keeps the host from queueing the next step.
    clock = CountingClock()
    monkeypatch.setattr("lightning.pytorch.callbacks.throughput_monitor.time", clock)
    monkeypatch.setattr("bertlab.lit.throughput.time", clock)
    monitor = TokenThroughputMonitor(window_size=2)
    fit = trainer(tmp_path, max_steps=12, callbacks=[monitor], log_every_n_steps=4, limit_val_batches=0)
    fit.fit(pretraining_module(), train_dataloaders=loader([pretraining_batch()] * 12))
    assert clock.reads == 4  # the start, then steps 4, 8 and 12
    frame = pd.read_csv(next(tmp_path.glob("logs/**/metrics.csv")))
    rates = frame.dropna(subset=["train/device/batches_per_sec"])
    assert rates["step"].tolist() == [7, 11]  # the window holds two readings from the second on
    assert rates["train/device/batches_per_sec"].tolist() == [4.0, 4.0]  # 4 batches between readings 1 s apart
    assert rates["train/device/samples_per_sec"].tolist() == [32.0, 32.0]  # 8 rows a batch
    assert frame["train/batches"].dropna().tolist() == [4, 8, 12]


def test_the_batches_before_a_validation_are_clocked_before_its_time_is_set_aside(tmp_path, monkeypatch):
    clock = CountingClock()
    monkeypatch.setattr("lightning.pytorch.callbacks.throughput_monitor.time", clock)
    monkeypatch.setattr("bertlab.lit.throughput.time", clock)
    monitor = TokenThroughputMonitor(window_size=2)
    fit = trainer(tmp_path, max_steps=8, callbacks=[monitor], log_every_n_steps=4, val_check_interval=6,
                  limit_val_batches=1)
    fit.fit(pretraining_module(), train_dataloaders=loader([pretraining_batch()] * 8),
            val_dataloaders=loader([pretraining_batch()]))
    frame = pd.read_csv(next(tmp_path.glob("logs/**/metrics.csv")))
    rates = frame.dropna(subset=["train/device/batches_per_sec"])
    # Readings: the start (1), step 4 (2), steps 5–6 before the validation (3), the validation (4, 5), step 8 (6):
    # steps 7 and 8 took the one second between readings 3 and 6 that the validation did not.
    assert rates.set_index("step")["train/device/batches_per_sec"].to_dict() == {7: 2.0}


def test_a_training_batch_counts_forward_and_backward_an_evaluation_batch_the_forward():
    module = pretraining_module()  # mlm_probability 0.3
    assert module.flops_per_batch is None  # before any batch
    module.count_batch(pretraining_batch())  # 8 rows of 16 tokens, [CLS] and [SEP] never masked
    forward = mlm_forward_flops(module.model.config, batch_size=8, length=16, predicted=8 * 14 * 0.3)
    assert module.train().flops_per_batch == pytest.approx(3 * forward)
    assert module.eval().flops_per_batch == pytest.approx(forward)
    classifier = ClassificationModule(config=small_config(num_labels=2))
    classifier.count_batch(classification_batch())  # 16 × 12
    assert classifier.eval().flops_per_batch == classification_forward_flops(classifier.model.config, 16, 12)


def test_a_sampled_softmax_step_counts_the_decoder_over_its_candidates_alone():
    module = pretraining_module(softmax_samples=8).train()
    batch = pretraining_batch()  # the targets are tokens 10 to 17
    module.set_unigram(torch.bincount(batch["input_ids"].flatten(), minlength=module.model.config.vocab_size).numpy())
    module._sampled_mlm_loss(batch, masking_generator(7, 0))
    candidates = module._scored_tokens
    assert 8 < candidates <= 8 + 8  # the targets and the tokens drawn, each once: far fewer than the vocabulary
    config, predicted = module.model.config, 8 * 14 * 0.3
    forward = mlm_forward_flops(config, batch_size=8, length=16, predicted=predicted)
    decoder_saved = 2 * predicted * config.hidden_size * (config.vocab_size - candidates)
    assert module.flops_per_batch == pytest.approx(3 * (forward - decoder_saved))
    assert module.eval().flops_per_batch == pytest.approx(forward)  # validation keeps the full softmax
