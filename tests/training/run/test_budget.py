"""budget_minutes (bertlab.training.run.budget): the rule that turns a calibration into trainer.max_steps; a
budgeted run records the steps in config.yaml, and that config repeats it bit for bit; a resumed run
keeps the steps without calibrating; bad values are one line."""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from bertlab.training.run import trial
from bertlab.training.run.budget import Calibration, affordable_steps, replanned_steps
from tests.bertlab_runs import fine_tuning, pretraining, run_in_process, sentiment_tokenizer, sha256
from tests.training.fake_clocks import FakeClock, never_read

# ~12 batches per epoch, a validation and a checkpoint every 4 steps, every checkpoint kept (to resume from one).
SCHEDULE = ["+data.max_train_lines=40", "trainer.val_check_interval=4", "callbacks.artifacts=null",
            "callbacks.checkpoint.save_top_k=-1"]
BUDGET = "budget_minutes=0.05"


def recorded(run_dir: Path) -> tuple[int, int, float | None]:
    """trainer.max_steps, trainer.max_epochs and budget_minutes of the run's config.yaml."""
    config = OmegaConf.load(run_dir / "config.yaml")
    return config.trainer.max_steps, config.trainer.max_epochs, config.budget_minutes


@pytest.fixture(scope="module")
def runs(tiny_data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """"budgeted" (budget_minutes, a fake clock), "fixed" (its config.yaml's max_steps, no budget) and
    "forked" (budget_minutes again, resumed from the budgeted run's step=8.ckpt, a clock that must not be read)."""
    root = tmp_path_factory.mktemp("budget")

    def args(name: str, *overrides: str) -> list[str]:
        return pretraining(tiny_data_dir, root / "cache", root / name, *SCHEDULE, "seed=3", *overrides)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(trial, "clock", FakeClock(0.08))
        assert run_in_process(args("budgeted", BUDGET)).code == 0
        steps, epochs, _ = recorded(root / "budgeted")
        patch.setattr(trial, "clock", never_read)
        assert run_in_process(args("fixed", f"trainer.max_steps={steps}", f"trainer.max_epochs={epochs}")).code == 0
        checkpoint = root / "budgeted" / "lightning_checkpoints" / "step=8.ckpt"
        assert run_in_process(args("forked", BUDGET, f"resume='{checkpoint}'")).code == 0
    return {name: root / name for name in ("budgeted", "fixed", "forked")}


@pytest.fixture(scope="module")
def replanned(tiny_data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """"replanned" (a budget whose warm-up, half the calibrated steps, is long enough to re-plan at its end),
    "replayed" (its config.yaml's max_steps and warm-up, no budget) and "resumed" (the budget again, resumed from
    a checkpoint written before the re-plan, a clock that must not be read)."""
    root = tmp_path_factory.mktemp("replan")

    def args(name: str, *overrides: str) -> list[str]:
        return pretraining(tiny_data_dir, root / "cache", root / name, *SCHEDULE, "seed=3", *overrides)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(trial, "clock", FakeClock(0.08))
        assert run_in_process(args("replanned", "budget_minutes=0.1", "scheduler.warmup_ratio=0.5")).code == 0
        config = OmegaConf.load(root / "replanned" / "config.yaml")
        patch.setattr(trial, "clock", never_read)
        assert run_in_process(args("replayed", f"trainer.max_steps={config.trainer.max_steps}", "trainer.max_epochs=-1",
                                   f"scheduler.warmup_steps={config.scheduler.warmup_steps}")).code == 0
        checkpoint = root / "replanned" / "lightning_checkpoints" / "step=8.ckpt"  # from before the re-plan
        assert run_in_process(args("resumed", "budget_minutes=0.1", "scheduler.warmup_ratio=0.5",
                                   f"resume='{checkpoint}'")).code == 0
    return {name: root / name for name in ("replanned", "replayed", "resumed")}


def calibration(step: float, validation: float, steps_per_validation: float) -> Calibration:
    return Calibration(step_seconds=step, startup_seconds=0.0, validation_seconds=validation,
                       steps_per_validation=steps_per_validation, elapsed_seconds=0.0)


@pytest.mark.parametrize("seconds, step, validation, every, steps", [
    (20.0, 0.125, 0.75, 4, 16 * 4),      # 4 steps (0.5 s) and a validation (0.75 s) per 1.25 s
    (20.5, 0.125, 0.75, 4, 16 * 4),      # a 65th step would need a validation of its own
    (20.875, 0.125, 0.75, 4, 16 * 4 + 1),
    (10.0, 0.125, 0.0, math.inf, 80),    # no validation: steps alone
    (10.0, 0.125, 2.0, math.inf, 64),    # only the one after the last step
    (0.5, 0.125, 1.0, 4, 0),             # not even one step and its validation
    (-3.0, 0.125, 0.0, math.inf, 0),     # the calibration took more than the budget
])
def test_the_rule_fits_steps_and_validations_into_the_seconds_left(seconds, step, validation, every, steps):
    assert affordable_steps(seconds, calibration(step, validation, every)) == steps


@pytest.mark.parametrize("step, steps", [
    (0.25, 100 + 32 * 4),   # slower than calibrated: 32 × (4 steps of 0.25 s and a validation of 1 s) in 64 s
    (0.125, 100 + 42 * 4),  # faster: the calibration's 0.125 s stands (a ceiling; the first minutes run fastest)
    (0.0625, 100 + 42 * 4),
])
def test_a_replan_takes_the_slower_of_the_warmups_pace_and_the_calibrations(step, steps):
    assert replanned_steps(100, 64.0, step, calibration(0.125, 1.0, 4)) == steps


@pytest.mark.slow
def test_a_budgeted_run_records_its_steps_and_that_config_repeats_it_bit_for_bit(runs):
    steps, epochs, minutes = recorded(runs["budgeted"])
    assert steps > 8 and epochs == -1 and minutes is None
    assert f"budget_minutes=0.05: trainer.max_steps={steps} at " in (runs["budgeted"] / "mlm_tiny.log").read_text()
    assert recorded(runs["fixed"]) == (steps, epochs, None)
    assert sha256(runs["fixed"] / "hf_model" / "model.safetensors") == sha256(
        runs["budgeted"] / "hf_model" / "model.safetensors")


@pytest.mark.slow
def test_a_budgeted_run_replans_at_the_end_of_its_warmup_and_its_config_repeats_it_bit_for_bit(replanned):
    log = (replanned["replanned"] / "mlm_tiny.log").read_text()
    calibrated = int(re.search(r"budget_minutes=0.1: trainer.max_steps=(\d+) at ", log)[1])
    steps = int(re.search(rf"budget_minutes: the warm-up's steps ran at .* trainer.max_steps {calibrated} → (\d+)",
                          log)[1])
    config = OmegaConf.load(replanned["replanned"] / "config.yaml")
    assert steps != calibrated and config.trainer.max_steps == steps
    assert config.scheduler.warmup_steps == round(0.5 * calibrated), "the warm-up the run had, not half the new total"
    assert len(pd.read_csv(replanned["replanned"] / "metrics.csv")["lr-AdamW/decay"].dropna()) > 0
    for other in ("replayed", "resumed"):
        assert sha256(replanned[other] / "hf_model" / "model.safetensors") == sha256(
            replanned["replanned"] / "hf_model" / "model.safetensors"), other


@pytest.mark.slow
def test_a_resumed_budgeted_run_keeps_the_recorded_steps(runs):
    assert recorded(runs["forked"]) == recorded(runs["budgeted"])
    assert sha256(runs["forked"] / "hf_model" / "model.safetensors") == sha256(
        runs["budgeted"] / "hf_model" / "model.safetensors")


@pytest.mark.parametrize("overrides, expected", [
    (["budget_minutes=0"], "budget_minutes=0.0: must be in (0, inf)"),
    (["budget_minutes=-2"], "budget_minutes=-2.0: must be in (0, inf)"),
    (["budget_minutes=inf"], "budget_minutes=inf: must be in (0, inf)"),
    (["budget_minutes=abc"], "budget_minutes='abc': expected float or null, got str"),
    (["budget_minutes=5", "trainer.max_steps=100"],
     "trainer.max_steps=100 and budget_minutes=5.0: the budget chooses trainer.max_steps itself; drop one of the two"),
])
def test_bad_budgets_are_one_line(tiny_data_dir, tmp_path, capsys, overrides, expected):
    outcome = run_in_process(pretraining(tiny_data_dir, tmp_path / "cache", tmp_path / "run", *overrides), capsys)
    assert (outcome.code, outcome.error_lines) == (1, [f"bertlab: error: {expected}"]), outcome.err
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_fine_tune_trains_for_a_budget_too(tiny_data_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(trial, "clock", FakeClock(0.08))
    tokenizer = sentiment_tokenizer(tiny_data_dir, tmp_path / "tokenizer")
    outcome = run_in_process(fine_tuning(tiny_data_dir, tokenizer, tmp_path / "run", "budget_minutes=0.02"), capsys)
    assert outcome.code == 0, outcome.err
    steps, epochs, minutes = recorded(tmp_path / "run")
    assert steps > 0 and epochs == -1 and minutes is None  # the recipe's 2 epochs are replaced


def test_fine_tune_refuses_a_budget_beside_its_epochs(tiny_data_dir, tmp_path, capsys):
    argv = fine_tuning(tiny_data_dir, tmp_path / "tokenizer", tmp_path / "run", "budget_minutes=1",
                       "trainer.max_epochs=3")
    outcome = run_in_process(argv, capsys)
    assert outcome.error_lines == ["bertlab: error: trainer.max_epochs=3 and budget_minutes=1.0: the budget chooses "
                                   "trainer.max_steps itself; drop one of the two"], outcome.err


def test_a_budget_too_short_for_one_step_is_one_line(tiny_data_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(trial, "clock", FakeClock(0.08))
    outcome = run_in_process(pretraining(tiny_data_dir, tmp_path / "cache", tmp_path / "run", *SCHEDULE,
                                         "budget_minutes=0.01"), capsys)
    assert outcome.code == 1 and [line for line in outcome.error_lines if "error" in line] == [
        "bertlab: error: budget_minutes=0.01: too short to train after the calibration, which took 1.6 s of 0.6 s "
        "(0.024 s per step); raise budget_minutes"], outcome.err
    assert not (tmp_path / "run" / "config.yaml").exists() and not list((tmp_path / "run").glob(".trial-*"))


@pytest.mark.slow
def test_resuming_with_a_budget_needs_the_config_of_the_resumed_run(runs, tmp_path, capsys, tiny_data_dir):
    checkpoint = tmp_path / "loose" / "step=8.ckpt"
    checkpoint.parent.mkdir()
    shutil.copy(runs["budgeted"] / "lightning_checkpoints" / "step=8.ckpt", checkpoint)
    outcome = run_in_process(pretraining(tiny_data_dir, tmp_path / "cache", tmp_path / "run", *SCHEDULE, BUDGET,
                                         f"resume='{checkpoint}'"), capsys)
    assert outcome.error_lines == [f"bertlab: error: budget_minutes with resume: {tmp_path}/config.yaml, which records "
                                   f"the steps the budget chose, is missing or has no trainer.max_steps; resume with "
                                   f"trainer.max_steps=N instead of budget_minutes"], outcome.err
