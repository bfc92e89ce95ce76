"""How each system trains in the benchmark.

bertlab: its LightningModule under a Lightning Trainer, as `bertlab train`/`fine-tune` run it.
transformers: a plain loop with what `transformers.Trainer` (run_mlm.py, run_glue.py) does by
default: AdamW with `fused=True` (its default optimizer on torch >= 2.8), no weight decay on biases
and LayerNorm weights, gradient clipping at 1.0. Both use the same AdamW settings and no schedule.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

import lightning as L
import torch
from torch import nn

from bertlab.bench.clock import StepClock, autocast, synchronize
from bertlab.lit.optim import parameter_groups

ADAMW = {"lr": 1e-4, "weight_decay": 0.01}
MAX_GRAD_NORM = 1.0
PRECISIONS = {"fp32": ("32-true", torch.float32), "bf16": ("bf16-mixed", torch.bfloat16)}


def bertlab_optimizer(optimizer: partial | None = None) -> partial:
    """The optimizer partial the task modules take (conf/optimizer/adamw.yaml's form), with ADAMW's
    settings added to `optimizer`'s own keywords (plain AdamW when None)."""
    optimizer = optimizer or partial(torch.optim.AdamW)
    return partial(optimizer.func, **optimizer.keywords, **ADAMW)


def fit_steps(module: L.LightningModule, device: torch.device, precision: str, steps: int, warmup: int,
              callbacks: tuple[L.Callback, ...] = (), **fit_inputs) -> StepClock:
    """Trains `module` for warmup + steps batches in a fresh Trainer (with `callbacks` too); the clock of its
    last `steps`."""
    clock = StepClock(device, warmup)
    trainer = L.Trainer(accelerator=device.type, devices=1, precision=PRECISIONS[precision][0],
                        max_steps=warmup + steps, limit_val_batches=0, num_sanity_val_steps=0,
                        gradient_clip_val=MAX_GRAD_NORM, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=[clock, *callbacks])
    trainer.fit(module, **fit_inputs)
    return clock


class TransformersLoop:
    """`transformers.Trainer`'s inner loop over batches from `next_batch`, without a Trainer."""

    def __init__(self, model: nn.Module, device: torch.device, precision: str) -> None:
        self.model = model.to(device).train()
        self.device = device
        self.dtype = PRECISIONS[precision][1]
        groups = parameter_groups(self.model, ADAMW["weight_decay"], ADAMW["lr"])
        self.optimizer = torch.optim.AdamW(groups, fused=True)

    def step(self, batch: dict[str, torch.Tensor]) -> None:
        batch = {key: value.to(self.device, non_blocking=True) for key, value in batch.items()}
        with autocast(self.device, self.dtype):
            loss = self.model(**batch).loss
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), MAX_GRAD_NORM)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def run(self, next_batch: Callable[[], dict[str, torch.Tensor]], steps: int, warmup: int) -> float:
        """Seconds of the last `steps` of warmup + steps iterations (each loads its batch)."""
        for _ in range(warmup):
            self.step(next_batch())
        synchronize(self.device)
        start = time.perf_counter()
        for _ in range(steps):
            self.step(next_batch())
        synchronize(self.device)
        return time.perf_counter() - start
