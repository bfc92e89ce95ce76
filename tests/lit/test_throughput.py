"""The throughput monitor (bertlab.lit.throughput.TokenThroughputMonitor): the MFU it logs from `flops_per_batch`,
and when it reads the clock; `flops_per_batch` of the LightningModules (ModelFlopsPerBatch); and the analytic FLOP
counts of BERT's matrix multiplications: by hand, and against torch's FlopCounterMode on real training steps
(masked LM, classification)."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from bertlab.config import BertConfig
from bertlab.lit.classification import ClassificationModule
from bertlab.lit.masking import masking_generator
from bertlab.lit.throughput import (TRAINING_PER_FORWARD, TokenThroughputMonitor, classification_forward_flops,
                                    dense_bf16_peak_flops, encoder_forward_flops, expected_masked_positions,
                                    mlm_forward_flops, mlm_training_flops)
from bertlab.losses import IGNORE_INDEX
from bertlab.model import BertForMaskedLM, BertForSequenceClassification
from tests.lit.helpers import (classification_batch, loader, pretraining_batch, pretraining_module, small_config,
                               trainer)

TINY = BertConfig(vocab_size=10, hidden_size=4, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8)


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


def test_flops_of_a_tiny_config_match_a_hand_count():
    # B=2, L=8 (16 tokens), H=4, I=8, one layer, V=10, 3 predicted positions:
    #   projections 2·16·(4·4² + 2·4·8) = 32·128 = 4096; attention 2·2·2·8²·4 = 2048
    #   head: transform 2·3·4² = 96, decoder 2·3·4·10 = 240; step = 3 × (4096 + 2048 + 96 + 240)
    assert encoder_forward_flops(TINY, batch_size=2, length=8) == 6144
    assert mlm_training_flops(TINY, batch_size=2, length=8, predicted=3, last_layer_rows=16) == 3 * 6480
    # The sparse last layer: keys and values on 16 rows, 2·16·2·4² = 1024; queries, output projection and FFN
    # on 3, 2·3·(2·4² + 2·4·8) = 576; scores and context for 3 queries against 8 keys, 2·2·3·8·4 = 384.
    assert encoder_forward_flops(TINY, batch_size=2, length=8, last_layer_rows=3) == 1984
    assert mlm_training_flops(TINY, batch_size=2, length=8, predicted=3) == 3 * (1984 + 96 + 240)
    assert expected_masked_positions(batch_size=2, maskable_per_row=10) == pytest.approx(3.0)


@pytest.mark.parametrize("device_name, peak", [
    ("NVIDIA H100 80GB HBM3", 989e12), ("NVIDIA H200", 989e12), ("NVIDIA H100 PCIe", 756e12),
    ("NVIDIA H200 NVL", 835e12), ("NVIDIA A100-SXM4-80GB", None)])
def test_dense_bf16_peak_is_the_datasheets_without_sparsity(device_name, peak):
    assert dense_bf16_peak_flops(device_name) == peak


@pytest.mark.parametrize("attn_implementation", ["sdpa", "eager"])
@pytest.mark.parametrize("predictions_per_row", [None, 4])
def test_flops_match_torch_flop_counter_on_a_training_step(attn_implementation, predictions_per_row):
    config = BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=16, attn_implementation=attn_implementation)
    model = BertForMaskedLM(config).train()
    input_ids = torch.randint(5, 50, (3, 10), generator=torch.Generator().manual_seed(0))
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    labels[0, 2], labels[1, 5], labels[2, 1:4] = 7, 9, 3  # 5 masked positions, at most 3 in a row
    with FlopCounterMode(display=False) as counter:
        model(input_ids, torch.ones_like(input_ids), labels=labels,
              predictions_per_row=predictions_per_row).loss.backward()
    if predictions_per_row is None:  # the head on the 5, the last layer on 3 rows × the most in a row
        expected = mlm_training_flops(config, batch_size=3, length=10, predicted=5, last_layer_rows=9)
    else:  # both on the static block of 3 rows × 4
        expected = mlm_training_flops(config, batch_size=3, length=10, predicted=12)
    assert counter.get_total_flops() == expected


@pytest.mark.parametrize("attn_implementation", ["sdpa", "eager"])
def test_classification_flops_match_torch_flop_counter_on_a_training_step(attn_implementation):
    config = BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=16, num_labels=3, attn_implementation=attn_implementation)
    model = BertForSequenceClassification(config).train()
    input_ids = torch.randint(5, 50, (3, 10), generator=torch.Generator().manual_seed(0))
    with FlopCounterMode(display=False) as counter:
        model(input_ids, torch.ones_like(input_ids), labels=torch.tensor([0, 2, 1])).loss.backward()
    forward = classification_forward_flops(config, batch_size=3, length=10)
    assert counter.get_total_flops() == TRAINING_PER_FORWARD * forward
