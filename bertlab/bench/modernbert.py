"""MLM pretraining step throughput of the ModernBERT shape: bertlab's PretrainingModule on a ModernBERT-shaped
config against transformers' ModernBertForMaskedLM, at its defaults and with its sparse_prediction=True.

The sizes are the BERT presets' (bert_tiny, bert_mini: layers, width, heads, feed-forward width) with the
knobs of conf/model/modernbert_base.yaml. Both systems train on the rows bertlab.bench.pretraining makes
(full-length sequences, masked anew every step); transformers' model is built from the same config through
bertlab.checkpoint.modernbert, so the two have the same parameters.
"""

from __future__ import annotations

from dataclasses import replace

import transformers

from bertlab.bench.clock import interleave
from bertlab.bench.pretraining import (MlmSetup, bertlab_measurement, bertlab_options, bertlab_predicted_positions,
                                       collator_batches)
from bertlab.bench.report import Result
from bertlab.bench.training import TransformersLoop
from bertlab.checkpoint.modernbert import modernbert_config_values
from bertlab.config import BertConfig
from bertlab.lit.throughput import mlm_training_flops
from bertlab.training.run.model_group import model_preset

SIZES = ("bert_tiny", "bert_mini")
SHAPE_KEYS = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size")


def modernbert_shaped(size: str, vocab_size: int, dropout: float | None = None) -> BertConfig:
    """`size`'s layers and widths with ModernBERT's knobs."""
    values = {**model_preset("modernbert_base"), **{key: model_preset(size)[key] for key in SHAPE_KEYS},
              "vocab_size": vocab_size, "max_position_embeddings": 512}
    if dropout is not None:
        values.update(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    return BertConfig.from_dict(values)


def modernbert_measurement(setup: MlmSetup, special_ids: dict[str, int], sparse_prediction: bool):
    """Stock ModernBertForMaskedLM (its defaults but `sparse_prediction`) in transformers' training loop."""
    values = modernbert_config_values(setup.config, "BertForMaskedLM")
    config = transformers.ModernBertConfig(**{**values, "sparse_prediction": sparse_prediction,
                                              "pad_token_id": special_ids["pad"]})
    next_batch = collator_batches(setup, special_ids)  # run_mlm.py's collator on the same rows
    loop = TransformersLoop(transformers.ModernBertForMaskedLM(config), setup.device, setup.precision)

    def batch():
        return {key: value for key, value in next_batch().items() if key != "token_type_ids"}  # ModernBERT has none

    return lambda: loop.run(batch, setup.steps, setup.warmup)


def compare(setup: MlmSetup, special_ids: dict[str, int], repeats: int) -> list[Result]:
    """transformers' ModernBertForMaskedLM at its defaults (the baseline), with sparse_prediction, and
    bertlab, measured in turns."""
    baseline, sparse = "transformers ModernBERT", "transformers ModernBERT, sparse_prediction"
    measurements = {baseline: modernbert_measurement(setup, special_ids, False),
                    sparse: modernbert_measurement(setup, special_ids, True),
                    "bertlab": bertlab_measurement(setup, special_ids)}
    timings = interleave(measurements, repeats)
    tokens = setup.batch_size * setup.length
    masked = round(0.15 * tokens)
    predicted = {baseline: tokens, sparse: masked, "bertlab": bertlab_predicted_positions(setup, bertlab_options(setup))}
    # transformers runs its whole encoder at every position; sparse_prediction selects the masked rows for the head only
    last_layer_rows = {baseline: tokens, sparse: tokens, "bertlab": None}
    setting = (f"batch {setup.batch_size} × {setup.length} tokens, vocab {setup.config.vocab_size}, ModernBERT-shaped "
               f"(rotary, pre-norm, GeGLU, no biases, window {setup.config.local_attention_window}, one layer "
               f"in {setup.config.global_attention_every_n_layers} global), AdamW, clipping 1.0")
    return [Result("modernbert", setup.case, setting, setup.precision, name, "tokens/s", tokens * setup.steps,
                   timing, baseline=baseline, steps=setup.steps,
                   flops=mlm_training_flops(setup.config, setup.batch_size, setup.length, predicted[name],
                                            last_layer_rows[name]) * setup.steps)
            for name, timing in timings.items()]


def setups(base: MlmSetup, sizes: tuple[str, ...], vocab_size: int, dropout: float | None) -> list[MlmSetup]:
    return [replace(base, case=f"{size} (ModernBERT-shaped)", config=modernbert_shaped(size, vocab_size, dropout))
            for size in SIZES if size in sizes]
