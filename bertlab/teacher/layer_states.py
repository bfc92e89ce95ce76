"""A teacher's states inside one layer, for general distillation (bertlab.lit.general_distillation): what
a BertSelfAttention reads, caught by a forward pre-hook (model.py stays as it is, its fused Q/K/V
projection included), and `LayerTeacher`, a BertModel folder run up to the attention of one layer.

Unlike a task teacher's outputs (bertlab.teacher.outputs), these are per token of the student's own
batches, so the teacher runs beside the student at every step instead of once before training: the
student reads the teacher's tokens (its tokenizer), so that both see the same ids.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch

from bertlab.argument_checks import check_rules
from bertlab.model import BertModel, BertSelfAttention
from bertlab.teacher.embeddings import teacher_config
from bertlab.value_rules import Interval

Output = TypeVar("Output")


class _Read(Exception):
    """Ends a forward once the attention's input is read (`read_attention_input` with finish=False)."""


def read_attention_input(attention: BertSelfAttention, forward: Callable[[], Output],
                         finish: bool = True) -> tuple[torch.Tensor, Output | None]:
    """Calls `forward` and returns the states [B, L, H] that `attention` read (normalised ones under
    pre-norm; every position, also where the layer computes its outputs at a few), with the forward's
    output; without `finish` the forward stops there, the layers above never run, and the output is None."""
    read = []

    def keep(module: BertSelfAttention, args: tuple) -> None:
        read.append(args[0])
        if not finish:
            raise _Read

    handle = attention.register_forward_pre_hook(keep)
    try:
        output = forward()
    except _Read:
        output = None
    finally:
        handle.remove()
    return read[0], output


class LayerTeacher:
    """The BertModel of the folder `teacher` (all-MiniLM-L6-v2's, a run's export, any BERT) kept up to its
    layer `layer` (from 1), in eval mode with its weights frozen. A plain object, not a torch Module: a
    LightningModule that holds it keeps it out of its state dict, its checkpoints and its optimizer."""

    def __init__(self, teacher: str | None, layer: int):
        layers = teacher_config(teacher).num_hidden_layers
        check_rules("task.teacher_layer", layer, [Interval(f"[1, {layers}]", whole=True,
                                                           says=f"from 1 to the teacher's {layers} layers")])
        with torch.random.fork_rng(devices=[]):  # building the model draws initial weights: not the run's draws
            model = BertModel.from_pretrained(teacher)
        model.encoder.layer = model.encoder.layer[:layer]  # the layers above never run
        model.pooler = None
        self.model = model.eval().requires_grad_(False)
        self.config = model.config

    @property
    def attention(self) -> BertSelfAttention:
        """The self-attention of the kept layer: its query, key and value projections make the relations."""
        return self.model.encoder.layer[-1].attention.self

    def to(self, device: torch.device) -> LayerTeacher:
        self.model.to(device)
        return self

    @torch.no_grad()
    def attention_input(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None,
                        token_type_ids: torch.Tensor | None) -> torch.Tensor:
        """The states [B, L, H] the kept layer's attention reads; the forward stops there. Under the
        caller's autocast (a bf16-mixed run's step): the teacher runs in bf16 too."""
        states, _ = read_attention_input(
            self.attention, lambda: self.model(input_ids, attention_mask, token_type_ids), finish=False)
        return states
