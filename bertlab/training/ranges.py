"""The allowed values of every numeric and enumerated config key, in one place, checked before a run
starts (bertlab.training.preflight): `bertlab: error: <key>=<value>: must be in (0, inf)`.

A numeric rule is an interval: "[a, b]" includes its ends, "(a, b)" excludes them, "inf" is
unbounded; its key takes numbers only, but for the keys in TAKES_TEXT. An enumeration is a tuple of
choices. Null (where a key allows it) is left to the code that takes it. tests/training/test_ranges.py
fails when a numeric or enumerated key of a shipped config has no rule here.
"""

from __future__ import annotations

import math
from typing import Any

from bertlab.config import (ACTIVATIONS, ATTENTION_IMPLEMENTATIONS, CLASSIFIER_POOLINGS, NORM_POSITIONS, NORM_TYPES,
                            POSITION_EMBEDDING_TYPES, SIZE_LIMITS)
from bertlab.errors import ConfigError
from bertlab.lit.optim import SCHEDULES
from bertlab.lit.pretraining import COMPILE_MODES

PROBABILITY, OPEN_PROBABILITY, POSITIVE, COUNT, NON_NEGATIVE = "[0, 1]", "[0, 1)", "(0, inf)", "[1, inf)", "[0, inf)"

RULES: dict[str, str | tuple] = {
    "seed": f"[0, {2**32 - 1}]",
    "budget_minutes": POSITIVE,
    "monitor_mode": ("min", "max"),
    # model: the sizes up to BertConfig's limits for config.json files
    **{f"model.{name}": f"[1, {limit}]" for name, limit in SIZE_LIMITS.items() if name not in ("vocab_size", "num_labels")},
    "model.hidden_dropout_prob": OPEN_PROBABILITY,
    "model.attention_probs_dropout_prob": OPEN_PROBABILITY,
    "model.classifier_dropout": OPEN_PROBABILITY,
    "model.initializer_range": POSITIVE,
    "model.layer_norm_eps": "(0, 1)",
    "model.hidden_act": ACTIVATIONS,
    "model.position_embedding_type": POSITION_EMBEDDING_TYPES,
    "model.attn_implementation": ATTENTION_IMPLEMENTATIONS,
    "model.type_vocab_size": f"[0, {SIZE_LIMITS['type_vocab_size']}]",  # 0: no token-type embeddings
    "model.rope_theta": POSITIVE,
    "model.local_rope_theta": POSITIVE,
    "model.norm_position": NORM_POSITIONS,
    "model.norm_type": NORM_TYPES,
    "model.head_act": ACTIVATIONS,
    "model.local_attention_window": NON_NEGATIVE,
    "model.global_attention_every_n_layers": COUNT,
    "model.classifier_pooling": CLASSIFIER_POOLINGS,
    "tokenizer.vocab_size": f"[10, {SIZE_LIMITS['vocab_size']}]",
    "tokenizer.max_input_chars_per_word": COUNT,
    # data (corpus and classification datasets)
    "data.max_seq_length": "[8, 1048576]",
    "data.short_seq_prob": PROBABILITY,
    "data.copy_pair_prob": PROBABILITY,
    "data.copy_drop_prob": PROBABILITY,
    "data.batch_size": COUNT,
    "data.eval_batch_size": COUNT,
    "data.num_workers": "[0, 1024]",
    "data.num_proc": COUNT,
    "data.max_train_lines": COUNT,
    "data.max_eval_lines": COUNT,
    "data.limit_train_samples": COUNT,
    "data.limit_eval_samples": COUNT,
    "data.num_labels": f"[1, {SIZE_LIMITS['num_labels']}]",
    "data.transfer.copies": NON_NEGATIVE,
    "data.transfer.joined": NON_NEGATIVE,
    "data.transfer.seed": f"[0, {2**32 - 1}]",
    "data.transfer.p_mask": PROBABILITY,
    "data.transfer.p_replace": PROBABILITY,
    "data.transfer.p_ngram": PROBABILITY,
    "data.transfer.max_ngram": COUNT,
    "data.min_words": COUNT,
    "data.max_words": COUNT,
    "data.max_sentences": COUNT,
    "data.validation_size": COUNT,
    "data.selection_fraction": OPEN_PROBABILITY,  # 0: no selection split (bertlab.data.selection)
    "data.selection_max_rows": COUNT,
    "data.selection_seed": f"[0, {2**32 - 1}]",
    # task
    "task.mlm_probability": "(0, 1)",
    "task.mask_replace_prob": PROBABILITY,
    "task.random_replace_prob": PROBABILITY,
    "task.dropout": OPEN_PROBABILITY,
    "task.layerwise_lr_decay": "(0, 1]",
    "task.alpha": PROBABILITY,
    "task.temperature": POSITIVE,
    "task.hidden_weight": NON_NEGATIVE,
    "task.teacher_batch_size": COUNT,
    "task.compile_mode": COMPILE_MODES,
    # optimizer and schedule
    "optimizer.lr": POSITIVE,
    "optimizer.eps": "(0, 1)",
    "optimizer.weight_decay": NON_NEGATIVE,
    "scheduler.warmup_ratio": PROBABILITY,
    "scheduler.warmup_steps": NON_NEGATIVE,
    "scheduler.schedule": SCHEDULES,
    # trainer (Lightning's own names)
    "trainer.accelerator": ("cpu", "gpu", "cuda", "mps", "tpu", "auto"),
    "trainer.precision": ("32-true", "32", 32, "64-true", "64", 64, "bf16-mixed", "bf16", "bf16-true", "16-mixed", "16",
                          16, "16-true", "transformer-engine", "fastest"),
    "trainer.devices": "[1, 65536]",
    "trainer.num_nodes": "[1, 65536]",
    "trainer.max_steps": "[-1, inf)",
    "trainer.max_epochs": "[-1, inf)",
    "trainer.val_check_interval": POSITIVE,
    "trainer.check_val_every_n_epoch": COUNT,
    "trainer.limit_val_batches": NON_NEGATIVE,
    "trainer.num_sanity_val_steps": "[-1, inf)",
    "trainer.gradient_clip_val": NON_NEGATIVE,
    "trainer.accumulate_grad_batches": COUNT,
    "trainer.log_every_n_steps": COUNT,
    # callbacks
    "callbacks.checkpoint.save_top_k": "[-1, inf)",
    "callbacks.progress_bar.refresh_rate": NON_NEGATIVE,
    "callbacks.throughput.window_size": "[2, inf)",
    "callbacks.throughput.peak_flops": POSITIVE,
    "callbacks.finite_loss.check_every_n_steps": COUNT,
    "callbacks.artifacts.plot_every_seconds": NON_NEGATIVE,
}

# Interval keys that Lightning also reads from words: devices=auto or "0,1", a validation interval as a duration.
TAKES_TEXT = ("trainer.devices", "trainer.val_check_interval")


def violation(rule: str | tuple, value: Any, takes_text: bool = False) -> str | None:
    """What `value` breaks of `rule` ("must be …"), or None when it fits; a value other than a number
    fits an interval only where the key `takes_text`."""
    if isinstance(rule, tuple):
        return None if value in rule else f"must be one of {', '.join(map(str, rule))}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None if takes_text else f"must be a number in {rule}"
    low, high = (float(bound) for bound in rule[1:-1].split(","))
    inside = (low < value if rule[0] == "(" else low <= value) and (value < high if rule[-1] == ")" else value <= high)
    return None if inside and math.isfinite(value) else f"must be in {rule}"


def check_ranges(values: dict[str, Any]) -> None:
    """ConfigError for the first key of `values` (dotted key → value) outside its rule."""
    for key, value in values.items():
        if key in RULES and value is not None and (problem := violation(RULES[key], value, key in TAKES_TEXT)):
            shown = repr(value) if isinstance(value, str) else value
            raise ConfigError(f"{key}={shown}: {problem}")
