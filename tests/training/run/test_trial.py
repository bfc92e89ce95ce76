"""A trial (bertlab.training.run.trial): what it times on a fake clock that only the work moves — a step, the
warm-up beyond its steps, a validation, a checkpoint write, the whole, each without the module's set-up — and
what it leaves as it was: the run's module, the global random generators and the run's folder. The runs that
calibrate on a trial: tests/training/run/test_budget.py and test_precision.py."""

from __future__ import annotations

import copy
import math
import random
from types import SimpleNamespace

import lightning as L
import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from torch.utils.data import DataLoader, TensorDataset

from bertlab.lit.fine_tuning import FineTuningModule
from bertlab.lit.pretraining import PretrainingModule
from bertlab.training.run import trial
from tests.factories import small_config
from tests.training.fake_clocks import FakeClock

# Seconds the timed module's work moves the clock by.
SETUP, STARTUP, STEP, VALIDATION_BATCH, CHECKPOINT = 10.0, 1.5, 0.5, 3.0, 2.0
WARMUP_STEPS, TIMED_STEPS = 2, 4  # fewer than a real trial's: the clock is fake
VALIDATION_BATCHES = 2


class TimedRegression(L.LightningModule):
    """A linear regression whose work moves `trial.clock` by the seconds above: its set-up, the start of training,
    each step, each validation batch and each checkpoint it saves."""

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def setup(self, stage: str) -> None:
        trial.clock.time += SETUP

    def on_train_start(self) -> None:
        trial.clock.time += STARTUP

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        trial.clock.time += STEP
        features, targets = batch
        return torch.nn.functional.mse_loss(self.layer(features), targets)

    def validation_step(self, batch, batch_idx: int) -> None:
        trial.clock.time += VALIDATION_BATCH

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        trial.clock.time += CHECKPOINT

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


class RegressionData(L.LightningDataModule):
    """32 training rows a batch each, shuffled by torch's global generator; VALIDATION_BATCHES validation batches."""

    def __init__(self):
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.rows = TensorDataset(torch.randn(32, 4, generator=generator), torch.randn(32, 1, generator=generator))

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.rows, batch_size=1, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.rows, batch_size=len(self.rows) // VALIDATION_BATCHES)


# The run's trainer group: a validation at each epoch's end, which a trial's arguments override.
TRAINER = OmegaConf.create({"_target_": "lightning.pytorch.Trainer", "accelerator": "cpu", "devices": 1,
                            "val_check_interval": 1.0})


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    """trial's clock, moved only by the work of TimedRegression."""
    monkeypatch.setattr(trial, "WARMUP_STEPS", WARMUP_STEPS)
    monkeypatch.setattr(trial, "TIMED_STEPS", TIMED_STEPS)
    fake = FakeClock(0.0)
    monkeypatch.setattr(trial, "clock", fake)
    return fake


def test_a_trial_times_a_step_its_validation_and_a_checkpoint_without_the_modules_setup(clock, tmp_path):
    # Steps 1–2 warm up; a validation every 4 steps (the argument over the group's epoch end) runs after step 4,
    # inside the timed steps 3–6, and is left out of them; then a checkpoint, and the validation that answers
    # the stop.
    timing = trial.time_steps(TRAINER, TimedRegression(), RegressionData(), tmp_path, val_check_interval=4)
    validation = VALIDATION_BATCHES * VALIDATION_BATCH
    assert timing == trial.Timing(
        step_seconds=pytest.approx(STEP), startup_seconds=pytest.approx(STARTUP),
        validation_seconds=pytest.approx(validation), checkpoint_seconds=pytest.approx(CHECKPOINT),
        steps_per_validation=4,
        elapsed_seconds=pytest.approx(STARTUP + (WARMUP_STEPS + TIMED_STEPS) * STEP + 2 * validation + CHECKPOINT))


def test_a_trial_of_the_steps_alone_neither_validates_nor_writes_a_checkpoint(clock, tmp_path):
    timing = trial.time_steps(TRAINER, TimedRegression(), RegressionData(), tmp_path, steps_only=True)
    assert timing == trial.Timing(
        step_seconds=pytest.approx(STEP), startup_seconds=pytest.approx(STARTUP), validation_seconds=None,
        checkpoint_seconds=0.0, steps_per_validation=math.inf,
        elapsed_seconds=pytest.approx(STARTUP + (WARMUP_STEPS + TIMED_STEPS) * STEP))


def test_a_trial_leaves_the_runs_module_generators_and_folder_as_they_were(clock, tmp_path):
    module = TimedRegression()
    weights = {name: tensor.clone() for name, tensor in module.state_dict().items()}
    python, numpy, cpu = random.getstate(), np.random.get_state(), torch.get_rng_state()
    trial.time_steps(TRAINER, module, RegressionData(), tmp_path)
    assert clock.time > SETUP  # the trial trained (a copy)
    assert all(torch.equal(module.state_dict()[name], tensor) for name, tensor in weights.items())
    assert random.getstate() == python and torch.equal(torch.get_rng_state(), cpu)
    after = np.random.get_state()
    assert after[0] == numpy[0] and np.array_equal(after[1], numpy[1]) and after[2:] == numpy[2:]
    assert list(tmp_path.iterdir()) == []  # its scratch folder and checkpoint are gone


class FakeTrainer:
    """What TrialClock reads and calls of a Trainer; a checkpoint write takes CHECKPOINT seconds."""

    def __init__(self, clock: FakeClock):
        self.clock, self.global_step, self.should_stop, self.saved = clock, 0, False, []

    def save_checkpoint(self, path) -> None:
        self.saved.append(path)
        self.clock.time += CHECKPOINT


def test_the_clock_marks_each_step_once_leaves_validation_out_then_times_a_checkpoint_and_stops(clock, tmp_path):
    trainer, module = FakeTrainer(clock), SimpleNamespace(device=torch.device("cpu"))
    timer = trial.TrialClock(2, 4, tmp_path / "trial.ckpt")
    timer.setup(trainer, module, "fit")
    clock.time += SETUP
    timer.on_fit_start(trainer, module)

    def batch_end(global_step: int) -> None:  # a batch of STEP seconds, after which the trainer is at `global_step`
        clock.time += STEP
        trainer.global_step = global_step
        timer.on_train_batch_end(trainer, module, None, None, 0)

    def validation(seconds: float) -> None:
        timer.on_validation_start(trainer, module)
        clock.time += seconds
        timer.on_validation_end(trainer, module)

    for step in (0, 1, 1, 2):
        batch_end(step)
    assert timer.marks == [(SETUP + 4 * STEP, 0.0)] and not trainer.should_stop
    batch_end(2)  # the step's second micro-batch: no second mark
    validation(5.0)
    batch_end(3)
    batch_end(3)
    assert len(timer.marks) == 1 and trainer.saved == []
    batch_end(4)
    assert timer.marks == [(SETUP + 4 * STEP, 0.0), (SETUP + 8 * STEP + 5.0, 5.0)]
    assert trainer.saved == [tmp_path / "trial.ckpt"] and timer.checkpoint_seconds == CHECKPOINT
    assert trainer.should_stop
    batch_end(4)
    validation(3.0)  # the one that answers the stop
    assert len(timer.marks) == 2 and len(trainer.saved) == 1
    assert (timer.setup_seconds, timer.validation_seconds, timer.validating) == (SETUP, 3.0, 8.0)


def test_the_clock_without_a_checkpoint_path_stops_without_writing_one(clock):
    trainer, module = FakeTrainer(clock), SimpleNamespace(device=torch.device("cpu"))
    timer = trial.TrialClock(1, 2, None)
    for step in (1, 2):
        clock.time += STEP
        trainer.global_step = step
        timer.on_train_batch_end(trainer, module, None, None, 0)
    assert trainer.should_stop and trainer.saved == [] and timer.checkpoint_seconds == 0.0
    assert timer.validation_seconds is None  # no validation ran


@pytest.mark.parametrize("compiled", [True, False])
def test_the_independent_copy_has_weights_of_its_own_and_is_compiled_where_the_module_is(compiled):
    module = FineTuningModule(small_config(), compile=compiled)
    duplicate = trial.independent_copy(module)
    assert (duplicate.model._compiled_call_impl is not None) == compiled
    assert copy.deepcopy(module).model._compiled_call_impl is None  # what a plain copy would have lost
    original = module.model.classifier.weight.clone()
    with torch.no_grad():
        duplicate.model.classifier.weight.add_(1.0)
    assert torch.equal(module.model.classifier.weight, original)


def test_the_independent_copy_compiles_in_the_modules_compile_mode(monkeypatch):
    modes = []
    monkeypatch.setattr(torch.nn.Module, "compile", lambda self, **kwargs: modes.append(kwargs.get("mode")))
    module = PretrainingModule(small_config(), mask_token_id=3, special_token_ids=[0, 1, 2, 3], compile=True,
                               compile_mode="max-autotune")
    trial.independent_copy(module)
    assert modes == ["max-autotune", "max-autotune"]  # the module's model, then the copy's


def draws() -> tuple[float, float, float]:
    return random.random(), float(np.random.random()), torch.rand(1).item()


def test_the_generators_are_put_back_after_draws_inside():
    random.seed(0), np.random.seed(0), torch.manual_seed(0)
    expected = draws()
    random.seed(0), np.random.seed(0), torch.manual_seed(0)
    with trial.random_state_kept():
        inside = draws()
        draws()
    assert inside == expected and draws() == expected


def test_the_generators_are_put_back_when_the_trial_fails():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    with pytest.raises(RuntimeError, match="out of memory"), trial.random_state_kept():
        torch.rand(5)
        raise RuntimeError("out of memory")
    assert torch.equal(torch.rand(3), expected)
