"""The BERT encoder and its heads, in data-flow order.

Module and parameter names follow Hugging Face's `modeling_bert` (`bert.embeddings.word_embeddings`,
`bert.encoder.layer.N.attention.self.query`, `cls.predictions.transform`, …) so that state dicts travel between the
two without renaming. Inside, the code is organised for reading and speed: one attention module,
scaled_dot_product_attention on the common path, sparse MLM prediction: the head, and the last layer's queries and
everything after them, run only at the positions the loss reads (the masked ones; [CLS] for classification). The
Python API (inputs, masks, outputs, the loss and its logits) is described in docs/model_api.md.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import os
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from bertlab.config import POSITION_TABLE_TYPES, BertConfig
from bertlab.errors import ConfigError

MODERNBERT_CUTOFF = 2.0  # ModernBertConfig.initializer_cutoff_factor: its normals are cut at ±2 std
DROPOUT_LEVELS = 1 << 16  # the CPU dropout mask's resolution: its drop probability is a multiple of 2⁻¹⁶

# Factories, not instances: a module instance shared by every layer would share its hooks too.
ACTIVATIONS = {"gelu": nn.GELU, "gelu_new": partial(nn.GELU, approximate="tanh"),
               "gelu_pytorch_tanh": partial(nn.GELU, approximate="tanh"), "relu": nn.ReLU, "silu": nn.SiLU,
               "swish": nn.SiLU, "tanh": nn.Tanh}


class ModelOutput:
    """Attribute access, and indexing as transformers' ModelOutput: `out["logits"]`, `out[0]`, `out.to_tuple()`
    and iteration over the keys, all over the fields that are not None, in their order."""

    def keys(self) -> list[str]:
        return [f.name for f in dataclasses.fields(self) if getattr(self, f.name) is not None]

    def values(self) -> list:
        return [getattr(self, key) for key in self.keys()]

    def items(self) -> list[tuple[str, object]]:
        return [(key, getattr(self, key)) for key in self.keys()]

    def to_tuple(self) -> tuple:
        return tuple(self.values())

    def __getitem__(self, key: str | int | slice):
        return dict(self.items())[key] if isinstance(key, str) else self.to_tuple()[key]

    def __iter__(self):
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())


def exportable(output_class: type) -> type:
    """A pytree node, as transformers registers its ModelOutput: torch.export and the ONNX exporter can then
    return it (its fields that are not None, in order), and torch.export.save can name it."""
    torch.export.register_dataclass(output_class,
                                    serialized_type_name=f"{output_class.__module__}.{output_class.__qualname__}")
    return output_class


@exportable
@dataclass
class BertModelOutput(ModelOutput):
    last_hidden_state: torch.Tensor
    pooler_output: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


@exportable
@dataclass
class PreTrainingOutput(ModelOutput):
    loss: torch.Tensor | None
    prediction_logits: torch.Tensor | None  # None when asked for the loss only (return_logits=False)
    seq_relationship_logits: torch.Tensor
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None
    # bertlab's, after transformers' fields so that positions index alike
    mlm_loss: torch.Tensor | None = None
    nsp_loss: torch.Tensor | None = None


@exportable
@dataclass
class LogitsOutput(ModelOutput):
    loss: torch.Tensor | None
    logits: torch.Tensor | None  # None when asked for the loss only (return_logits=False)
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


@dataclass
class QuestionAnsweringOutput(ModelOutput):
    loss: torch.Tensor | None
    start_logits: torch.Tensor
    end_logits: torch.Tensor
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


def _in_autocast_dtype(normalised: torch.Tensor, hidden_states: torch.Tensor, low_precision: bool) -> torch.Tensor:
    device = hidden_states.device.type
    if low_precision and torch.is_autocast_enabled(device):
        return normalised.to(torch.get_autocast_dtype(device))
    return normalised


class BertLayerNorm(nn.LayerNorm):
    """LayerNorm that, with `config.low_precision_residual` and under autocast, returns autocast's dtype.

    Autocast normalises in fp32 and returns fp32, so the residual stream between layers and the activations saved for
    the backward pass travel in fp32 while every matmul reads them in bf16. Normalising in fp32 and returning bf16
    halves that memory traffic: 3.7% off a compiled bert_base step on an H200. Outside autocast the output keeps the
    input's dtype, so fp32 models are unchanged."""

    def __init__(self, config: BertConfig):
        super().__init__(config.hidden_size, eps=config.layer_norm_eps, bias=config.norm_bias)
        self.low_precision_output = config.low_precision_residual

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return _in_autocast_dtype(super().forward(hidden_states), hidden_states, self.low_precision_output)


class BertRMSNorm(nn.RMSNorm):
    """RMSNorm (Zhang & Sennrich, 2019), without centring or a bias; the autocast dtype as BertLayerNorm."""

    def __init__(self, config: BertConfig):
        super().__init__(config.hidden_size, eps=config.layer_norm_eps)
        self.low_precision_output = config.low_precision_residual

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return _in_autocast_dtype(super().forward(hidden_states), hidden_states, self.low_precision_output)


def norm_layer(config: BertConfig) -> nn.Module:
    return BertRMSNorm(config) if config.norm_type == "rms_norm" else BertLayerNorm(config)


def _pre_norm(config: BertConfig, present: bool = True) -> nn.Module | None:
    """The norm before a pre-norm block; None in post-norm models (and where `present` is false)."""
    return norm_layer(config) if config.norm_position == "pre" and present else None


def random_keep_mask(shape: torch.Size, p: float, device: torch.device) -> torch.Tensor:
    """An fp32 tensor of `shape`, each element 0 with probability round(p·2¹⁶)/2¹⁶, else 1.

    torch's CPU dropout draws its mask with `bernoulli_`, about 5 ns per element: 13–16% of a BERT-Tiny training step.
    Drawing 64-bit integers (`random_`, over ten times faster per bit) and reading each as four 16-bit uniforms gives
    the mask for a fraction of that. The draws come from torch's default generator, so seeding and gradient
    checkpointing's RNG replay work as for `F.dropout`. The mask is kept as fp32 zeros and ones, not as booleans:
    torch's CPU kernels that read a bool tensor (comparing into one, multiplying by one) are not vectorised and took
    3–6× the time of a float multiply."""
    count = shape.numel()
    bits = torch.empty((count + 3) // 4, dtype=torch.int64, device=device).random_(-(1 << 63), None)
    uniform16 = bits.view(torch.int16)[:count].view(shape)  # uniform over [-2¹⁵, 2¹⁵)
    return uniform16.float().ge_(round(p * DROPOUT_LEVELS) - DROPOUT_LEVELS // 2)


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """`F.dropout`, with the cheaper mask of `random_keep_mask` on CPU; the only difference is the drop
    probability rounded to a multiple of 2⁻¹⁶ (0.1 → 0.100006). Other devices keep `F.dropout` (fused
    into their kernels there). The product is the one `F.dropout`'s own backward computes."""
    if not training or p == 0 or p == 1 or x.device.type != "cpu":
        return F.dropout(x, p, training)
    # The product in fp32 and rounded once, as F.dropout computes it for bf16 (a bf16 1/(1 − p) would be 0.15% off).
    return (x * random_keep_mask(x.shape, p, x.device).mul_(1 / (1 - p))).to(x.dtype)


class Dropout(nn.Dropout):
    """nn.Dropout through `dropout` above."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)


def sinusoidal_positions(length: int, width: int) -> torch.Tensor:
    """The Transformer's fixed position encoding (Vaswani et al., 2017), [length, width]:
    PE(pos, 2i) = sin(pos / 10000^(2i/width)), PE(pos, 2i + 1) = cos(pos / 10000^(2i/width))."""
    angles = torch.arange(length, dtype=torch.float64)[:, None] \
        * 10000.0 ** (-torch.arange(0, width, 2, dtype=torch.float64) / width)
    table = torch.empty(length, width, dtype=torch.float64)
    table[:, 0::2] = angles.sin()
    table[:, 1::2] = angles.cos()[:, :width // 2]
    return table.float()


class BertEmbeddings(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        # Relative position types encode order inside attention; an unused absolute table would
        # only hold dead parameters (and break DDP's unused-parameter check).
        if config.position_embedding_type in POSITION_TABLE_TYPES:
            self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        if config.position_embedding_type == "sinusoidal":  # filled by _init_weights, and never trained
            self.position_embeddings.weight.requires_grad_(False)
        if config.type_vocab_size:  # 0: token types are not embedded (and ignored when given)
            self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = norm_layer(config) if config.embedding_norm else nn.Identity()
        self.dropout = Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids, token_type_ids, position_ids, inputs_embeds=None):
        embeddings = self.word_embeddings(input_ids) if inputs_embeds is None else inputs_embeds
        if hasattr(self, "token_type_embeddings"):
            embeddings = embeddings + self.token_type_embeddings(token_type_ids)
        if hasattr(self, "position_embeddings"):
            embeddings = embeddings + self.position_embeddings(position_ids)
        return self.dropout(self.LayerNorm(embeddings))


def gather_positions(hidden_states: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """[B, L, H] states at [B, P] positions → [B, P, H]."""
    return hidden_states.gather(1, positions[..., None].expand(-1, -1, hidden_states.shape[-1]))


def fused_linear(hidden_states: torch.Tensor, *linears: nn.Linear) -> tuple[torch.Tensor, ...]:
    """The linears' outputs from one matmul; the parameters stay separate so checkpoints keep HF's names."""
    weight = torch.cat([linear.weight for linear in linears])
    bias = None if linears[0].bias is None else torch.cat([linear.bias for linear in linears])
    return F.linear(hidden_states, weight, bias).chunk(len(linears), dim=-1)


class RotaryEmbedding(nn.Module):
    """RoFormer's rotary positions (Su et al., 2021) in the rotate-half layout of GPT-NeoX and ModernBERT: each pair
    (x_i, x_{i+d/2}) of a query or key turns by the angle position · theta^(-2i/d). The frequencies are computed in
    fp32 at every call (d/2 numbers), never kept in a buffer that a `model.to(bfloat16)` would round."""

    def __init__(self, head_size: int, theta: float):
        super().__init__()
        self.head_size, self.theta = head_size, theta

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """[B or 1, L] positions → cos and sin, [B or 1, 1, L, head_size] in `dtype`."""
        exponents = torch.arange(0, self.head_size, 2, dtype=torch.int64, device=positions.device).float()
        frequencies = 1.0 / self.theta ** (exponents / self.head_size)
        angles = positions[..., None].float() * frequencies
        angles = torch.cat((angles, angles), dim=-1)[:, None]
        return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-second, first), dim=-1) * sin


def query_rows(tensor: torch.Tensor, query_positions: torch.Tensor | None) -> torch.Tensor:
    """[B or 1, 1, L, X] per-query rows (a local layer's bias, rotary angles) at the [B, P] query
    positions: [B, 1, P, X]. Broadcast rows ([.., 1, X]) and None pass unchanged."""
    if query_positions is None or tensor is None or tensor.shape[-2] == 1:
        return tensor
    batch, count = query_positions.shape
    index = query_positions[:, None, :, None].expand(batch, 1, count, tensor.shape[-1])
    return tensor.expand(batch, -1, -1, -1).gather(2, index)


class BertSelfAttention(nn.Module):
    """Multi-head self-attention with optional Shaw et al. (2018) relative position scores. These enter as an additive
    bias, (q·k + q·E [+ k·E]) / √d = q·k/√d + bias, so the relative types also run through SDPA."""

    def __init__(self, config: BertConfig, layer_index: int = 0):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_size = config.head_size
        self.position_embedding_type = config.position_embedding_type
        self.max_positions = config.max_position_embeddings
        self.dropout_prob = config.attention_probs_dropout_prob
        self.fused_qkv = config.fused_qkv
        self.query = nn.Linear(config.hidden_size, config.hidden_size, bias=config.attention_bias)
        self.key = nn.Linear(config.hidden_size, config.hidden_size, bias=config.attention_bias)
        self.value = nn.Linear(config.hidden_size, config.hidden_size, bias=config.attention_bias)
        if config.relative_positions:
            self.distance_embedding = nn.Embedding(2 * config.max_position_embeddings - 1, self.head_size)
        if self.position_embedding_type == "rotary":
            local = config.is_local_layer(layer_index) and config.local_rope_theta is not None
            self.rotary = RotaryEmbedding(self.head_size, config.local_rope_theta if local else config.rope_theta)

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.num_heads, self.head_size).transpose(1, 2)

    def _project(self, hidden_states: torch.Tensor, query_states: torch.Tensor):
        if not self.fused_qkv:
            return self.query(query_states), self.key(hidden_states), self.value(hidden_states)
        if query_states is hidden_states:
            return fused_linear(hidden_states, self.query, self.key, self.value)
        return self.query(query_states), *fused_linear(hidden_states, self.key, self.value)

    def _relative_position_bias(self, query, key, query_positions):
        key_positions = torch.arange(key.shape[2], device=query.device)
        if query_positions is None:  # one [L, L] table for every row
            distance, rows = key_positions[:, None] - key_positions[None, :], ""
        else:  # [B, P, L]: each row's own query positions
            distance, rows = query_positions[..., None] - key_positions, "b"
        table = self.distance_embedding(distance + self.max_positions - 1).to(query.dtype)  # [(B,) Lq, L, d]
        bias = torch.einsum(f"bhld,{rows}lrd->bhlr", query, table)
        if self.position_embedding_type == "relative_key_query":
            bias = bias + torch.einsum(f"bhrd,{rows}lrd->bhlr", key, table)
        return bias / math.sqrt(self.head_size)

    def forward(self, hidden_states, attention_bias, head_mask=None, output_attentions=False, eager=False,
                query_positions=None, query_states=None, position_ids=None):
        """`query_positions` ([B, P]): queries, and so outputs, only at these positions, whose states the
        caller gathered as `query_states` ([B, P, H]); keys and values everywhere. `position_ids`
        ([B or 1, L]) place the rotary keys (and queries)."""
        if query_positions is None:
            query_states = hidden_states
        query, key, value = (self._split_heads(t) for t in self._project(hidden_states, query_states))
        if self.position_embedding_type == "rotary":
            cos, sin = self.rotary(position_ids, query.dtype)
            key = rotate(key, cos, sin)
            query = rotate(query, query_rows(cos, query_positions), query_rows(sin, query_positions))
        bias = query_rows(attention_bias, query_positions)
        if hasattr(self, "distance_embedding"):
            relative = self._relative_position_bias(query, key, query_positions)
            bias = relative if bias is None else relative + bias
        dropout_p = self.dropout_prob if self.training else 0.0
        # With dropout, CPU SDPA runs this same math with torch's slower mask (see `dropout`). A layer
        # pruned to no heads takes it too: some SDPA kernels refuse empty inputs.
        if output_attentions or eager or (dropout_p > 0 and query.device.type == "cpu") or self.num_heads == 0:
            scores = query @ key.transpose(-1, -2) / math.sqrt(self.head_size)
            if bias is not None:
                scores = scores + bias
            # As transformers: dropout, then the head mask; the returned probabilities are those that weigh the values.
            probs = dropout(scores.softmax(dim=-1), dropout_p, self.training)
            if head_mask is not None:
                probs = probs * head_mask
            context = probs @ value
        else:
            probs = None
            context = F.scaled_dot_product_attention(query, key, value, attn_mask=bias, dropout_p=dropout_p)
            if head_mask is not None:
                # A head's factor commutes with its matmul, (probs·m)@v = m·(probs@v): SDPA stays usable.
                context = context * head_mask
        batch, _, length, _ = context.shape
        # Not reshape(..., -1): a layer pruned to no heads has an empty context.
        return context.transpose(1, 2).reshape(batch, length, self.num_heads * self.head_size), probs


class BertSelfOutput(nn.Module):
    """dense → dropout → residual → LayerNorm (post-LN), after attention."""

    def __init__(self, config: BertConfig, in_features: int | None = None, bias: bool | None = None):
        super().__init__()
        bias = config.attention_bias if bias is None else bias
        self.dense = nn.Linear(in_features or config.hidden_size, config.hidden_size, bias=bias)
        # Pre-norm: the residual sum stays unnormalised (the next block's input norm reads it).
        self.LayerNorm = norm_layer(config) if config.norm_position == "post" else nn.Identity()
        self.dropout = Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, residual):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + residual)


def prune_linear_layer(layer: nn.Linear, index: torch.Tensor, dim: int = 0) -> None:
    """Keeps only the output rows (dim=0) or input columns (dim=1) `index` of `layer`, in place."""
    index = index.to(layer.weight.device)
    layer.weight = nn.Parameter(layer.weight.detach().index_select(dim, index), layer.weight.requires_grad)
    if dim == 0 and layer.bias is not None:
        layer.bias = nn.Parameter(layer.bias.detach()[index], layer.bias.requires_grad)
    layer.out_features, layer.in_features = layer.weight.shape


class BertAttention(nn.Module):
    def __init__(self, config: BertConfig, layer_index: int = 0):
        super().__init__()
        self.input_norm = _pre_norm(config, present=layer_index > 0 or config.first_attention_norm)
        self.self = BertSelfAttention(config, layer_index)
        self.output = BertSelfOutput(config)
        self.pruned_heads: set[int] = set()

    def prune_heads(self, heads) -> None:
        """Removes `heads`, numbered as in the unpruned layer (already removed ones are skipped): their
        query, key and value rows and their input columns of output.dense."""
        attention = self.self
        remaining = [h for h in range(attention.num_heads + len(self.pruned_heads)) if h not in self.pruned_heads]
        kept = [position for position, head in enumerate(remaining) if head not in heads]
        if len(kept) == len(remaining):
            return
        size = attention.head_size
        index = (torch.tensor(kept, dtype=torch.long)[:, None] * size + torch.arange(size)).flatten()
        for linear in (attention.query, attention.key, attention.value):
            prune_linear_layer(linear, index)
        prune_linear_layer(self.output.dense, index, dim=1)
        attention.num_heads = len(kept)
        self.pruned_heads |= set(remaining) & set(heads)

    def forward(self, hidden_states, attention_bias, head_mask=None, output_attentions=False, eager=False,
                query_positions=None, position_ids=None):
        # Gathered once for the queries and the residual: each gather's gradient is a [B, L, H] scatter.
        query_states = hidden_states if query_positions is None else gather_positions(hidden_states, query_positions)
        inputs, query_inputs = hidden_states, query_states
        if self.input_norm is not None:  # pre-norm: attention reads normalised states, the residual does not
            inputs = self.input_norm(hidden_states)
            query_inputs = inputs if query_positions is None else self.input_norm(query_states)
        context, probs = self.self(inputs, attention_bias, head_mask, output_attentions, eager, query_positions,
                                   query_inputs, position_ids)
        return self.output(context, query_states), probs


class BertIntermediate(nn.Module):
    """dense → activation; gated (Shazeer, 2020: GeGLU with gelu, SwiGLU with silu): one dense gives the
    input and the gate, activation(input) * gate, as ModernBERT's Wi."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.input_norm = _pre_norm(config)
        self.gated = config.gated_ffn
        self.dense = nn.Linear(config.hidden_size, (1 + self.gated) * config.intermediate_size, bias=config.ffn_bias)
        self.activation = ACTIVATIONS[config.hidden_act]()

    def forward(self, hidden_states):
        if self.input_norm is not None:
            hidden_states = self.input_norm(hidden_states)
        if self.gated:
            inputs, gate = self.dense(hidden_states).chunk(2, dim=-1)
            return self.activation(inputs) * gate
        return self.activation(self.dense(hidden_states))


class BertOutput(BertSelfOutput):
    """The same after the feed-forward network: intermediate_size → hidden_size."""

    def __init__(self, config: BertConfig):
        super().__init__(config, config.intermediate_size, config.ffn_bias)


class BertLayer(nn.Module):
    def __init__(self, config: BertConfig, layer_index: int = 0):
        super().__init__()
        self.attention = BertAttention(config, layer_index)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(self, hidden_states, attention_bias, head_mask=None, output_attentions=False, eager=False,
                query_positions=None, position_ids=None):
        attended, probs = self.attention(hidden_states, attention_bias, head_mask, output_attentions, eager,
                                         query_positions, position_ids)
        return self.output(self.intermediate(attended), attended), probs


class BertEncoder(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(config, index) for index in range(config.num_hidden_layers))
        self.local_layers = [config.is_local_layer(index) for index in range(config.num_hidden_layers)]
        if config.norm_position == "pre":
            self.final_norm = norm_layer(config)
        self.gradient_checkpointing = config.gradient_checkpointing

    def forward(self, hidden_states, attention_bias, head_mask=None, output_attentions=False,
                output_hidden_states=False, eager=False, output_positions=None, local_attention_bias=None,
                position_ids=None):
        """`output_positions` ([B, P]): the last layer computes only these positions (its keys and values
        still come from every position), and the output is [B, P, H]. Local layers read
        `local_attention_bias` (the sliding window's), the others `attention_bias`. With pre-norm the
        last of `all_hidden` is the last layer's output before the final norm (as in ModernBERT)."""
        all_hidden = (hidden_states,) if output_hidden_states else None
        all_probs = () if output_attentions else None
        for index, layer in enumerate(self.layer):
            bias = local_attention_bias if self.local_layers[index] else attention_bias
            inputs = (hidden_states, bias, None if head_mask is None else head_mask[index], output_attentions,
                      eager, output_positions if index == len(self.layer) - 1 else None, position_ids)
            if self.gradient_checkpointing and self.training and torch.is_grad_enabled():
                hidden_states, probs = checkpoint(layer, *inputs, use_reentrant=False)
            else:
                hidden_states, probs = layer(*inputs)
            if output_hidden_states:
                all_hidden += (hidden_states,)
            if output_attentions:
                all_probs += (probs,)
        if hasattr(self, "final_norm"):
            hidden_states = self.final_norm(hidden_states)
        return hidden_states, all_hidden, all_probs


class BertPooler(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden_states, attention_mask=None):
        return torch.tanh(self.dense(hidden_states[:, 0]))


def _imported(module: str):
    """bertlab.losses (for a loss over labelled tokens) and bertlab.checkpoint.dispatch (to save or load), imported by
    name: an export carries the modules imported by statement (transformers requires what those name), not these."""
    return importlib.import_module(module)


class BertPreTrainedModel(nn.Module):
    """Shared init, the gradient-checkpointing switch, `from_pretrained`, `save_pretrained` (bertlab.checkpoint)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, ignore_mismatched_sizes: bool = False, **config_overrides):
        """Loads a bertlab or Hugging Face BERT or ModernBERT directory, in eval mode as transformers does
        (docs/model_api.md): `config_overrides` replace config.json values; encoder tensors whose shapes differ from
        the config's are an error unless `ignore_mismatched_sizes`; the load report is kept as `model.load_report`."""
        return _imported("bertlab.checkpoint.dispatch").load_pretrained(cls, path, ignore_mismatched_sizes,
                                                                         **config_overrides)

    def save_pretrained(self, path: str | os.PathLike) -> None:
        """Writes transformers' format: BERT's (BertFor…) for a BERT, ModernBERT's for a ModernBERT-shaped
        model, and any other mix with its own modelling code (bertlab.checkpoint.remote_code)."""
        _imported("bertlab.checkpoint.dispatch").save_pretrained(self, path)

    def _init_weights(self, module: nn.Module) -> None:
        """`weight_init: bert`: every matrix and table normal(0, initializer_range), as transformers' BERT.
        `modernbert`: as transformers' ModernBertPreTrainedModel (docs/variants.md), truncated normals cut at ±2 std,
        the matmuls out of a block and the heads' dense layers at `_output_std`, a classifier at hidden_size ** -0.5."""
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            self._draw(module.weight, self.config.hidden_size ** -0.5
                       if self._modernbert_init and module is getattr(self, "classifier", None) else std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            self._draw(module.weight, std)
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()
        elif isinstance(module, (nn.LayerNorm, nn.RMSNorm)):
            nn.init.ones_(module.weight)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, BertEmbeddings):  # after its tables (apply visits children first)
            self._init_embedding_tables(module)
        # After their Linear children (apply visits children first): redrawn at the scale of a block's output
        elif self._modernbert_init and isinstance(module, (BertSelfOutput, BertPredictionHeadTransform)):
            self._draw(module.dense.weight, self._output_std)
        elif self._modernbert_init and isinstance(module, BertLMPredictionHead) and not module.tied:
            self._draw(module.decoder.weight, self._output_std)

    @property
    def _modernbert_init(self) -> bool:
        return self.config.weight_init == "modernbert"

    @property
    def _output_std(self) -> float:
        return self.config.initializer_range / math.sqrt(2.0 * self.config.num_hidden_layers)

    def _draw(self, weight: torch.Tensor, std: float) -> None:
        if self._modernbert_init:
            nn.init.trunc_normal_(weight, mean=0.0, std=std, a=-MODERNBERT_CUTOFF * std, b=MODERNBERT_CUTOFF * std)
        else:
            nn.init.normal_(weight, mean=0.0, std=std)

    def _init_embedding_tables(self, embeddings: BertEmbeddings) -> None:
        """The sinusoidal table, and `embedding_init: orthogonal`'s tables: orthogonal rows (or columns, for
        a table taller than wide) scaled so that the entries have the normal init's standard deviation."""
        config = self.config
        learned = [embeddings.word_embeddings]
        if hasattr(embeddings, "token_type_embeddings"):
            learned.append(embeddings.token_type_embeddings)
        if config.position_embedding_type == "sinusoidal":
            with torch.no_grad():
                embeddings.position_embeddings.weight.copy_(
                    sinusoidal_positions(config.max_position_embeddings, config.hidden_size))
        elif hasattr(embeddings, "position_embeddings"):
            learned.append(embeddings.position_embeddings)
        if config.embedding_init != "orthogonal":
            return
        for table in learned:
            nn.init.orthogonal_(table.weight, gain=config.initializer_range * math.sqrt(max(table.weight.shape)))
            if table.padding_idx is not None:
                with torch.no_grad():
                    table.weight[table.padding_idx].zero_()

    def post_init(self, *new_modules: nn.Module) -> None:
        """Initialises the whole model, or only `new_modules`: a head on a BertModel that initialised itself."""
        for module in new_modules or (self,):
            module.apply(self._init_weights)

    def prune_heads(self, heads_to_prune: dict[int, list[int]]) -> None:
        """Removes attention heads for good, as transformers' `prune_heads`: {layer: [heads]}, heads
        numbered as in the unpruned model. config.pruned_heads keeps the union of all prunings, so a
        saved directory loads pruned, in bertlab and in transformers."""
        merged = {layer: [*self.config.pruned_heads.get(layer, ()), *heads] for layer, heads in heads_to_prune.items()}
        # The config's validation checks the layer and head numbers before any matrix changes.
        checked = dataclasses.replace(self.config, pruned_heads={**self.config.pruned_heads, **merged})
        bert = getattr(self, "bert", self)
        for layer, heads in heads_to_prune.items():
            bert.encoder.layer[layer].attention.prune_heads(heads)
        self.config.pruned_heads = checked.pruned_heads

    def get_extended_attention_mask(self, attention_mask: torch.Tensor | None, input_shape: tuple[int, int],
                                    dtype: torch.dtype = torch.float32) -> torch.Tensor | None:
        """transformers' rule: a 1/0 mask, [batch, length] over the keys or [batch, from, to] per query, becomes an
        additive [batch, 1, 1 or from, to] bias, 0 where kept and dtype's minimum where masked; a 4-D mask is taken as
        such a bias already (what this method returns), only checked. None: nothing masked."""
        if attention_mask is None:
            return None
        batch, length = input_shape
        shape = tuple(attention_mask.shape)
        expected = {2: (batch, length), 3: (batch, length, length), 4: (batch, 1, length, length)}.get(len(shape))
        if expected is None or shape[-1] != length or any(size not in (1, want) for size, want in zip(shape, expected)):
            raise ValueError(f"attention_mask must be [batch, length] = [{batch}, {length}], [batch, from, to] = "
                             f"[{batch}, {length}, {length}] or an extended [batch, 1, from, to] bias, "
                             f"got shape {list(shape)}")
        if attention_mask.dim() == 4:
            if not attention_mask.is_floating_point() or bool((attention_mask > 0).any()):
                raise ValueError("a 4-D attention_mask is an additive bias (0 to attend, a large negative "
                                 "number to mask, as get_extended_attention_mask returns); got "
                                 + (f"dtype {attention_mask.dtype}" if not attention_mask.is_floating_point()
                                    else "positive values: pass a 1/0 mask as [batch, length] or [batch, from, to]"))
            return attention_mask.to(dtype).clamp(min=torch.finfo(dtype).min)
        keep = attention_mask[:, None, None, :] if attention_mask.dim() == 2 else attention_mask[:, None]
        return (1.0 - keep.to(dtype)) * torch.finfo(dtype).min

    def outputs_asked(self, output_attentions: bool | None, output_hidden_states: bool | None) -> tuple[bool, bool]:
        """As transformers: an argument left at None takes the config's output_attentions / output_hidden_states."""
        return (self.config.output_attentions if output_attentions is None else output_attentions,
                self.config.output_hidden_states if output_hidden_states is None else output_hidden_states)

    def gradient_checkpointing_enable(self, enabled: bool = True) -> None:
        self.config.gradient_checkpointing = enabled
        for module in self.modules():
            if isinstance(module, BertEncoder):
                module.gradient_checkpointing = enabled

    def gradient_checkpointing_disable(self) -> None:
        self.gradient_checkpointing_enable(False)

    @property
    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


class BertModel(BertPreTrainedModel):
    def __init__(self, config: BertConfig, add_pooling_layer: bool = True):
        super().__init__(config)
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        pooler = BertPooler if config.classifier_pooling == "pooler" else BertHeadPooler
        self.pooler = pooler(config) if add_pooling_layer else None
        self.post_init()
        # As transformers' post_init: a model is built pruned, so a pruned checkpoint's weights fit.
        self.prune_heads(config.pruned_heads)

    def _input_shape(self, input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None) -> torch.Size:
        """[batch, length] of the one input given, checked."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass either input_ids or inputs_embeds, not both" if input_ids is not None
                             else "pass input_ids ([batch, length]) or inputs_embeds ([batch, length, hidden_size])")
        if input_ids is not None and input_ids.dim() != 2:
            raise ValueError(f"input_ids must be [batch, length], got shape {tuple(input_ids.shape)}")
        hidden_size = self.config.hidden_size
        if inputs_embeds is not None and (inputs_embeds.dim() != 3 or inputs_embeds.shape[-1] != hidden_size):
            raise ValueError(f"inputs_embeds must be [batch, length, hidden_size={hidden_size}], "
                             f"got shape {tuple(inputs_embeds.shape)}")
        shape = input_ids.shape if input_ids is not None else inputs_embeds.shape[:2]
        if shape[1] > self.config.max_position_embeddings:
            raise ConfigError(f"sequence length {shape[1]} exceeds max_position_embeddings "
                              f"({self.config.max_position_embeddings}); truncate inputs (data.max_seq_length) or "
                              f"build the model with a larger position table")
        return shape

    def _local_attention_bias(self, bias: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
        """The global bias (None, or [B or 1, 1, 1 or L, L] from a 2-D, 3-D or 4-D mask) with the keys more than
        window // 2 positions from each query masked out too: [B or 1, 1, L, L], ModernBERT's sliding_window_mask."""
        positions = torch.arange(like.shape[1], device=like.device)
        outside = (positions[:, None] - positions[None, :]).abs() > self.config.local_attention_window // 2
        inside = torch.zeros((), dtype=like.dtype, device=like.device) if bias is None else bias
        return torch.where(outside, torch.finfo(like.dtype).min, inside).reshape(-1, 1, *outside.shape)

    def _head_mask(self, head_mask: torch.Tensor | None, like: torch.Tensor):
        """transformers' get_head_mask: [heads] (for every layer) or [layers, heads] → [layers, heads, 1, 1]
        factors on the attention probabilities, in the dtype and on the device of `like`."""
        if head_mask is None:
            return None
        layers, heads = self.config.num_hidden_layers, self.config.num_attention_heads
        if tuple(head_mask.shape) not in ((heads,), (layers, heads)):
            raise ValueError(f"head_mask must have shape [num_attention_heads] = [{heads}] or "
                             f"[num_hidden_layers, num_attention_heads] = [{layers}, {heads}], "
                             f"got {list(head_mask.shape)}")
        if self.config.pruned_heads:
            # transformers fails here too, on a broadcast of the mask against the pruned layer's heads.
            raise ConfigError(f"head_mask cannot apply to a model with pruned heads (config.pruned_heads = "
                              f"{self.config.pruned_heads}): its layers no longer have {heads} heads each; "
                              f"mask the heads of the unpruned model instead")
        return head_mask.expand(layers, heads).to(like.device, like.dtype)[:, :, None, None]

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, head_mask=None,
                output_attentions=None, output_hidden_states=None, output_positions=None,
                inputs_embeds=None) -> BertModelOutput:
        """`inputs_embeds` ([B, L, H]) in place of `input_ids`: the word vectors the embedding table would
        give. `output_positions` ([B, P]): the last layer runs only at these positions (see BertEncoder), so
        last_hidden_state is [B, P, H]; the pooler reads its first column."""
        shape = self._input_shape(input_ids, inputs_embeds)
        output_attentions, output_hidden_states = self.outputs_asked(output_attentions, output_hidden_states)
        device = (input_ids if input_ids is not None else inputs_embeds).device
        if token_type_ids is None:
            token_type_ids = torch.zeros(shape, dtype=torch.long, device=device)
        if position_ids is None:
            position_ids = torch.arange(shape[1], device=device)[None, :]
        hidden_states = self.embeddings(input_ids, token_type_ids, position_ids, inputs_embeds)
        bias = self.get_extended_attention_mask(attention_mask, shape, hidden_states.dtype)
        local_bias = self._local_attention_bias(bias, hidden_states) if self.config.has_local_layers else None
        head_mask = self._head_mask(head_mask, hidden_states)
        eager = self.config.attn_implementation == "eager"
        sequence_output, all_hidden, all_probs = self.encoder(
            hidden_states, bias, head_mask, output_attentions, output_hidden_states, eager, output_positions,
            local_bias, position_ids)
        pooled = self.pooler(sequence_output, attention_mask) if self.pooler is not None else None
        return BertModelOutput(sequence_output, pooled, all_hidden, all_probs)


class BertPredictionHeadTransform(nn.Module):
    """dense → activation → norm: BERT's MLM transform and ModernBERT's `head` alike."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size, bias=config.head_bias)
        self.activation = ACTIVATIONS[config.head_act or config.hidden_act]()
        self.LayerNorm = norm_layer(config)

    def forward(self, hidden_states):
        return self.LayerNorm(self.activation(self.dense(hidden_states)))


class BertHeadPooler(BertPredictionHeadTransform):
    """ModernBERT's classifier input: the [CLS] state (classifier_pooling 'cls') or the mean over the
    unmasked positions ('mean'), through dense → activation → norm."""

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.mean = config.classifier_pooling == "mean"

    def forward(self, hidden_states, attention_mask=None):
        if not self.mean:
            return super().forward(hidden_states[:, 0])
        if attention_mask is None:
            return super().forward(hidden_states.mean(dim=1))
        if attention_mask.dim() != 2:
            raise ValueError(f"classifier_pooling 'mean' averages the positions a [batch, length] attention_mask "
                             f"keeps; got a {attention_mask.dim()}-D mask, which names no positions to average")
        weights = attention_mask[..., None].to(hidden_states.dtype)
        return super().forward((hidden_states * weights).sum(dim=1) / weights.sum(dim=1))


class BertLMPredictionHead(nn.Module):
    """transform → decoder: the word embeddings (with tie_word_embeddings false, its own `decoder`); its own bias."""

    def __init__(self, config: BertConfig, word_embeddings: nn.Embedding):
        super().__init__()
        self.transform = BertPredictionHeadTransform(config)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size)) if config.decoder_bias else None
        if config.tie_word_embeddings:
            self._word_embeddings = (word_embeddings,)  # a tuple: tied, not registered twice
        else:
            self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    @property
    def tied(self) -> bool:
        return not hasattr(self, "decoder")

    @property
    def decoder_weight(self) -> torch.Tensor:
        return self._word_embeddings[0].weight if self.tied else self.decoder.weight

    def forward(self, hidden_states):
        return F.linear(self.transform(hidden_states), self.decoder_weight, self.bias)


class BertPreTrainingHeads(nn.Module):
    def __init__(self, config: BertConfig, word_embeddings: nn.Embedding, with_nsp: bool):
        super().__init__()
        self.predictions = BertLMPredictionHead(config, word_embeddings)
        if with_nsp:
            self.seq_relationship = nn.Linear(config.hidden_size, 2)


def masked_lm(head: BertLMPredictionHead, sequence_output, labels, return_logits: bool = True,
              predictions_per_row: int | None = None, positions: torch.Tensor | None = None,
              differentiable_logits: bool = False):
    """Full logits without labels; with labels, bertlab.losses.labelled_masked_lm: the labelled positions' only."""
    if labels is None:
        return head(sequence_output), None
    return _imported("bertlab.losses").labelled_masked_lm(head, sequence_output, labels, return_logits,
                                                          predictions_per_row, positions, differentiable_logits)


def sparse_output_positions(labels, predictions_per_row, output_attentions, output_hidden_states):
    """The positions the last layer computes for the MLM loss: None (all) without labels or for all layers' outputs."""
    if labels is None or output_attentions or output_hidden_states:
        return None
    return _imported("bertlab.losses").predicted_positions(labels, predictions_per_row)


class BertForPreTraining(BertPreTrainedModel):
    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.bert = BertModel(config)
        self.cls = BertPreTrainingHeads(config, self.bert.embeddings.word_embeddings, with_nsp=True)
        self.post_init(self.cls)

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, head_mask=None,
                labels=None, next_sentence_label=None, output_attentions=None, output_hidden_states=None,
                return_logits=True, predictions_per_row=None, differentiable_logits=False,
                inputs_embeds=None) -> PreTrainingOutput:
        """With `labels`, prediction_logits are the labelled positions' only (see masked_lm)."""
        output_attentions, output_hidden_states = self.outputs_asked(output_attentions, output_hidden_states)
        predicted = sparse_output_positions(labels, predictions_per_row, output_attentions,
                                            output_hidden_states or self.config.classifier_pooling == "mean")
        # The pooler reads the last layer's first output: [CLS] goes first.
        computed = None if predicted is None else torch.cat((torch.zeros_like(predicted[:, :1]), predicted), dim=1)
        out = self.bert(input_ids, attention_mask, token_type_ids, position_ids, head_mask,
                        output_attentions, output_hidden_states, computed, inputs_embeds=inputs_embeds)
        sequence_output = out.last_hidden_state if predicted is None else out.last_hidden_state[:, 1:]
        prediction_logits, mlm_loss = masked_lm(self.cls.predictions, sequence_output, labels, return_logits,
                                                predictions_per_row, predicted, differentiable_logits)
        seq_relationship_logits = self.cls.seq_relationship(out.pooler_output)
        nsp_loss = None if next_sentence_label is None \
            else F.cross_entropy(seq_relationship_logits.float(), next_sentence_label.view(-1))
        losses = [part for part in (mlm_loss, nsp_loss) if part is not None]
        loss = sum(losses) if losses else None
        return PreTrainingOutput(loss, prediction_logits, seq_relationship_logits, out.hidden_states, out.attentions,
                                 mlm_loss, nsp_loss)


class BertForMaskedLM(BertPreTrainedModel):
    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=False)
        self.cls = BertPreTrainingHeads(config, self.bert.embeddings.word_embeddings, with_nsp=False)
        self.post_init(self.cls)

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, head_mask=None,
                labels=None, output_attentions=None, output_hidden_states=None,
                return_logits=True, predictions_per_row=None, differentiable_logits=False,
                inputs_embeds=None) -> LogitsOutput:
        """With `labels`, the logits are the labelled positions' only (see masked_lm)."""
        output_attentions, output_hidden_states = self.outputs_asked(output_attentions, output_hidden_states)
        positions = sparse_output_positions(labels, predictions_per_row, output_attentions, output_hidden_states)
        out = self.bert(input_ids, attention_mask, token_type_ids, position_ids, head_mask,
                        output_attentions, output_hidden_states, positions, inputs_embeds=inputs_embeds)
        logits, loss = masked_lm(self.cls.predictions, out.last_hidden_state, labels, return_logits,
                                 predictions_per_row, positions, differentiable_logits)
        return LogitsOutput(loss, logits, out.hidden_states, out.attentions)


class BertForSequenceClassification(BertPreTrainedModel):
    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.bert = BertModel(config)
        classifier_dropout = config.classifier_dropout
        self.dropout = Dropout(config.hidden_dropout_prob if classifier_dropout is None else classifier_dropout)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init(self.classifier)

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, head_mask=None,
                labels=None, output_attentions=None, output_hidden_states=None, inputs_embeds=None) -> LogitsOutput:
        output_attentions, output_hidden_states = self.outputs_asked(output_attentions, output_hidden_states)
        inputs = input_ids if input_ids is not None else inputs_embeds
        # The pooler reads [CLS] alone: the last layer runs only there, unless every layer's outputs are asked for.
        every_position = output_attentions or output_hidden_states or self.config.classifier_pooling == "mean"
        cls_only = None if every_position or inputs is None \
            else torch.zeros(inputs.shape[0], 1, dtype=torch.long, device=inputs.device)
        out = self.bert(input_ids, attention_mask, token_type_ids, position_ids, head_mask,
                        output_attentions, output_hidden_states, cls_only, inputs_embeds=inputs_embeds)
        logits = self.classifier(self.dropout(out.pooler_output))
        loss = None if labels is None else self._loss(logits, labels)
        return LogitsOutput(loss, logits, out.hidden_states, out.attentions)

    def _loss(self, logits, labels):
        problem_type = self.config.problem_type or (  # None: Hugging Face's inference rule
            "regression" if self.config.num_labels == 1 else "single_label_classification"
            if labels.dtype in (torch.long, torch.int) else "multi_label_classification")
        logits = logits.float()
        if problem_type == "regression":
            return F.mse_loss(logits.squeeze(-1), labels.float().view(-1)) if self.config.num_labels == 1 \
                else F.mse_loss(logits, labels.float())
        if problem_type == "single_label_classification":
            return F.cross_entropy(logits, labels.view(-1))
        return F.binary_cross_entropy_with_logits(logits, labels.float())


class BertForTokenClassification(BertPreTrainedModel):
    """A label per token (named entities): dropout → linear on every position's last hidden state, as transformers'
    BertForTokenClassification; a ModernBERT-style model (classifier_pooling cls or mean) puts its dense → act → norm
    `head` first, as ModernBertForTokenClassification. The loss is the mean cross-entropy over the labelled positions
    (F.cross_entropy's ignore_index, -100, elsewhere: padding, specials, a word's later pieces)."""

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=False)
        self.head = None if config.classifier_pooling == "pooler" else BertPredictionHeadTransform(config)
        classifier_dropout = config.classifier_dropout
        self.dropout = Dropout(config.hidden_dropout_prob if classifier_dropout is None else classifier_dropout)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init(*(module for module in (self.head, self.classifier) if module is not None))

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, head_mask=None,
                labels=None, output_attentions=None, output_hidden_states=None, *, inputs_embeds=None) -> LogitsOutput:
        out = self.bert(input_ids, attention_mask, token_type_ids, position_ids, head_mask,
                        output_attentions, output_hidden_states, inputs_embeds=inputs_embeds)
        hidden = out.last_hidden_state if self.head is None else self.head(out.last_hidden_state)
        logits = self.classifier(self.dropout(hidden))
        loss = None if labels is None else F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())
        return LogitsOutput(loss, logits, out.hidden_states, out.attentions)


def span_loss(start_logits, end_logits, start_positions, end_positions) -> torch.Tensor:
    """transformers' answer-span loss: the mean of the start's and the end's cross-entropy over the positions;
    a position outside the sequence (clamped to its length) is ignored."""
    outside = start_logits.shape[1]
    start = start_positions.reshape(-1).clamp(0, outside)
    end = end_positions.reshape(-1).clamp(0, outside)
    return (F.cross_entropy(start_logits.float(), start, ignore_index=outside)
            + F.cross_entropy(end_logits.float(), end, ignore_index=outside)) / 2


class BertForQuestionAnswering(BertPreTrainedModel):
    """Extractive question answering: a start and an end logit per token (`qa_outputs`), as transformers'
    BertForQuestionAnswering. A ModernBERT-style model (classifier_pooling cls or mean) puts its dense → act → norm
    `head` and dropout first, as ModernBertForQuestionAnswering (whose `classifier` is bertlab's `qa_outputs`)."""

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=False)
        self.head = None if config.classifier_pooling == "pooler" else BertPredictionHeadTransform(config)
        classifier_dropout = config.hidden_dropout_prob if config.classifier_dropout is None \
            else config.classifier_dropout
        self.dropout = None if self.head is None else Dropout(classifier_dropout)
        self.qa_outputs = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init(*(module for module in (self.head, self.qa_outputs) if module is not None))

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, head_mask=None,
                start_positions=None, end_positions=None, output_attentions=None, output_hidden_states=None, *,
                inputs_embeds=None) -> QuestionAnsweringOutput:
        out = self.bert(input_ids, attention_mask, token_type_ids, position_ids, head_mask,
                        output_attentions, output_hidden_states, inputs_embeds=inputs_embeds)
        hidden = out.last_hidden_state if self.head is None else self.dropout(self.head(out.last_hidden_state))
        start_logits, end_logits = (logits.squeeze(-1) for logits in self.qa_outputs(hidden).split(1, dim=-1))
        loss = None if start_positions is None or end_positions is None \
            else span_loss(start_logits, end_logits, start_positions, end_positions)
        return QuestionAnsweringOutput(loss, start_logits, end_logits, out.hidden_states, out.attentions)
