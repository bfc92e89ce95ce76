"""How each system trains in the benchmark (bertlab.bench.training): the optimizer partial bertlab's modules take,
a fresh Trainer for warm-up + timed steps with gradients clipped, and transformers' plain loop (no weight decay on
1-D parameters, clipped gradients, only the last steps timed)."""

from __future__ import annotations

from functools import partial
from types import SimpleNamespace

import lightning as L
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

from bertlab.bench import training
from bertlab.bench.training import ADAMW, TransformersLoop, bertlab_optimizer, fit_steps


class Regression(nn.Module):
    """A linear model on normalised inputs, called as a transformers model is: `model(**batch).loss`."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(4)
        self.linear = nn.Linear(4, 1)

    def forward(self, inputs: torch.Tensor, targets: torch.Tensor) -> SimpleNamespace:
        return SimpleNamespace(loss=F.mse_loss(self.linear(self.norm(inputs)).squeeze(-1), targets))


def regression_batch() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return {"inputs": torch.randn(8, 4, generator=generator), "targets": torch.full((8,), 100.0)}


class SteepSum(L.LightningModule):
    """Loss 100 · sum(w) of four weights at 0: each gradient is (100, 100, 100, 100), of norm 200. Plain SGD at
    lr 1, so that a step moves w by exactly its (clipped) gradient."""

    def __init__(self) -> None:
        super().__init__()
        self.weights = nn.Parameter(torch.zeros(4))
        self.autocast_in_steps: list[bool] = []

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        self.autocast_in_steps.append(torch.is_autocast_enabled("cpu"))
        return 100 * self.weights.sum() + 0 * batch.sum()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=1.0)


class CountBatches(L.Callback):
    def __init__(self) -> None:
        self.batches = 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.batches += 1


def recording_loops(monkeypatch: pytest.MonkeyPatch, module) -> tuple[list[TransformersLoop], list[dict]]:
    """Replaces `module`'s TransformersLoop with one that records each loop built and each batch it steps on."""
    loops, batches = [], []

    class RecordingLoop(TransformersLoop):
        def __init__(self, *args) -> None:
            super().__init__(*args)
            loops.append(self)

        def step(self, batch) -> None:
            batches.append(batch)
            super().step(batch)

    monkeypatch.setattr(module, "TransformersLoop", RecordingLoop)
    return loops, batches


def test_bertlab_optimizer_adds_the_bench_settings_to_the_given_optimizers_own():
    parameters = [nn.Parameter(torch.zeros(2))]
    plain = bertlab_optimizer()(parameters)
    assert type(plain) is torch.optim.AdamW
    assert (plain.defaults["lr"], plain.defaults["weight_decay"]) == (ADAMW["lr"], ADAMW["weight_decay"])
    sgd = bertlab_optimizer(partial(torch.optim.SGD, momentum=0.9))(parameters)
    assert type(sgd) is torch.optim.SGD
    assert (sgd.defaults["momentum"], sgd.defaults["lr"], sgd.defaults["weight_decay"]) == (
        0.9, ADAMW["lr"], ADAMW["weight_decay"])


@pytest.mark.parametrize("precision, autocast", [("fp32", False), ("bf16", True)])
def test_fit_steps_trains_warm_up_plus_timed_batches_with_gradients_clipped_to_norm_one(precision, autocast):
    module, counter = SteepSum(), CountBatches()
    clock = fit_steps(module, torch.device("cpu"), precision, steps=2, warmup=1, callbacks=(counter,),
                      train_dataloaders=DataLoader([torch.zeros(1)] * 8, batch_size=None))
    assert counter.batches == clock.batches == 3
    assert clock.seconds > 0  # from the end of the warm-up batch to the end of the last
    # Each of the 3 steps moves every weight by its clipped gradient, 100 / 200 = 0.5: unclipped it would be 100.
    assert module.weights.detach().tolist() == pytest.approx([-1.5] * 4)
    assert module.autocast_in_steps == [autocast] * 3


def test_transformers_loop_trains_the_model_with_no_weight_decay_on_one_dimensional_parameters():
    model = Regression().eval()
    loop = TransformersLoop(model, torch.device("cpu"), "fp32")
    assert loop.model is model and model.training
    decays = {id(parameter): group["weight_decay"] for group in loop.optimizer.param_groups
              for parameter in group["params"]}
    assert decays == {id(model.linear.weight): ADAMW["weight_decay"], id(model.linear.bias): 0.0,
                      id(model.norm.weight): 0.0, id(model.norm.bias): 0.0}
    assert all(group["lr"] == ADAMW["lr"] and group["fused"] for group in loop.optimizer.param_groups)


def test_transformers_loop_steps_on_gradients_clipped_to_norm_one_then_clears_them():
    loop = TransformersLoop(Regression(), torch.device("cpu"), "fp32")
    before = [parameter.detach().clone() for parameter in loop.model.parameters()]
    norms_at_step = []
    step = loop.optimizer.step

    def recording_step(*args, **kwargs):
        norms_at_step.append(torch.linalg.vector_norm(
            torch.stack([torch.linalg.vector_norm(p.grad) for p in loop.model.parameters()])).item())
        return step(*args, **kwargs)

    loop.optimizer.step = recording_step
    batch = regression_batch()
    unclipped = torch.autograd.grad(loop.model(**batch).loss, list(loop.model.parameters()))
    assert torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in unclipped])) > 10
    loop.step(batch)
    assert norms_at_step == [pytest.approx(1.0)]
    assert all(parameter.grad is None for parameter in loop.model.parameters())
    assert all(not torch.equal(old, new) for old, new in zip(before, loop.model.parameters()))


def test_transformers_loop_times_only_the_steps_after_the_warm_up_with_their_batch_loading(monkeypatch):
    now, drawn, synchronised_after = [0.0], [], []
    monkeypatch.setattr(training, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    monkeypatch.setattr(training, "synchronize", lambda device: synchronised_after.append(len(drawn)))

    def next_batch():  # loading a batch takes one (fake) second
        drawn.append(now[0])
        now[0] += 1.0
        return regression_batch()

    loop = TransformersLoop(Regression(), torch.device("cpu"), "fp32")
    assert loop.run(next_batch, steps=3, warmup=2) == 3.0
    assert len(drawn) == 5
    assert synchronised_after == [2, 5]
