"""transformers' BERT checkpoint format (`model_type: bert`): BertConfig's own config.json and bertlab's
state-dict names, which are transformers' `modeling_bert` names. A 2018 BERT is saved in it; BERT folders
of transformers, of its older versions and converted from TensorFlow load from it."""

from __future__ import annotations

import re
from typing import Any

import torch

from bertlab.config import BertConfig

MODEL_TYPE = "bert"
TOKENIZER_INPUT_NAMES = None  # the tokenizer's own: token_type_ids included
# Tensors older checkpoints carry that are not parameters (buffers).
_IGNORED_KEYS = re.compile(r"(^|\.)(embeddings\.position_ids|embeddings\.token_type_ids)$")
_TF_NAMES = ((".gamma", ".weight"), (".beta", ".bias"))


def detect(values: dict[str, Any]) -> bool:
    """Whether a config.json's values are this format's (transformers' BERT leaves model_type out at times)."""
    return values.get("model_type", MODEL_TYPE) == MODEL_TYPE


def saves(config: BertConfig, model_class: str) -> bool:
    """Whether a `model_class` with `config` is 2018's BERT, which transformers' BertModel classes load."""
    return not config.non_bert_keys()


def config_values(values: dict[str, Any]) -> dict[str, Any]:
    """BertConfig's fields from a config.json of this format: they are its keys."""
    return values


def config_text(config: BertConfig, model_class: str) -> str:
    return config.to_json_string(architecture=model_class)


def to_state(state: dict[str, torch.Tensor], config: BertConfig, model_class: str) -> dict[str, torch.Tensor]:
    return state


def code_files() -> dict[str, str]:
    """No code in the folder: transformers has BERT's classes."""
    return {}


def from_state(state: dict[str, torch.Tensor], expected: set[str]) -> dict[str, torch.Tensor]:
    """Older names as bertlab's: `gamma`/`beta` → `weight`/`bias`, the decoder bias alias, buffers dropped."""
    result = {}
    for key, tensor in state.items():
        for old, new in _TF_NAMES:
            if key.endswith(old) and "LayerNorm" in key:
                key = key[: -len(old)] + new
        if key.endswith("cls.predictions.decoder.bias"):
            key = key.replace("decoder.bias", "bias")
        if not _IGNORED_KEYS.search(key):
            result.setdefault(key, tensor)
    return result
