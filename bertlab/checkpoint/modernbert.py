"""transformers' ModernBERT checkpoint format (`model_type: modernbert`), translated to and from
bertlab's BERT names.

A bertlab model whose knobs are ModernBERT's (Warner et al., 2024: rotary positions, no token types,
pre-norm without layer 0's attention norm, LayerNorm, a gated feed-forward, [CLS] or mean pooling into
a dense → act → norm head) is saved in this format, so that `ModernBertForMaskedLM` and
`ModernBertForSequenceClassification` (and `…ForTokenClassification`) load it natively; ModernBERT folders load into bertlab through the
same tables. Only names, config fields and the fused `Wqkv` change: the tensors are the same.
"""

from __future__ import annotations

import json
import re
from typing import Any

import torch

from bertlab.config import BertConfig

MODEL_TYPE = "modernbert"
# bertlab class → transformers class; BertForPreTraining's NSP head has no ModernBERT counterpart.
ARCHITECTURES = {"BertModel": "ModernBertModel", "BertForMaskedLM": "ModernBertForMaskedLM",
                 "BertForSequenceClassification": "ModernBertForSequenceClassification",
                 "BertForTokenClassification": "ModernBertForTokenClassification",
                 "BertForQuestionAnswering": "ModernBertForQuestionAnswering"}
# The knobs that make a bertlab config ModernBERT's; the others (sizes, biases, thetas, window) are free.
SHAPE = {"position_embedding_type": "rotary", "type_vocab_size": 0, "norm_position": "pre",
         "first_attention_norm": False, "norm_type": "layer_norm", "embedding_norm": True, "gated_ffn": True,
         "pruned_heads": {}}
POOLINGS = ("cls", "mean")
# What the exported tokenizer hands the model: ModernBertModel.forward refuses token_type_ids, which
# sentence-transformers and transformers' pipelines pass on whenever a tokenizer makes them.
TOKENIZER_INPUT_NAMES = ["input_ids", "attention_mask"]

# (bertlab name without `bert.`, ModernBERT name without `model.`), per layer where `{}` is the index.
_BODY = (
    ("embeddings.word_embeddings.", "embeddings.tok_embeddings."),
    ("embeddings.LayerNorm.", "embeddings.norm."),
    ("encoder.layer.{}.attention.input_norm.", "layers.{}.attn_norm."),
    ("encoder.layer.{}.attention.output.dense.", "layers.{}.attn.Wo."),
    ("encoder.layer.{}.intermediate.input_norm.", "layers.{}.mlp_norm."),
    ("encoder.layer.{}.intermediate.dense.", "layers.{}.mlp.Wi."),
    ("encoder.layer.{}.output.dense.", "layers.{}.mlp.Wo."),
    ("encoder.final_norm.", "final_norm."),
)
_HEAD = (("dense.", "dense."), ("LayerNorm.", "norm."))
# Where bertlab keeps ModernBERT's `head` (dense → act → norm); a sequence classifier's is its `bert.pooler.`.
HEADS = {"BertForMaskedLM": "cls.predictions.transform.", "BertForTokenClassification": "head.",
         "BertForQuestionAnswering": "head."}
SPAN_OUTPUTS = ("qa_outputs.", "classifier.")  # a span head's linear layer: bertlab's (BERT's) name, ModernBERT's
_QKV = ("query", "key", "value")


def detect(values: dict[str, Any]) -> bool:
    return values.get("model_type") == MODEL_TYPE


def saves(config: BertConfig, model_class: str) -> bool:
    """Whether `config` (for `model_class`) is ModernBERT-shaped, and so saved as a ModernBERT checkpoint."""
    return (model_class in ARCHITECTURES and all(getattr(config, key) == value for key, value in SHAPE.items())
            and config.classifier_pooling in POOLINGS)


def config_text(config: BertConfig, model_class: str) -> str:
    return json.dumps(modernbert_config_values(config, model_class), indent=2, sort_keys=True) + "\n"


def code_files() -> dict[str, str]:
    """No code in the folder: transformers has ModernBERT's classes."""
    return {}


def modernbert_config_values(config: BertConfig, architecture: str) -> dict[str, Any]:
    """ModernBertConfig's fields for `config` (a ModernBERT-shaped one), as config.json holds them."""
    values = config.to_dict()
    local = config.has_local_layers
    return {
        "architectures": [ARCHITECTURES[architecture]], "model_type": MODEL_TYPE,
        **{key: values[key] for key in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                                        "num_attention_heads", "max_position_embeddings", "initializer_range",
                                        "pad_token_id", "id2label", "label2id", "problem_type", "attention_bias",
                                        "norm_bias", "decoder_bias", "classifier_pooling")},
        "hidden_activation": config.hidden_act, "norm_eps": config.layer_norm_eps, "mlp_bias": config.ffn_bias,
        "global_rope_theta": config.rope_theta,
        "local_rope_theta": config.local_rope_theta if config.local_rope_theta is not None else config.rope_theta,
        "local_attention": config.local_attention_window if local else config.max_position_embeddings,
        "global_attn_every_n_layers": config.global_attention_every_n_layers,
        "attention_dropout": config.attention_probs_dropout_prob,
        "embedding_dropout": config.hidden_dropout_prob, "mlp_dropout": config.hidden_dropout_prob,
        "classifier_dropout": config.hidden_dropout_prob if config.classifier_dropout is None
        else config.classifier_dropout,
        "classifier_bias": config.head_bias, "classifier_activation": config.head_act or config.hidden_act,
        "tie_word_embeddings": config.tie_word_embeddings, "bos_token_id": None, "eos_token_id": None,
        "cls_token_id": None, "sep_token_id": None,
    }


def config_values(values: dict[str, Any]) -> dict[str, Any]:
    """BertConfig's fields from a ModernBERT config.json (the inverse of `modernbert_config_values`)."""
    every = values.get("global_attn_every_n_layers", 3)
    local = every > 1 and values.get("num_hidden_layers", 22) > 1
    hidden_act = values.get("hidden_activation", "gelu")
    kept = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "max_position_embeddings", "initializer_range", "pad_token_id", "id2label", "label2id", "problem_type",
            "attention_bias", "norm_bias", "decoder_bias", "classifier_pooling", "num_labels")
    defaults = dict(vocab_size=50368, hidden_size=768, intermediate_size=1152, num_hidden_layers=22,
                    num_attention_heads=12, max_position_embeddings=8192, pad_token_id=50283, attention_bias=False,
                    norm_bias=False, decoder_bias=True, classifier_pooling="cls")
    dropout = values.get("mlp_dropout", 0.0)
    ours = {theirs: bertlab for bertlab, theirs in ARCHITECTURES.items()}
    return {
        "architectures": [ours[name] for name in values.get("architectures") or () if name in ours] or None,
        **{key: value for key, value in SHAPE.items() if key != "pruned_heads"},
        **{key: values.get(key, defaults.get(key)) for key in kept if key in values or key in defaults},
        "hidden_act": hidden_act, "layer_norm_eps": values.get("norm_eps", 1e-5),
        "ffn_bias": values.get("mlp_bias", False), "rope_theta": values.get("global_rope_theta", 160000.0),
        "local_rope_theta": values.get("local_rope_theta", 10000.0) if local else None,
        "local_attention_window": values.get("local_attention", 128) if local else 0,
        "global_attention_every_n_layers": every if local else 1,
        "attention_probs_dropout_prob": values.get("attention_dropout", 0.0), "hidden_dropout_prob": dropout,
        "classifier_dropout": values.get("classifier_dropout", 0.0),
        "head_bias": values.get("classifier_bias", False),
        "head_act": None if values.get("classifier_activation", "gelu") == hidden_act
        else values.get("classifier_activation", "gelu"),
        "tie_word_embeddings": values.get("tie_word_embeddings", True),
    }


def _renamings(num_layers: int, head: str) -> list[tuple[str, str]]:
    """(bertlab prefix, ModernBERT prefix) pairs; `head` is where bertlab keeps ModernBERT's `head`."""
    pairs = [(f"bert.{ours.format(i)}", f"model.{theirs.format(i)}") for ours, theirs in _BODY
             for i in (range(num_layers) if "{}" in ours else (None,))]
    decoder = [("cls.predictions.bias", "decoder.bias"), ("cls.predictions.decoder.weight", "decoder.weight")]
    return pairs + [(head + ours, "head." + theirs) for ours, theirs in _HEAD] + decoder


def to_state(state: dict[str, torch.Tensor], config: BertConfig, architecture: str) -> dict[str, torch.Tensor]:
    """bertlab's state dict (of `architecture`) under ModernBERT's names."""
    num_layers = config.num_hidden_layers
    base = architecture == "BertModel"
    state = {("bert." + key if base else key): tensor for key, tensor in state.items()}
    if base:  # ModernBertModel has no pooler
        state = {key: tensor for key, tensor in state.items() if not key.startswith("bert.pooler.")}
    renamings = _renamings(num_layers, HEADS.get(architecture, "bert.pooler.")) + [SPAN_OUTPUTS]
    renamed = {}
    for key, tensor in state.items():
        match = re.match(r"bert\.encoder\.layer\.(\d+)\.attention\.self\.query\.(weight|bias)$", key)
        if match:
            layer, kind = match.groups()
            parts = [state[f"bert.encoder.layer.{layer}.attention.self.{name}.{kind}"] for name in _QKV]
            renamed[f"model.layers.{layer}.attn.Wqkv.{kind}"] = torch.cat(parts)
            continue
        if re.match(r"bert\.encoder\.layer\.\d+\.attention\.self\.(key|value)\.", key):
            continue
        renamed[_rename(key, renamings)] = tensor
    if base:
        renamed = {key.removeprefix("model."): tensor for key, tensor in renamed.items()}
    return renamed


def from_state(state: dict[str, torch.Tensor], expected: set[str]) -> dict[str, torch.Tensor]:
    """A ModernBERT state dict under bertlab's names (with `bert.` where bertlab's heads put it; the
    caller's key normalisation adds or removes it for the class it loads into). ModernBERT's `head`
    becomes the MLM transform, the token classifier's head or the classifier's pooler, whichever the loading
    model has."""
    state = {key if key.startswith(("model.", "head.", "decoder.", "classifier.")) else f"model.{key}": tensor
             for key, tensor in state.items()}
    num_layers = 1 + max((int(m.group(1)) for key in state if (m := re.match(r"model\.layers\.(\d+)\.", key))),
                         default=-1)
    head = next((head for head in HEADS.values() if any(key.startswith(head) for key in expected)), "bert.pooler.")
    renamings = [(theirs, ours) for ours, theirs in _renamings(num_layers, head)]
    if any(key.startswith(SPAN_OUTPUTS[0]) for key in expected):
        renamings.append(SPAN_OUTPUTS[::-1])
    renamed = {}
    for key, tensor in state.items():
        match = re.match(r"model\.layers\.(\d+)\.attn\.Wqkv\.(weight|bias)$", key)
        if match:
            layer, kind = match.groups()
            for name, part in zip(_QKV, tensor.chunk(3)):
                renamed[f"bert.encoder.layer.{layer}.attention.self.{name}.{kind}"] = part
        elif key == "decoder.weight" and torch.equal(tensor, state.get("model.embeddings.tok_embeddings.weight")):
            continue  # tied to the word embeddings; an untied one is bertlab's cls.predictions.decoder.weight
        else:
            renamed[_rename(key, renamings)] = tensor
    return renamed


def _rename(key: str, renamings: list[tuple[str, str]]) -> str:
    for old, new in renamings:
        if key.startswith(old):
            return new + key[len(old):]
    return key
