"""A smaller BERT initialised from a larger one by weight selection (Xu et al. 2023, "Initializing Models
with Larger Ones"; DistilBERT and BERT-PKD take a teacher's layers the same way): evenly spaced layers,
the residual dimensions with the largest LayerNorm scales (the same ones in every layer, so the residual
stream stays one stream), evenly spaced whole attention heads and evenly spaced feed-forward neurons.

When the smaller model's heads are wider than the source's, consecutive kept heads become one head, and
the query is scaled so that each source head's part of the score keeps its scale under the wider head's
1/√d. Every tensor of a BertModel, BertForMaskedLM, BertForPreTraining or BertForSequenceClassification
has a rule; a tensor without one is a bug here, not silently copied."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from bertlab.argument_checks import check_rules, checks_arguments
from bertlab.config import BertConfig
from bertlab.value_rules import Interval

# What each dimension of a tensor indexes: "hidden" (the residual stream), "heads" (the attention's
# concatenated head dimensions), "ffn" (the feed-forward neurons), or None (kept whole).
_ROLES = (
    (r"embeddings\.(word|position|token_type)_embeddings\.weight", (None, "hidden")),
    (r"LayerNorm\.(weight|bias)", ("hidden",)),
    (r"attention\.self\.(query|key|value)\.weight", ("heads", "hidden")),
    (r"attention\.self\.(query|key|value)\.bias", ("heads",)),
    (r"attention\.self\.distance_embedding\.weight", (None, None)),
    (r"attention\.output\.dense\.weight", ("hidden", "heads")),
    (r"intermediate\.dense\.weight", ("ffn", "hidden")),
    (r"intermediate\.dense\.bias", ("ffn",)),
    (r"layer\.\d+\.output\.dense\.weight", ("hidden", "ffn")),
    (r"(pooler|transform)\.dense\.weight", ("hidden", "hidden")),
    (r"(attention\.output|output|pooler|transform)\.dense\.bias", ("hidden",)),
    (r"(classifier|seq_relationship|decoder)\.weight", (None, "hidden")),
    (r"(classifier|seq_relationship|decoder)\.bias|predictions\.bias", (None,)),
)
_LAYER = re.compile(r"encoder\.layer\.(\d+)\.")


@dataclass(frozen=True)
class Selection:
    """Indices into the source model: the layers, residual dimensions, heads and feed-forward neurons kept."""
    layers: list[int]
    hidden: torch.Tensor
    heads: list[int]
    ffn: torch.Tensor
    query_scale: float  # √(source heads merged into one)


def evenly_spaced(total: int, kept: int) -> list[int]:
    return torch.linspace(0, total - 1, kept).round().long().tolist()


def whole_source_heads(arguments: Mapping[str, Any]) -> str | None:
    """Each smaller head is one or more of the source's heads side by side."""
    hidden, heads, source_head = arguments["hidden"], arguments["heads"], arguments["source"].head_size
    if heads < 1 or hidden % heads or (hidden // heads) % source_head:
        return (f"hidden={hidden}, heads={heads}: each head must be a whole number of the source's "
                f"{source_head}-wide heads (hidden / heads a multiple of {source_head})")
    return None


def unpruned_source(arguments: Mapping[str, Any]) -> str | None:
    """A pruned source's layers differ in width: no one selection of heads fits them all."""
    if arguments["source"].pruned_heads:
        return "the source model has pruned heads: its layers differ in width; select from an unpruned model"
    return None


def distance_table_width(arguments: Mapping[str, Any]) -> str | None:
    """Relative positions' distance tables are one source head wide, and so must the smaller heads be."""
    source, hidden, heads = arguments["source"], arguments["hidden"], arguments["heads"]
    if source.relative_positions and hidden // heads != source.head_size:
        return (f"position_embedding_type={source.position_embedding_type!r}: the distance tables are "
                f"{source.head_size} wide, so the heads must stay {source.head_size} wide "
                f"(heads={hidden // source.head_size})")
    return None


@checks_arguments(between=(whole_source_heads, unpruned_source, distance_table_width))
def smaller_config(source: BertConfig, *, layers: int, hidden: int, heads: int, intermediate: int) -> BertConfig:
    """The source's config with the smaller sizes, after checking each can be selected from it: the rules between
    the sizes and the source declared above, then each size within the source's."""
    for name, value, limit in (("layers", layers, source.num_hidden_layers), ("hidden", hidden, source.hidden_size),
                               ("intermediate", intermediate, source.intermediate_size)):
        check_rules(name, value, [Interval(f"[1, {limit}]", whole=True, says=f"from 1 to the source model's {limit}")])
    return dataclasses.replace(source, num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                               intermediate_size=intermediate)


def choose(state: dict[str, torch.Tensor], source: BertConfig, target: BertConfig) -> Selection:
    layer_norm_scale = sum(tensor.abs().float() for key, tensor in state.items() if key.endswith("LayerNorm.weight"))
    hidden = layer_norm_scale.topk(target.hidden_size).indices.sort().values
    head_size = source.head_size
    heads = evenly_spaced(source.num_attention_heads, target.hidden_size // head_size)
    return Selection(layers=evenly_spaced(source.num_hidden_layers, target.num_hidden_layers), hidden=hidden,
                     heads=heads, ffn=torch.tensor(evenly_spaced(source.intermediate_size, target.intermediate_size)),
                     query_scale=math.sqrt(target.head_size / head_size))


def select_weights(state: dict[str, torch.Tensor], source: BertConfig, selection: Selection) -> dict[str, torch.Tensor]:
    """The smaller model's state dict: the selected layers renumbered from 0, each tensor cut to the selection."""
    head_dims = torch.cat([torch.arange(head * source.head_size, (head + 1) * source.head_size)
                           for head in selection.heads])
    index = {"hidden": selection.hidden, "heads": head_dims, "ffn": selection.ffn, None: None}
    renumber = {old: new for new, old in enumerate(selection.layers)}
    selected = {}
    for key, tensor in state.items():
        layer = _LAYER.search(key)
        if layer:
            if int(layer.group(1)) not in renumber:
                continue
            key = _LAYER.sub(f"encoder.layer.{renumber[int(layer.group(1))]}.", key, count=1)
        roles = next((roles for pattern, roles in _ROLES if re.search(f"(?:{pattern})$", key)), None)
        if roles is None:
            raise ValueError(f"weight selection has no rule for {key}")
        for dim, role in enumerate(roles):
            if index[role] is not None:
                tensor = tensor.index_select(dim, index[role])
        if re.search(r"attention\.self\.query\.(weight|bias)$", key):
            tensor = tensor * selection.query_scale
        selected[key] = tensor.contiguous()
    return selected
