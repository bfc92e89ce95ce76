"""Parameter groups, the optimizer built from a Hydra partial, gradient clipping with fused AdamW, and
the warm-up schedules (bertlab.lit.optim)."""

from __future__ import annotations

import functools

import pytest
import torch

from bertlab.errors import ConfigError
from bertlab.lit.classification import ClassificationModule
from bertlab.lit.optim import build_optimizer, parameter_groups, warmup_schedule
from bertlab.model import BertForMaskedLM, BertForSequenceClassification
from tests.lit.helpers import adamw, classification_batch, loader, model_weights, small_config, trainer


pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # Lightning's hints about workers, logging


def test_parameter_groups_exclude_biases_and_layernorm_from_weight_decay():
    model = BertForSequenceClassification(small_config())
    groups = parameter_groups(model, weight_decay=0.01, lr=1e-3)
    by_name = {group["name"]: group for group in groups}
    assert set(by_name) == {"decay", "no_decay"}
    names = {id(param): name for name, param in model.named_parameters()}
    undecayed = {names[id(param)] for param in by_name["no_decay"]["params"]}
    assert by_name["no_decay"]["weight_decay"] == 0.0 and by_name["decay"]["weight_decay"] == 0.01
    assert all(name.endswith(".bias") or "LayerNorm" in name for name in undecayed)
    assert "bert.encoder.layer.1.output.LayerNorm.weight" in undecayed
    assert "classifier.bias" in undecayed and "classifier.weight" not in undecayed
    grouped = [id(param) for group in groups for param in group["params"]]
    assert sorted(grouped) == sorted(id(param) for param in model.parameters())


def test_layerwise_lr_decay_scales_each_layer_from_the_head_down():
    model = BertForSequenceClassification(small_config())
    groups = parameter_groups(model, weight_decay=0.01, lr=1.0, layerwise_lr_decay=0.5)
    lr_of = {id(param): group["lr"] for group in groups for param in group["params"]}
    expected = {"bert.embeddings.word_embeddings.weight": 0.125, "bert.embeddings.LayerNorm.bias": 0.125,
                "bert.encoder.layer.0.attention.self.query.weight": 0.25,
                "bert.encoder.layer.1.output.dense.bias": 0.5,
                "bert.pooler.dense.weight": 1.0, "classifier.weight": 1.0}
    params = dict(model.named_parameters())
    assert {name: lr_of[id(params[name])] for name in expected} == expected
    assert {group["name"] for group in groups} >= {"embeddings", "embeddings/no_decay", "layer_0", "head"}
    with pytest.raises(ConfigError, match="layerwise_lr_decay"):
        parameter_groups(model, 0.01, 1.0, layerwise_lr_decay=1.5)


def test_build_optimizer_reads_lr_and_weight_decay_from_the_partial():
    model = BertForMaskedLM(small_config())
    optimizer = build_optimizer(adamw(lr=2e-3, weight_decay=0.1), model)
    assert {(group["lr"], group["weight_decay"]) for group in optimizer.param_groups} == {(2e-3, 0.1), (2e-3, 0.0)}
    assert optimizer.defaults["fused"] is True
    assert build_optimizer(adamw(), model, allow_fused=False).defaults["foreach"] is True
    explicit = functools.partial(torch.optim.AdamW, lr=1e-3, foreach=False)
    assert not build_optimizer(explicit, model).defaults["fused"]
    with pytest.raises(ConfigError, match="optimizer.lr"):
        build_optimizer(functools.partial(torch.optim.AdamW, weight_decay=0.1), model)


@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_gradients_are_clipped_before_the_fused_adamw_step(tmp_path, precision):
    # Adam's update is ~lr whatever the gradient's scale, unless clipping shrinks the gradient far
    # below eps: then the weights barely move.
    module = ClassificationModule(config=small_config(), optimizer=adamw(weight_decay=0.0))
    before = model_weights(module)
    trainer(tmp_path, max_steps=2, precision=precision, gradient_clip_val=1e-12, limit_val_batches=0
            ).fit(module, loader([classification_batch()] * 2))
    assert module.trainer.optimizers[0].defaults["fused"] is True
    moved = max((after - before[name]).abs().max().item() for name, after in model_weights(module).items())
    assert 0 < moved < 1e-5


def _lr_curve(schedule: str, total: int = 20, moved_to: int | None = None, **kwargs) -> list[float]:
    """The learning rate at each step; with `moved_to`, the total becomes that at the end of the warm-up."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = warmup_schedule(optimizer, total_steps=total, schedule=schedule, **kwargs)
    curve = []
    for step in range((total if moved_to is None else moved_to) + 1):
        if step == scheduler.warmup_steps and moved_to is not None:
            scheduler.total_steps = moved_to
        curve.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return curve


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_schedule_warms_up_then_decays_to_zero(schedule):
    curve = _lr_curve(schedule, warmup_steps=5)
    assert curve[:6] == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    decay = curve[5:]
    assert all(a > b for a, b in zip(decay, decay[1:]))
    assert curve[20] == pytest.approx(0.0, abs=1e-12)
    assert curve[5 + 15 // 2] == pytest.approx(0.5, abs=0.06)  # half the peak halfway through the decay
    if schedule == "cosine":
        assert curve[6] > 1.0 - 1 / 15  # cosine starts flatter than linear


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
@pytest.mark.parametrize("moved_to", [12, 30])
def test_a_total_moved_at_the_end_of_the_warmup_is_the_schedule_of_that_total(schedule, moved_to):
    """What a time budget's re-plan does (bertlab.training.run.budget.Replan): the warm-up stays, the decay ends at the
    new total, as if the run had had it from the start."""
    assert _lr_curve(schedule, moved_to=moved_to, warmup_steps=5) == _lr_curve(schedule, moved_to, warmup_steps=5)


def test_a_checkpoint_of_the_schedule_does_not_carry_its_total():
    """The total is the run config's trainer.max_steps: a run resumed after a re-plan keeps the re-planned one."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    state = warmup_schedule(optimizer, total_steps=20, warmup_steps=5).state_dict()
    resumed = warmup_schedule(optimizer, total_steps=30, warmup_steps=5)
    resumed.load_state_dict(state)
    assert "total_steps" not in state and resumed.total_steps == 30 and resumed.warmup_steps == 5


def test_schedule_ratio_constant_and_invalid_settings():
    assert _lr_curve("constant", warmup_ratio=0.25)[:7] == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.0])
    assert _lr_curve("constant")[-1] == 1.0
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    with pytest.raises(ConfigError, match="max_steps"):
        warmup_schedule(optimizer, total_steps=float("inf"))


