"""`BertConfig`: Hugging Face's BertConfig fields and defaults, plus bertlab's own switches."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertlab.errors import CheckpointError, ConfigError

ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu", "swish", "tanh")
# sinusoidal: the Transformer's fixed table (bertlab.model.sinusoidal_positions), saved as the absolute table it is
POSITION_EMBEDDING_TYPES = ("absolute", "sinusoidal", "relative_key", "relative_key_query")
RELATIVE_POSITION_TYPES = ("relative_key", "relative_key_query")  # distance embeddings in every layer
POSITION_TABLE_TYPES = ("absolute", "sinusoidal")  # a bert.embeddings.position_embeddings table
EMBEDDING_INITS = ("normal", "orthogonal")
ATTENTION_IMPLEMENTATIONS = ("sdpa", "eager")
PROBLEM_TYPES = ("regression", "single_label_classification", "multi_label_classification")
CONFIG_NAME = "config.json"
RUNTIME_SWITCHES = ("gradient_checkpointing", "attn_implementation", "fused_qkv", "low_precision_residual",
                    "output_attentions", "output_hidden_states")
# Upper limits of the sizes, far above any published BERT: a config.json is untrusted input, and
# must not make bertlab allocate whatever it asks for.
SIZE_LIMITS = {"vocab_size": 1_000_000, "hidden_size": 65_536, "num_hidden_layers": 1_000,
               "num_attention_heads": 1_024, "intermediate_size": 262_144, "max_position_embeddings": 1_048_576,
               "type_vocab_size": 1_024, "num_labels": 100_000}


def _memory_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass
class BertConfig:
    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    position_embedding_type: str = "absolute"
    classifier_dropout: float | None = None
    num_labels: int = 2
    id2label: dict[int, str] | None = None
    label2id: dict[str, int] | None = None
    problem_type: str | None = None
    pruned_heads: dict[int, list[int]] = field(default_factory=dict)  # {layer: heads removed by prune_heads}
    tie_word_embeddings: bool = True  # False: the MLM decoder has its own cls.predictions.decoder.weight
    # What a forward returns when its argument is left at None, as in transformers
    output_attentions: bool = False
    output_hidden_states: bool = False
    # bertlab's own switches
    gradient_checkpointing: bool = False
    attn_implementation: str = "sdpa"
    fused_qkv: bool = True
    low_precision_residual: bool = True  # under autocast: see bertlab.model.BertLayerNorm
    embedding_init: str = "normal"  # or orthogonal tables of the same scale: see BertPreTrainedModel._init_weights
    architectures: list[str] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        try:
            if self.id2label is not None:
                self.id2label = {int(k): str(v) for k, v in self.id2label.items()}
                self.num_labels = len(self.id2label)
            if self.label2id is not None:
                self.label2id = {str(k): int(v) for k, v in self.label2id.items()}
        except (AttributeError, TypeError, ValueError):
            raise ConfigError(f"model config: id2label must map integer ids to names and label2id names "
                              f"to integer ids, got {self.id2label!r} and {self.label2id!r}") from None
        try:  # JSON keys are strings
            self.pruned_heads = {int(layer): sorted({int(head) for head in heads})
                                 for layer, heads in self.pruned_heads.items() if heads}
        except (AttributeError, TypeError, ValueError):
            raise ConfigError(f"model config: pruned_heads must map layer indices to lists of head indices, "
                              f"got {self.pruned_heads!r}") from None
        self.validate()

    def validate(self) -> None:
        for name, limit in SIZE_LIMITS.items():
            value = getattr(self, name)
            if not (_is_integer(value) and value > 0):
                raise ConfigError(f"model config: {name} must be a positive integer, got {value!r}")
            if value > limit:
                raise ConfigError(f"model config: {name} is {value:,}; bertlab accepts at most {limit:,}")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"model config: hidden_size ({self.hidden_size}) must be divisible by "
                f"num_attention_heads ({self.num_attention_heads})")
        if self.hidden_act not in ACTIVATIONS:
            raise ConfigError(f"model config: unknown hidden_act {self.hidden_act!r}; "
                              f"expected one of {', '.join(ACTIVATIONS)}")
        if self.position_embedding_type not in POSITION_EMBEDDING_TYPES:
            raise ConfigError(f"model config: unknown position_embedding_type "
                              f"{self.position_embedding_type!r}; expected one of "
                              f"{', '.join(POSITION_EMBEDDING_TYPES)}")
        if self.embedding_init not in EMBEDDING_INITS:
            raise ConfigError(f"model config: unknown embedding_init {self.embedding_init!r}; "
                              f"expected one of {', '.join(EMBEDDING_INITS)}")
        for name in ("tie_word_embeddings", "output_attentions", "output_hidden_states"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"model config: {name} must be true or false, got {getattr(self, name)!r}")
        if self.attn_implementation not in ATTENTION_IMPLEMENTATIONS:
            raise ConfigError(f"model config: unknown attn_implementation {self.attn_implementation!r}; "
                              f"expected one of {', '.join(ATTENTION_IMPLEMENTATIONS)}")
        if self.problem_type is not None and self.problem_type not in PROBLEM_TYPES:
            raise ConfigError(f"model config: unknown problem_type {self.problem_type!r}; "
                              f"expected one of {', '.join(PROBLEM_TYPES)} (or null to infer it)")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"):
            value = getattr(self, name)
            if value is not None and not (_is_number(value) and 0.0 <= value < 1.0):
                raise ConfigError(f"model config: {name} must be in [0, 1), got {value!r}")
        for name in ("initializer_range", "layer_norm_eps"):
            value = getattr(self, name)
            if not (_is_number(value) and value > 0):
                raise ConfigError(f"model config: {name} must be positive, got {value!r}")
        for layer, heads in self.pruned_heads.items():
            if not (0 <= layer < self.num_hidden_layers and 0 <= heads[0] and heads[-1] < self.num_attention_heads):
                raise ConfigError(f"model config: pruned_heads {{{layer}: {heads}}} names a layer or head the model "
                                  f"does not have (layers 0-{self.num_hidden_layers - 1}, heads "
                                  f"0-{self.num_attention_heads - 1})")
        if not (_is_integer(self.pad_token_id) and 0 <= self.pad_token_id < self.vocab_size):
            raise ConfigError(f"model config: pad_token_id ({self.pad_token_id}) must be in "
                              f"[0, vocab_size={self.vocab_size})")
        needed, available = 4 * self.parameter_count(), _memory_bytes()
        if needed > available:
            raise ConfigError(f"model config: its {self.parameter_count():,} parameters need {needed / 2**30:.1f} GiB "
                              f"in float32, more than this machine's {available / 2**30:.1f} GiB of memory")

    def parameter_count(self) -> int:
        """The parameters of BertForPreTraining with this config (the largest model class), for a
        memory estimate before anything is allocated."""
        h, i = self.hidden_size, self.intermediate_size
        relative = self.position_embedding_type in RELATIVE_POSITION_TYPES
        positions = self.max_position_embeddings if self.position_embedding_type in POSITION_TABLE_TYPES else 0
        embeddings = (self.vocab_size + positions + self.type_vocab_size + 2) * h
        layer = 4 * h * h + 4 * h + 2 * h * i + i + h + 4 * h
        distances = (2 * self.max_position_embeddings - 1) * self.head_size if relative else 0
        # A pruned head takes its query, key and value rows (weights and biases) and its output.dense columns.
        pruned = sum(map(len, self.pruned_heads.values())) * (4 * h + 3) * self.head_size
        decoder = 0 if self.tie_word_embeddings else self.vocab_size * h
        heads = h * h + h + (h * h + 3 * h + self.vocab_size) + decoder + 2 * h + 2
        return embeddings + self.num_hidden_layers * (layer + distances) - pruned + heads

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> BertConfig:
        """Builds a config from a Hugging Face or bertlab dict; keys this model has no use for are
        ignored (transformers writes many generation and export keys into config.json)."""
        known = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in values.items() if k in known}
        if values.get("position_embedding_type") is None:
            kwargs.pop("position_embedding_type", None)
        try:
            return cls(**kwargs)
        except TypeError as error:
            raise ConfigError(f"model config: {error}") from None

    def to_dict(self) -> dict[str, Any]:
        values = dataclasses.asdict(self)
        values["model_type"] = "bert"
        if values["id2label"] is None:
            values["id2label"] = {i: f"LABEL_{i}" for i in range(self.num_labels)}
            values["label2id"] = {f"LABEL_{i}": i for i in range(self.num_labels)}
        values["id2label"] = {str(k): v for k, v in values["id2label"].items()}
        values["pruned_heads"] = {str(k): v for k, v in values["pruned_heads"].items()}
        return values

    @classmethod
    def from_json_file(cls, path: str | os.PathLike) -> BertConfig:
        path = Path(path)
        if path.is_dir():
            path = path / CONFIG_NAME
        if not path.is_file():
            raise CheckpointError(f"{path}: no such file; a checkpoint directory needs a {CONFIG_NAME}")
        try:
            values = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise CheckpointError(f"{path}: malformed JSON ({error})") from None
        if not isinstance(values, dict):
            raise CheckpointError(f"{path}: expected a JSON object, got {type(values).__name__}")
        if values.get("model_type", "bert") != "bert":
            raise CheckpointError(f"{path}: model_type is {values['model_type']!r}; bertlab reads 'bert'")
        try:
            return cls.from_dict(values)
        except ConfigError as error:
            raise CheckpointError(f"{path}: {error}") from None

    def to_json_string(self, architecture: str | None = None) -> str:
        """config.json text. Runtime switches are choices of a run, not properties of the weights. A
        sinusoidal table is written as the absolute table it is, which transformers then reads."""
        values = {k: v for k, v in self.to_dict().items() if k not in RUNTIME_SWITCHES}
        if values["position_embedding_type"] == "sinusoidal":
            values["position_embedding_type"] = "absolute"
        if architecture is not None:
            values["architectures"] = [architecture]
        return json.dumps(values, indent=2, sort_keys=True) + "\n"
