"""`BertConfig`: Hugging Face's BertConfig fields and defaults, plus bertlab's own switches."""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain
from typing import Annotated, Any

from bertlab.errors import ConfigError
from bertlab.value_rules import Dropout, Interval, Maps, OneOf, Size, base_types, field_annotations, field_problems

ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu", "swish", "tanh")
# sinusoidal: the Transformer's fixed table (bertlab.model.sinusoidal_positions), saved as the absolute table it is
POSITION_EMBEDDING_TYPES = ("absolute", "sinusoidal", "relative_key", "relative_key_query", "rotary", "none")
RELATIVE_POSITION_TYPES = ("relative_key", "relative_key_query")  # Shaw et al.'s distance tables in every layer
POSITION_TABLE_TYPES = ("absolute", "sinusoidal")  # a bert.embeddings.position_embeddings table
# The fields after 2018's BERT (besides the position types rotary and none, and type_vocab_size 0).
VARIANT_KEYS = ("rope_theta", "local_rope_theta", "norm_position", "first_attention_norm", "norm_type",
                "embedding_norm", "gated_ffn", "attention_bias", "ffn_bias", "norm_bias", "head_bias",
                "decoder_bias", "head_act", "local_attention_window", "global_attention_every_n_layers",
                "classifier_pooling")
PROBLEM_TYPES = ("regression", "single_label_classification", "multi_label_classification")
RUNTIME_SWITCHES = ("gradient_checkpointing", "attn_implementation", "fused_qkv", "low_precision_residual",
                    "output_attentions", "output_hidden_states")
# The sizes' limits (Size) are far above any published BERT: a config.json must not make bertlab allocate blindly.
VOCAB_SIZE_LIMIT, NUM_LABELS_LIMIT = 1_000_000, 100_000  # also the most a run's tokenizer and data take
PositiveNumber = Annotated[float, Interval("(0, inf)", says="positive")]
# The mapping fields, as a config.json's text keys (and a config's lists of heads) convert to their types.
ID2LABEL = Maps("integer ids to names", lambda pairs: {int(k): str(v) for k, v in pairs})
LABEL2ID = Maps("names to integer ids", lambda pairs: {str(k): int(v) for k, v in pairs})
PRUNED_HEADS = Maps("layer indices to lists of head indices",
                    lambda pairs: {int(layer): sorted({int(head) for head in heads})
                                   for layer, heads in pairs if heads})
MAPPINGS = {"id2label": ID2LABEL, "label2id": LABEL2ID, "pruned_heads": PRUNED_HEADS}


def _memory_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


@dataclass
class BertConfig:
    vocab_size: Annotated[int, Size(VOCAB_SIZE_LIMIT)] = 30522
    hidden_size: Annotated[int, Size(65_536)] = 768
    num_hidden_layers: Annotated[int, Size(1_000)] = 12
    num_attention_heads: Annotated[int, Size(1_024)] = 12
    intermediate_size: Annotated[int, Size(262_144)] = 3072
    hidden_act: Annotated[str, OneOf(*ACTIVATIONS)] = "gelu"
    hidden_dropout_prob: Dropout = 0.1
    attention_probs_dropout_prob: Dropout = 0.1
    max_position_embeddings: Annotated[int, Size(1_048_576)] = 512
    type_vocab_size: Annotated[int, Size(1_024, zero=True)] = 2  # 0: no token-type embeddings
    initializer_range: PositiveNumber = 0.02
    layer_norm_eps: PositiveNumber = 1e-12
    pad_token_id: int = 0
    position_embedding_type: Annotated[str, OneOf(*POSITION_EMBEDDING_TYPES)] = "absolute"
    classifier_dropout: Dropout | None = None
    num_labels: Annotated[int, Size(NUM_LABELS_LIMIT)] = 2
    id2label: Annotated[dict[int, str], ID2LABEL] | None = None
    label2id: Annotated[dict[str, int], LABEL2ID] | None = None
    problem_type: Annotated[str, OneOf(*PROBLEM_TYPES)] | None = None  # null: inferred from the labels
    pruned_heads: Annotated[dict[int, list[int]], PRUNED_HEADS] = field(default_factory=dict)  # {layer: pruned heads}
    tie_word_embeddings: bool = True  # False: the MLM decoder has its own cls.predictions.decoder.weight
    # What a forward returns when its argument is left at None, as in transformers
    output_attentions: bool = False
    output_hidden_states: bool = False
    # bertlab's own switches
    gradient_checkpointing: bool = False
    attn_implementation: Annotated[str, OneOf("sdpa", "eager")] = "sdpa"
    fused_qkv: bool = True
    low_precision_residual: bool = True  # under autocast: see bertlab.model.BertLayerNorm
    embedding_init: Annotated[str, OneOf("normal", "orthogonal")] = "normal"  # orthogonal: at normal's scale
    # bert: normal(0, initializer_range) | modernbert: truncated, depth-scaled (docs/variants.md)
    weight_init: Annotated[str, OneOf("bert", "modernbert")] = "bert"
    # Designs after 2018's BERT (docs/variants.md); each default is BERT's.
    rope_theta: PositiveNumber = 10000.0  # rotary positions: the base frequency (of the global layers)
    local_rope_theta: PositiveNumber | None = None  # rotary positions of the local layers; null: rope_theta
    norm_position: Annotated[str, OneOf("post", "pre")] = "post"  # pre: a norm before each block and after the last
    first_attention_norm: bool = True  # pre-norm: false drops layer 0's norm before attention (ModernBERT)
    norm_type: Annotated[str, OneOf("layer_norm", "rms_norm")] = "layer_norm"
    embedding_norm: bool = True  # a norm after the embeddings
    gated_ffn: bool = False  # the feed-forward's first matmul gives input and gate: act(x) * gate (GeGLU, SwiGLU)
    attention_bias: bool = True  # biases of query, key, value and the attention's output projection
    ffn_bias: bool = True  # biases of the feed-forward's two matmuls
    norm_bias: bool = True  # the norms' additive bias
    head_bias: bool = True  # the dense layer of the MLM head (and of a cls/mean classifier head)
    decoder_bias: bool = True  # the MLM decoder's per-token bias
    head_act: Annotated[str, OneOf(*ACTIVATIONS)] | None = None  # the MLM and cls/mean heads'; null: hidden_act
    # tokens a local layer attends (window // 2 each side); 0: every layer global
    local_attention_window: Annotated[int, Interval("[0, inf)", whole=True, says="an integer >= 0")] = 0
    # with a window: layer i is global when i % N == 0
    global_attention_every_n_layers: Annotated[int, Interval("[1, inf)", whole=True, says="an integer >= 1")] = 1
    # pooler (BERT's dense + tanh on [CLS]) | cls | mean (dense, act, norm)
    classifier_pooling: Annotated[str, OneOf("pooler", "cls", "mean")] = "pooler"
    architectures: list[str] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        # The mapping fields converted (JSON keys are strings) where they convert; `validate` refuses the others.
        converted = {name: rule.converted(value) for name, rule in MAPPINGS.items()
                     if (value := getattr(self, name)) is not None and rule.violation(value) is None}
        for name, value in converted.items():
            setattr(self, name, value)
        if "id2label" in converted:
            self.num_labels = len(self.id2label)
        self.validate()

    def validate(self) -> None:
        """The rule of each field's annotation (bertlab.value_rules), then the rules between fields."""
        problem = next(chain((field_message(*found) for found in field_problems(self)), self.combination_problems()),
                       None)
        if problem is not None:
            raise ConfigError(f"model config: {problem}")

    def combination_problems(self) -> Iterator[str]:
        """What cannot work of values each fine on its own, the memory the model needs last."""
        if self.hidden_size % self.num_attention_heads:
            yield (f"hidden_size ({self.hidden_size}) must be divisible by num_attention_heads "
                   f"({self.num_attention_heads})")
        for layer, heads in self.pruned_heads.items():
            if not (0 <= layer < self.num_hidden_layers and 0 <= heads[0] and heads[-1] < self.num_attention_heads):
                yield (f"pruned_heads {{{layer}: {heads}}} names a layer or head the model does not have (layers "
                       f"0-{self.num_hidden_layers - 1}, heads 0-{self.num_attention_heads - 1})")
        if not (isinstance(self.pad_token_id, int) and not isinstance(self.pad_token_id, bool)
                and 0 <= self.pad_token_id < self.vocab_size):
            yield f"pad_token_id ({self.pad_token_id}) must be in [0, vocab_size={self.vocab_size})"
        rotary = self.position_embedding_type == "rotary"
        if rotary and self.head_size % 2:
            yield (f"position_embedding_type 'rotary' needs an even head size, got hidden_size / "
                   f"num_attention_heads = {self.head_size}")
        if self.local_rope_theta is not None and not (rotary and self.has_local_layers):
            yield ("local_rope_theta applies to rotary local layers; it needs position_embedding_type 'rotary', "
                   "local_attention_window > 0 and global_attention_every_n_layers > 1")
        if (self.local_attention_window > 0) != (self.global_attention_every_n_layers > 1):
            yield (f"local_attention_window ({self.local_attention_window}) and global_attention_every_n_layers "
                   f"({self.global_attention_every_n_layers}) go together: a window > 0 with N > 1 makes local "
                   f"layers, 0 with 1 none")
        if not self.first_attention_norm and self.norm_position != "pre":
            yield "first_attention_norm: false needs norm_position 'pre' (post-norm has no norm before attention)"
        if self.norm_type == "rms_norm" and self.norm_bias:
            yield "norm_type 'rms_norm' has no bias; set norm_bias: false"
        needed, available = 4 * self.parameter_count(), _memory_bytes()
        if needed > available:
            yield (f"its {self.parameter_count():,} parameters need {needed / 2**30:.1f} GiB in float32, more than "
                   f"this machine's {available / 2**30:.1f} GiB of memory")

    def non_bert_keys(self) -> list[str]:
        """The keys that make this config other than 2018's BERT (whose checkpoints transformers'
        BertModel classes load): the post-2018 knobs away from their defaults."""
        defaults = BertConfig()
        changed = [f.name for f in dataclasses.fields(self)
                   if f.name in VARIANT_KEYS and getattr(self, f.name) != getattr(defaults, f.name)]
        if self.position_embedding_type in ("rotary", "none"):
            changed.insert(0, "position_embedding_type")
        return changed + (["type_vocab_size"] if self.type_vocab_size == 0 else [])

    @property
    def has_local_layers(self) -> bool:
        return self.local_attention_window > 0 and self.global_attention_every_n_layers > 1

    def is_local_layer(self, index: int) -> bool:
        """ModernBERT's pattern: layer 0 and every N-th after it are global, the others local."""
        return self.has_local_layers and index % self.global_attention_every_n_layers != 0

    @property
    def relative_positions(self) -> bool:
        return self.position_embedding_type in RELATIVE_POSITION_TYPES

    def parameter_count(self) -> int:
        """The parameters of BertForPreTraining with this config (the largest model class), for a
        memory estimate before anything is allocated."""
        h, i = self.hidden_size, self.intermediate_size
        norm = h * (1 + self.norm_bias)
        # A sinusoidal table is fixed, but a parameter (and a state-dict tensor) all the same.
        positions = self.max_position_embeddings if self.position_embedding_type in POSITION_TABLE_TYPES else 0
        embeddings = (self.vocab_size + positions + self.type_vocab_size) * h + norm * self.embedding_norm
        attention = 4 * h * h + 4 * h * self.attention_bias
        ffn = (1 + self.gated_ffn) * i * h + h * i + ((1 + self.gated_ffn) * i + h) * self.ffn_bias
        layer = attention + ffn + 2 * norm
        distances = (2 * self.max_position_embeddings - 1) * self.head_size if self.relative_positions else 0
        unnormed = 0 if self.first_attention_norm else norm  # layer 0 without its attention norm
        final = norm if self.norm_position == "pre" else 0
        # A pruned head takes its query, key and value rows (weights and biases) and its output.dense columns.
        pruned = sum(map(len, self.pruned_heads.values())) * (4 * h + 3 * self.attention_bias) * self.head_size
        decoder = 0 if self.tie_word_embeddings else self.vocab_size * h
        head = h * h + h * self.head_bias + norm + self.vocab_size * self.decoder_bias + decoder
        pooler = h * h + h if self.classifier_pooling == "pooler" else h * h + h * self.head_bias + norm
        nsp = 2 * h + 2
        return embeddings + self.num_hidden_layers * (layer + distances) - unnormed + final - pruned + head \
            + pooler + nsp

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
        """BertConfig's own config.json (`model_type: bert`) or a folder's; another format is refused. Reading files is
        bertlab.checkpoint.dispatch's (`read_config` reads any format), imported by name as bertlab.model imports it."""
        return importlib.import_module("bertlab.checkpoint.dispatch").read_bert_config(path)

    def to_json_string(self, architecture: str | None = None) -> str:
        """config.json text. Runtime switches are choices of a run, not properties of the weights. A
        sinusoidal table is written as the absolute table it is, which transformers then reads."""
        values = {k: v for k, v in self.to_dict().items() if k not in RUNTIME_SWITCHES}
        if values["position_embedding_type"] == "sinusoidal":
            values["position_embedding_type"] = "absolute"
        if architecture is not None:
            values["architectures"] = [architecture]
        return json.dumps(values, indent=2, sort_keys=True) + "\n"


def field_message(name: str, value: Any, rule: Any, problem: str) -> str:
    """A field's problem as a model config words it: `unknown hidden_act 'mish'; expected one of …`,
    `hidden_size must be a positive integer, got 0`."""
    if isinstance(rule, OneOf):
        null = " (or null)" if type(None) in base_types(field_annotations(BertConfig)[name]) else ""
        return f"unknown {name} {value!r}; expected one of {', '.join(map(str, rule))}{null}"
    return f"{name} {problem}" + (f", got {value!r}" if problem.startswith("must") else "")
