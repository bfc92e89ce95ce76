"""The losses of general distillation (bertlab.lit.general_distillation): MiniLM's self-attention
relations (Wang et al. 2020, 2021) and a hidden-state MSE as TinyBERT's (Jiao et al. 2020).

A relation of two of an attention's projections A and B (query, key or value) is, per relation head,
softmax(A·Bᵀ / √d) over the keys, d the relation head's width: the query-key relation is the attention
distribution itself (MiniLM), query-query, key-key and value-value are MiniLMv2's. Both models' widths
are split into the same number of relation heads, so a 384-wide teacher and a 128-wide student compare
[B, heads, L, L] matrices whatever their own heads. Padded positions take no part: their keys are
left out of every softmax and their rows out of the mean.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from bertlab.argument_checks import Divides, check_rules

RELATIONS = {"query-query": ("query", "query"), "key-key": ("key", "key"), "value-value": ("value", "value"),
             "query-key": ("query", "key")}  # name → the two projections related


def check_relation_heads(heads: int, *widths: int) -> None:
    sizes = ", ".join(map(str, widths))
    check_rules("task.relation_heads", heads, [Divides(widths, f"divide the hidden sizes of the teacher and the "
                                                               f"student ({sizes}), e.g. 4, 8 or 32 for 384 and 128")])


def relation_scores(left: torch.Tensor, right: torch.Tensor, heads: int, keep: torch.Tensor) -> torch.Tensor:
    """left·rightᵀ / √d per relation head, [B, heads, L, L] in float32, from two projections [B, L, H]; the
    keys at padded positions (`keep` [B, L] false) get float32's lowest value, so no softmax counts them."""
    batch, length, width = left.shape

    def split(states: torch.Tensor) -> torch.Tensor:
        return states.float().view(batch, length, heads, width // heads).transpose(1, 2)

    scores = split(left) @ split(right).transpose(-1, -2) / math.sqrt(width // heads)
    return scores.masked_fill(~keep[:, None, None, :], torch.finfo(scores.dtype).min)


def relation_kl(teacher: torch.Tensor, student: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """KL(softmax(teacher) ‖ softmax(student)) of two relations' scores [B, heads, L, L], summed over the keys
    and averaged over the heads and the real rows (`keep` [B, L]); the gradient reaches the student's alone.
    As cross-entropy minus the teacher's entropy: fewer passes over the [B, heads, L, L] tensors than
    two log-softmaxes and their difference."""
    with torch.no_grad():
        log_probs = teacher.log_softmax(-1)
        probs = log_probs.exp()
        negative_entropy = (probs * log_probs).sum(-1)
    cross_entropy = F.cross_entropy(student.flatten(0, 2), probs.flatten(0, 2), reduction="none")
    return (cross_entropy.view_as(negative_entropy) + negative_entropy).masked_select(keep[:, None, :]).mean()


def masked_mse(predicted: torch.Tensor, target: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """The squared error of `predicted` against `target` ([B, L, H]), averaged over the widths and the real
    positions (`keep` [B, L])."""
    return (predicted.float() - target.float()).pow(2).mean(-1).masked_select(keep).mean()
