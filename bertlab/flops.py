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


def encoder_forward_flops(config: BertConfig, batch_size: int, length: int,
                          last_layer_rows: float | None = None) -> float:
    """Per layer: the Q, K, V and output projections and the two FFN matmuls, 2·B·L·(4H² + 2HI), plus
    attention scores and context, 2·2·B·L²·H (a gated FFN's first matmul is twice as wide: 3HI; local
    layers are counted as global). With `last_layer_rows` (sparse MLM prediction) the last
    layer's keys and values are still computed at every position, its queries, scores, output
    projection and FFN only at that many."""
    tokens = batch_size * length
    hidden, intermediate = config.hidden_size, config.intermediate_size
    ffn_matmuls = 3 if config.gated_ffn else 2

    def layer(query_rows: float) -> float:
        keys_values = 2 * tokens * 2 * hidden**2
        return keys_values + 2 * query_rows * (2 * hidden**2 + ffn_matmuls * hidden * intermediate + 2 * length * hidden)

    last = tokens if last_layer_rows is None else last_layer_rows
    return (config.num_hidden_layers - 1) * layer(tokens) + layer(last)


def mlm_head_forward_flops(config: BertConfig, predicted: float, scored_tokens: float | None = None) -> float:
    """The head's transform (H×H) and decoder (H×V) on `predicted` positions: every position for a
    stock model, only the masked ones for bertlab's sparse prediction. `scored_tokens`: the decoder
    scores that many tokens of the vocabulary (a sampled softmax's candidates) instead of all V."""
    hidden = config.hidden_size
    scored = config.vocab_size if scored_tokens is None else scored_tokens
    return 2 * predicted * hidden**2 + 2 * predicted * hidden * scored


def mlm_forward_flops(config: BertConfig, batch_size: int, length: int, predicted: float,
                      last_layer_rows: float | None = None, scored_tokens: float | None = None) -> float:
    """bertlab's sparse masked LM: the last layer runs at the `predicted` positions too, unless
    `last_layer_rows` says otherwise (with dynamic masking each row is filled up to the batch's most
    masked tokens in a row; those filling rows are not model FLOPs, as padding is not); the decoder
    over `scored_tokens` of the vocabulary (see mlm_head_forward_flops)."""
    rows = predicted if last_layer_rows is None else last_layer_rows
    return (encoder_forward_flops(config, batch_size, length, rows)
            + mlm_head_forward_flops(config, predicted, scored_tokens))


def mlm_training_flops(config: BertConfig, batch_size: int, length: int, predicted: float,
                       last_layer_rows: float | None = None) -> float:
    """One MLM training step: 3 × (encoder + head) forward."""
    return TRAINING_PER_FORWARD * mlm_forward_flops(config, batch_size, length, predicted, last_layer_rows)


def classification_forward_flops(config: BertConfig, batch_size: int, length: int) -> float:
    """The encoder, its last layer at each sequence's [CLS] only, then the pooler (H×H) and the classifier
    (H×labels) there."""
    hidden = config.hidden_size
    return (encoder_forward_flops(config, batch_size, length, last_layer_rows=batch_size)
            + 2 * batch_size * hidden * (hidden + config.num_labels))


def expected_masked_positions(batch_size: int, maskable_per_row: int, mlm_probability: float = 0.15) -> float:
    return batch_size * maskable_per_row * mlm_probability


def dense_bf16_peak_flops(device_name: str) -> float | None:
    """The datasheet's dense bf16 peak of a CUDA device (torch.cuda.get_device_name), None if not listed."""
    return next((peak for name, peak in DENSE_BF16_PEAK_FLOPS.items() if name in device_name), None)
