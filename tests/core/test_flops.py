"""Analytic FLOP counts of BERT's matrix multiplications (bertlab.flops): by hand, and against
torch's FlopCounterMode on real training steps (masked LM, classification)."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from bertlab.config import BertConfig
from bertlab.flops import (TRAINING_PER_FORWARD, classification_forward_flops, dense_bf16_peak_flops,
                           encoder_forward_flops, expected_masked_positions, mlm_training_flops)
from bertlab.model import IGNORE_INDEX, BertForMaskedLM, BertForSequenceClassification

TINY = BertConfig(vocab_size=10, hidden_size=4, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8)


def test_flops_of_a_tiny_config_match_a_hand_count():
    # B=2, L=8 (16 tokens), H=4, I=8, one layer, V=10, 3 predicted positions:
    #   projections 2·16·(4·4² + 2·4·8) = 32·128 = 4096; attention 2·2·2·8²·4 = 2048
    #   head: transform 2·3·4² = 96, decoder 2·3·4·10 = 240; step = 3 × (4096 + 2048 + 96 + 240)
    assert encoder_forward_flops(TINY, batch_size=2, length=8) == 6144
    assert mlm_training_flops(TINY, batch_size=2, length=8, predicted=3) == 3 * 6480
    assert expected_masked_positions(batch_size=2, maskable_per_row=10) == pytest.approx(3.0)


@pytest.mark.parametrize("device_name, peak", [
    ("NVIDIA H100 80GB HBM3", 989e12), ("NVIDIA H200", 989e12), ("NVIDIA H100 PCIe", 756e12),
    ("NVIDIA H200 NVL", 835e12), ("NVIDIA A100-SXM4-80GB", None)])
def test_dense_bf16_peak_is_the_datasheets_without_sparsity(device_name, peak):
    assert dense_bf16_peak_flops(device_name) == peak


@pytest.mark.parametrize("attn_implementation", ["sdpa", "eager"])
def test_flops_match_torch_flop_counter_on_a_training_step(attn_implementation):
    config = BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=16, attn_implementation=attn_implementation)
    model = BertForMaskedLM(config).train()
    input_ids = torch.randint(5, 50, (3, 10), generator=torch.Generator().manual_seed(0))
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    labels[0, 2], labels[1, 5], labels[2, 1:4] = 7, 9, 3  # 5 predicted positions
    with FlopCounterMode(display=False) as counter:
        model(input_ids, torch.ones_like(input_ids), labels=labels).loss.backward()
    assert counter.get_total_flops() == mlm_training_flops(config, batch_size=3, length=10, predicted=5)


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
