"""Analytic FLOP counts (a multiply-add = 2 FLOPs) of BERT's matrix multiplications, for the model
FLOPs utilisation (MFU) of training runs and of the benchmark.

Embeddings are lookups and elementwise work (LayerNorm, GELU, softmax) is left out, as in the usual
model-FLOPs utilisation convention; the backward pass costs twice the forward.
"""

from __future__ import annotations

from bertlab.config import BertConfig

TRAINING_PER_FORWARD = 3  # a training step: the forward, and a backward of twice its FLOPs

# Datasheet dense bf16 tensor-core peaks (FLOP/s) by CUDA device name, first match wins: the denominator of
# MFU. Lightning's own table gives the with-sparsity figures, twice these. H200 SXM has H100 SXM's arithmetic.
DENSE_BF16_PEAK_FLOPS = {"H100 PCIe": 756e12, "H100 NVL": 835e12, "H200 NVL": 835e12, "H100": 989e12, "H200": 989e12}


def encoder_forward_flops(config: BertConfig, batch_size: int, length: int) -> int:
    """Per layer: the Q, K, V and output projections and the two FFN matmuls,
    2·B·L·(4H² + 2HI), plus attention scores and context, 2·2·B·L²·H."""
    tokens = batch_size * length
    hidden, intermediate = config.hidden_size, config.intermediate_size
    projections = 2 * tokens * (4 * hidden**2 + 2 * hidden * intermediate)
    attention = 2 * 2 * batch_size * length**2 * hidden
    return config.num_hidden_layers * (projections + attention)


def mlm_head_forward_flops(config: BertConfig, predicted: float) -> float:
    """The head's transform (H×H) and decoder (H×V) on `predicted` positions: every position for a
    stock model, only the masked ones for bertlab's sparse prediction."""
    hidden = config.hidden_size
    return 2 * predicted * hidden**2 + 2 * predicted * hidden * config.vocab_size


def mlm_forward_flops(config: BertConfig, batch_size: int, length: int, predicted: float) -> float:
    return encoder_forward_flops(config, batch_size, length) + mlm_head_forward_flops(config, predicted)


def mlm_training_flops(config: BertConfig, batch_size: int, length: int, predicted: float) -> float:
    """One MLM training step: 3 × (encoder + head) forward."""
    return TRAINING_PER_FORWARD * mlm_forward_flops(config, batch_size, length, predicted)


def classification_forward_flops(config: BertConfig, batch_size: int, length: int) -> int:
    """The encoder, then the pooler (H×H) and the classifier (H×labels) on each sequence's [CLS]."""
    hidden = config.hidden_size
    return encoder_forward_flops(config, batch_size, length) + 2 * batch_size * hidden * (hidden + config.num_labels)


def expected_masked_positions(batch_size: int, maskable_per_row: int, mlm_probability: float = 0.15) -> float:
    return batch_size * maskable_per_row * mlm_probability


def dense_bf16_peak_flops(device_name: str) -> float | None:
    """The datasheet's dense bf16 peak of a CUDA device (torch.cuda.get_device_name), None if not listed."""
    return next((peak for name, peak in DENSE_BF16_PEAK_FLOPS.items() if name in device_name), None)
