"""Parameter groups (weight decay, layer-wise learning-rate decay), a run's dropout, the optimizer built from a
Hydra partial, and the warmup learning-rate schedules."""

from __future__ import annotations

import inspect
import math
import re
from functools import partial
from typing import Annotated, Callable

import lightning as L
import torch
from lightning.pytorch.plugins.precision import MixedPrecision, Precision
from lightning.pytorch.utilities import GradClipAlgorithmType
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from bertlab.argument_checks import NON_NEGATIVE, Probability, checks_arguments
from bertlab.errors import ConfigError
from bertlab.model import BertSelfAttention
from bertlab.value_rules import Interval, OneOf

SCHEDULES = ("linear", "cosine", "constant")
_ENCODER_LAYER = re.compile(r"(?:^|\.)encoder\.layer\.(\d+)\.")
_EMBEDDINGS = re.compile(r"(?:^|\.)embeddings\.")


def _depth(name: str, num_layers: int) -> tuple[str, int]:
    """(group name, depth): embeddings 0, encoder layer i at i + 1, everything above (pooler, heads,
    classifier) at num_layers + 1."""
    layer = _ENCODER_LAYER.search(name)
    if layer:
        return f"layer_{layer.group(1)}", int(layer.group(1)) + 1
    if _EMBEDDINGS.search(name):
        return "embeddings", 0
    return "head", num_layers + 1


@checks_arguments
def parameter_groups(model: nn.Module, weight_decay: float, lr: float,
                     layerwise_lr_decay: Annotated[float, Interval("(0, 1]")] | None = None) -> list[dict]:
    """Optimizer groups, each named for LearningRateMonitor: 1-D parameters (biases, LayerNorm
    weights) get no weight decay; with `layerwise_lr_decay`, a parameter at depth d of L encoder
    layers trains at lr * decay ** (L + 1 - d) — embeddings lowest, heads at `lr`."""
    named = [(name, param) for name, param in model.named_parameters() if param.requires_grad]
    layer_indices = [int(m.group(1)) for name, _ in named if (m := _ENCODER_LAYER.search(name))]
    num_layers = max(layer_indices) + 1 if layer_indices else 0
    groups: dict[str, dict] = {}
    for name, param in named:
        decays = param.ndim >= 2
        if layerwise_lr_decay is None:
            group_name, scale = ("decay" if decays else "no_decay"), 1.0
        else:
            depth_name, depth = _depth(name, num_layers)
            group_name = depth_name if decays else f"{depth_name}/no_decay"
            scale = layerwise_lr_decay ** (num_layers + 1 - depth)
        group = groups.setdefault(group_name, {"name": group_name, "params": [], "lr": lr * scale,
                                               "weight_decay": weight_decay if decays else 0.0})
        group["params"].append(param)
    return list(groups.values())


def set_dropout(model: nn.Module, probability: float) -> None:
    """Every dropout of a bertlab model (hidden, attention, classifier) at `probability`, for this run
    only: `model.config`, and so a saved config.json, keeps its values."""
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = probability
        elif isinstance(module, BertSelfAttention):
            module.dropout_prob = probability


def build_optimizer(optimizer_factory: Callable[..., torch.optim.Optimizer], model: nn.Module,
                    layerwise_lr_decay: float | None = None, allow_fused: bool = True) -> torch.optim.Optimizer:
    """Calls the configured optimizer partial (`_partial_: true`) on `parameter_groups(model)`.

    `lr` and `weight_decay` are read from the partial's keywords: they set each group's values, so a
    config states them once. When the config chose neither `fused` nor `foreach`, the optimizer's
    multi-tensor path is taken where it has one: `fused=True` (on CPU ~7x faster than the default
    per-tensor loop for a BERT-mini AdamW step) if `allow_fused`, else `foreach=True` (~1.5-2x).
    """
    keywords = dict(optimizer_factory.keywords) if isinstance(optimizer_factory, partial) else {}
    if "lr" not in keywords:
        raise ConfigError("optimizer: set optimizer.lr (the peak learning rate); it was not given")
    groups = parameter_groups(model, float(keywords.get("weight_decay", 0.0)), float(keywords["lr"]),
                              layerwise_lr_decay)
    target = optimizer_factory.func if isinstance(optimizer_factory, partial) else optimizer_factory
    accepted = inspect.signature(target).parameters
    options = {}
    if {"foreach", "fused"}.isdisjoint(keywords):
        if allow_fused and "fused" in accepted:
            options["fused"] = True
        elif "foreach" in accepted:
            options["foreach"] = True
    return optimizer_factory(params=groups, **options)


class WarmupSchedule(LambdaLR):
    """Linear warmup from 0 to each group's lr over `warmup_steps`, then `schedule`: linear or cosine decay
    to 0 at `total_steps`, or constant.

    Up to the end of the warm-up no factor depends on `total_steps`, so it may be moved then (a time budget
    re-planned from the run's own pace, bertlab.training.run.budget) and the schedule is the one a run with the
    new total from the start has. The total is the run config's `trainer.max_steps`, so a checkpoint does
    not carry it."""

    def __init__(self, optimizer: torch.optim.Optimizer, total_steps: int, warmup_steps: int, schedule: str):
        self.total_steps, self.warmup_steps, self.schedule = total_steps, warmup_steps, schedule
        super().__init__(optimizer, self.factor)

    def factor(self, step: int) -> float:
        if step < self.warmup_steps:
            return step / self.warmup_steps
        if self.schedule == "constant":
            return 1.0
        progress = min(1.0, (step - self.warmup_steps) / max(1, self.total_steps - self.warmup_steps))
        if self.schedule == "linear":
            return 1.0 - progress
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    def state_dict(self) -> dict:
        return {key: value for key, value in super().state_dict().items() if key != "total_steps"}


# The Trainer's estimate of a run's optimizer steps: infinite where neither trainer.max_steps nor max_epochs ends it.
TotalSteps = Annotated[float, Interval("[1, inf)", says="a known number of training steps, at least 1 (set "
                                                        "trainer.max_steps or trainer.max_epochs)")]


@checks_arguments
def warmup_schedule(optimizer: torch.optim.Optimizer, total_steps: TotalSteps,
                    warmup_steps: Annotated[int, NON_NEGATIVE] | None = None, warmup_ratio: Probability = 0.0,
                    schedule: Annotated[str, OneOf(*SCHEDULES)] = "linear") -> WarmupSchedule:
    """The WarmupSchedule of `schedule` over `total_steps`, warming up for `warmup_steps` (or `warmup_ratio`
    of `total_steps`)."""
    total_steps = int(total_steps)
    if warmup_steps is None:
        warmup_steps = round(warmup_ratio * total_steps)
    return WarmupSchedule(optimizer, total_steps, warmup_steps, schedule)


def configure_optimization(module: L.LightningModule,
                           optimizer_factory: Callable[..., torch.optim.Optimizer] | None,
                           scheduler_factory: Callable[..., torch.optim.lr_scheduler.LRScheduler] | None,
                           layerwise_lr_decay: float | None = None, trained: nn.Module | None = None) -> dict:
    """What `LightningModule.configure_optimizers` returns: the optimizer over `trained` (by default
    `module.model`) and, when configured, the schedule stepped every optimizer step over the Trainer's
    total steps."""
    if optimizer_factory is None:
        raise ConfigError(f"{type(module).__name__} was built without an optimizer, so it cannot train; "
                          f"configure one (e.g. _target_: torch.optim.AdamW, _partial_: true, lr: 1e-4)")
    trainer = module.trainer
    # Fused optimizers unscale fp16 gradients themselves, so they cannot be clipped before their step.
    allow_fused = not (trainer.gradient_clip_val and _grad_scaler(trainer) is not None)
    optimizer = build_optimizer(optimizer_factory, module.model if trained is None else trained, layerwise_lr_decay,
                                allow_fused)
    if scheduler_factory is None:
        return {"optimizer": optimizer}
    scheduler = scheduler_factory(optimizer, total_steps=trainer.estimated_stepping_batches)
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def _grad_scaler(trainer: L.Trainer) -> torch.amp.GradScaler | None:
    plugin = trainer.precision_plugin
    return plugin.scaler if isinstance(plugin, MixedPrecision) else None


class ClipsWithFusedOptimizers(L.LightningModule):
    """Gradient clipping that also works with fused optimizers under bf16-mixed.

    Lightning refuses to clip for any fused optimizer under mixed precision, because with fp16 the
    optimizer unscales the gradients inside its step, after clipping would have run. bf16 has no
    GradScaler, so its gradients are clipped as under fp32; the fused AdamW step is ~6x faster on CPU
    than the foreach one it would otherwise fall back to.
    """

    def configure_gradient_clipping(self, optimizer: torch.optim.Optimizer, gradient_clip_val=None,
                                    gradient_clip_algorithm=None) -> None:
        plugin = self.trainer.precision_plugin
        if gradient_clip_val and isinstance(plugin, MixedPrecision) and plugin.scaler is None:
            algorithm = GradClipAlgorithmType((gradient_clip_algorithm or "norm").lower())
            Precision.clip_gradients(plugin, optimizer, gradient_clip_val, algorithm)
        else:
            super().configure_gradient_clipping(optimizer, gradient_clip_val, gradient_clip_algorithm)
