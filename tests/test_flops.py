"""Analytic FLOP counts of BERT's matrix multiplications (bertlab.flops): by hand, and against
torch's FlopCounterMode on real training steps (masked LM, classification)."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from bertlab.config import BertConfig
from bertlab.flops import (TRAINING_PER_FORWARD, classification_forward_flops, dense_bf16_peak_flops,
                           encoder_forward_flops, expected_masked_positions, mlm_training_flops)
from bertlab.losses import IGNORE_INDEX
from bertlab.model import BertForMaskedLM, BertForSequenceClassification

TINY = BertConfig(vocab_size=10, hidden_size=4, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8)


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
