"""trainer.precision=fastest (bertlab.training.run.precision): the candidate its trials find faster wins (each
one's best round, bf16-mixed by a margin) and config.yaml records it, that config repeats the run bit for bit,
a resumed run keeps it, a sweep's later jobs keep it and a budget calibrates in it; the decision is kept per
machine kind and shape and never timed again, however slow a later timing would be; without native bf16
nothing is timed; bad values are one line. The decisions file: the cache folder's order of places, a machine
kind that names what a step's speed depends on, a file that keeps the other decisions on a write and is replaced
whole."""

from __future__ import annotations

import json
import math
import shutil
from datetime import date
from pathlib import Path

import pytest
import torch
from omegaconf import DictConfig, OmegaConf

from bertlab.errors import ConfigError
from bertlab.training.run import precision, trial
from bertlab.training.run.precision import Decision
from tests.bertlab_runs import fine_tuning, pretraining, run_in_process, sentiment_tokenizer, sha256
from tests.training.fake_clocks import FakeClock, never_read

# ~8 batches per epoch, a validation and a checkpoint every 4 steps, every checkpoint kept (to resume from one).
SCHEDULE = ["+data.max_train_lines=40", "trainer.val_check_interval=4", "callbacks.artifacts=null",
            "callbacks.checkpoint.save_top_k=-1"]
FASTEST, BUDGET = "trainer.precision=fastest", "budget_minutes=0.05"
BF16_FASTER = {"32-true": 20.0, "bf16-mixed": 50.0}  # steps/s the trials measure
FP32_FASTER = {"32-true": 50.0, "bf16-mixed": 20.0}
ROUNDS = ["32-true", "bf16-mixed"] * precision.ROUNDS  # the trials, in order


def trials_measuring(patch: pytest.MonkeyPatch, rates: dict[str, float]) -> list[str]:
    """On a device with native bf16, every trial of the steps alone measures `rates[its precision]` steps/s
    (a budget's trial reads the clock of test_budget.py); returns the precisions of the trials as they run."""
    timed, time_steps = [], trial.time_steps

    def measuring(trainer, module, datamodule, run_dir, steps_only=False, **trainer_arguments):
        timed.append(trainer_arguments.get("precision", trainer.precision))
        # A trial of the steps alone reads the clock once per mark, TIMED_STEPS steps apart.
        patch.setattr(trial, "clock", FakeClock(trial.TIMED_STEPS / rates[timed[-1]] if steps_only else 0.08))
        return time_steps(trainer, module, datamodule, run_dir, steps_only, **trainer_arguments)

    patch.setattr(trial, "time_steps", measuring)
    patch.setattr(trial, "WARMUP_STEPS", 2)  # fewer steps than a real trial's: a fake clock times them
    patch.setattr(trial, "TIMED_STEPS", 4)
    patch.setattr(precision, "native_bf16", lambda device: True)
    return timed


@pytest.fixture(autouse=True)
def decisions_file(monkeypatch, tmp_path) -> Path:
    """Each test's runs decide anew, in a decisions file of their own."""
    monkeypatch.setenv("BERTLAB_CACHE_DIR", str(tmp_path / "bertlab_cache"))
    return tmp_path / "bertlab_cache" / "precision_decisions.json"


def recorded(run_dir: Path) -> tuple[str, int, float | None]:
    """trainer.precision, trainer.max_steps and budget_minutes of the run's config.yaml."""
    config = OmegaConf.load(run_dir / "config.yaml")
    return config.trainer.precision, config.trainer.max_steps, config.budget_minutes


@pytest.fixture(scope="module")
def runs(tiny_data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """"chosen" (fastest and a budget, bf16-mixed timed faster), "fixed" (the precision and steps of its
    config.yaml) and "resumed" (fastest and the budget again, from the chosen run's step=8.ckpt, no clock)."""
    root = tmp_path_factory.mktemp("precision")

    def args(name: str, *overrides: str) -> list[str]:
        return pretraining(tiny_data_dir, root / "cache", root / name, *SCHEDULE, "seed=3", *overrides)

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BERTLAB_CACHE_DIR", str(root / "bertlab_cache"))
        timed = trials_measuring(patch, BF16_FASTER)
        assert run_in_process(args("chosen", FASTEST, BUDGET)).code == 0
        assert timed == ROUNDS + ["bf16-mixed"]  # the candidates in turn, then the budget in the chosen one
        chosen, steps, _ = recorded(root / "chosen")
        patch.setattr(trial, "clock", never_read)
        fixed = run_in_process(args("fixed", f"trainer.precision={chosen}", f"trainer.max_steps={steps}",
                                     "trainer.max_epochs=-1"))
        assert fixed.code == 0
        checkpoint = root / "chosen" / "lightning_checkpoints" / "step=8.ckpt"
        assert run_in_process(args("resumed", FASTEST, BUDGET, f"resume='{checkpoint}'")).code == 0
        assert timed == ROUNDS + ["bf16-mixed"]
    return {name: root / name for name in ("chosen", "fixed", "resumed")}


@pytest.mark.slow
def test_the_faster_candidate_wins_and_config_yaml_records_it(runs):
    chosen, steps, minutes = recorded(runs["chosen"])
    assert chosen == "bf16-mixed" and steps > 8 and minutes is None
    log = (runs["chosen"] / "mlm_tiny.log").read_text()
    decisions = runs["chosen"].parent / "bertlab_cache" / "precision_decisions.json"
    line = ("trainer.precision=fastest: bf16-mixed (timed now for this machine kind and shape: 32-true 20 steps/s, "
            f"bf16-mixed 50; kept in {decisions})")
    assert log.index(line) < log.index(f"budget_minutes=0.05: trainer.max_steps={steps} at ")
    # The budget's re-plan rewrote config.yaml: the comment that says where the precision came from stays.
    assert (runs["chosen"] / "config.yaml").read_text().startswith(f"# {line}\n")


@pytest.mark.slow
def test_the_recorded_config_repeats_the_run_bit_for_bit(runs):
    assert recorded(runs["fixed"]) == ("bf16-mixed", recorded(runs["chosen"])[1], None)
    assert sha256(runs["fixed"] / "hf_model" / "model.safetensors") == sha256(
        runs["chosen"] / "hf_model" / "model.safetensors")


@pytest.mark.slow
def test_a_resumed_run_keeps_the_recorded_precision(runs):
    assert recorded(runs["resumed"]) == recorded(runs["chosen"])
    assert ("trainer.precision=fastest: resuming, keeping trainer.precision=bf16-mixed of the resumed run"
            in (runs["resumed"] / "mlm_tiny.log").read_text())
    assert sha256(runs["resumed"] / "hf_model" / "model.safetensors") == sha256(
        runs["chosen"] / "hf_model" / "model.safetensors")


@pytest.mark.slow
def test_fine_tune_chooses_too(tiny_data_dir, tmp_path, capsys, monkeypatch):
    timed = trials_measuring(monkeypatch, FP32_FASTER)
    tokenizer = sentiment_tokenizer(tiny_data_dir, tmp_path / "tokenizer")
    outcome = run_in_process(fine_tuning(tiny_data_dir, tokenizer, tmp_path / "run", "+data.limit_train_samples=16",
                                         FASTEST), capsys)
    assert outcome.code == 0, outcome.err
    assert timed == ROUNDS
    assert OmegaConf.load(tmp_path / "run" / "config.yaml").trainer.precision == "32-true"
    log = (tmp_path / "run" / "sst2.log").read_text()
    assert "trainer.precision=fastest: 32-true (timed now for this machine kind and shape: 32-true 50 steps/s, " \
           "bf16-mixed 20; kept in " in log


@pytest.mark.parametrize(("rounds", "expected"), [
    # 32-true's first trial is the fastest of all, bf16-mixed's best is faster than 32-true's best
    ([(10.0, 8.0), (14.0, 9.0), (14.0, 9.0)], "bf16-mixed"),
    # bf16-mixed 4% faster at best: within the margin, 32-true
    ([(10.0, 9.6), (10.0, 9.6), (10.0, 9.6)], "32-true"),
    ([(20.0, 10.0), (20.0, 10.0), (20.0, 10.0)], "bf16-mixed"),
])
def test_the_choice_takes_each_candidates_best_round_and_a_margin(monkeypatch, rounds, expected):
    """Milliseconds a step, (32-true, bf16-mixed) per round."""
    measured = iter(milliseconds for pair in rounds for milliseconds in pair)
    asked = []

    def time_steps(trainer, module, datamodule, run_dir, steps_only=False, precision=None):
        asked.append(precision)
        return trial.Timing(next(measured) / 1000, 0.0, None, 0.0, math.inf, 0.0)

    monkeypatch.setattr(trial, "time_steps", time_steps)
    monkeypatch.setattr(precision, "native_bf16", lambda device: True)
    cfg = OmegaConf.create({"trainer": {"precision": "fastest"}})
    choose(cfg)
    assert (cfg.trainer.precision, asked) == (expected, ROUNDS)


def trials_taking(monkeypatch, milliseconds: dict[str, float]) -> list[str]:
    """Every trial takes `milliseconds[its precision]` a step on a device with native bf16; returns the
    precisions of the trials as they run."""
    asked = []

    def time_steps(trainer, module, datamodule, run_dir, steps_only=False, precision=None):
        asked.append(precision)
        return trial.Timing(milliseconds[precision] / 1000, 0.0, None, 0.0, math.inf, 0.0)

    monkeypatch.setattr(trial, "time_steps", time_steps)
    monkeypatch.setattr(precision, "native_bf16", lambda device: True)
    return asked


def choose(cfg: DictConfig) -> str:
    """precision.choose for the groups of `cfg` on the CPU, as a run does (bertlab.training.run.fit); the log's line."""
    shape = precision.what_is_timed(cfg.get("model"), cfg.get("data"), cfg.get("task"), cfg.trainer)
    return precision.choose(cfg.trainer, shape, torch.device("cpu"), None, None, Path("."), checkpoint=None)


def chosen(config: dict) -> tuple[str, str]:
    """The precision `fastest` chooses for `config` (given model and data groups) and the log's line."""
    cfg = OmegaConf.create({"trainer": {"precision": "fastest"}, **config})
    line = choose(cfg)
    return cfg.trainer.precision, line


TINY = {"model": {"hidden_size": 128}, "data": {"batch_size": 32, "seed": "${seed}"}, "seed": 0}


def test_the_decision_holds_however_slow_a_later_timing_would_be(monkeypatch, decisions_file):
    asked = trials_taking(monkeypatch, {"32-true": 10.0, "bf16-mixed": 5.0})
    assert chosen(TINY) == ("bf16-mixed", "trainer.precision=fastest: bf16-mixed (timed now for this machine kind "
                            f"and shape: 32-true 100 steps/s, bf16-mixed 200; kept in {decisions_file})")
    asked.clear()
    trials_taking(monkeypatch, {"32-true": 10.0, "bf16-mixed": 50.0})  # a busy machine: bf16-mixed 10x slower
    again = chosen({**TINY, "seed": 7})  # another seed: the same shape
    assert again == ("bf16-mixed", f"trainer.precision=fastest: bf16-mixed (decided {date.today().isoformat()} for "
                     f"this machine kind and shape: 32-true 100 steps/s, bf16-mixed 200; from {decisions_file})")
    assert asked == []


def test_other_shapes_and_machine_kinds_decide_separately(monkeypatch, decisions_file):
    first = trials_taking(monkeypatch, {"32-true": 10.0, "bf16-mixed": 5.0})
    assert chosen(TINY)[0] == "bf16-mixed"
    later = trials_taking(monkeypatch, {"32-true": 5.0, "bf16-mixed": 10.0})
    assert chosen({**TINY, "model": {"hidden_size": 256}})[0] == "32-true"
    monkeypatch.setattr(precision, "machine_kind", lambda device: "CPU other, 8 threads, torch 2.13.0")
    assert chosen(TINY)[0] == "32-true"
    assert (first, later) == (ROUNDS, ROUNDS * 2)
    assert len(json.loads(decisions_file.read_text())) == 3


def test_a_corrupt_decisions_file_is_one_line_naming_it(monkeypatch, decisions_file):
    asked = trials_taking(monkeypatch, {"32-true": 10.0, "bf16-mixed": 5.0})
    decisions_file.parent.mkdir(parents=True)
    decisions_file.write_text('{"half written": ')
    with pytest.raises(ConfigError, match=f"^trainer.precision=fastest: {decisions_file} is not a precision "
                                          "decisions file .*; delete it to time the precisions anew, or set "
                                          "trainer.precision=32-true or bf16-mixed$"):
        chosen(TINY)
    assert asked == [] and decisions_file.read_text() == '{"half written": '


@pytest.mark.slow
def test_a_sweeps_later_seeds_keep_the_first_choice(tiny_data_dir, tmp_path, capsys, monkeypatch,
                                                     decisions_file):
    timed = trials_measuring(monkeypatch, FP32_FASTER)
    tokenizer = sentiment_tokenizer(tiny_data_dir, tmp_path / "tokenizer")
    outcome = run_in_process(fine_tuning(tiny_data_dir, tokenizer, tmp_path / "sweep", "+data.limit_train_samples=16",
                                         FASTEST, "hydra.sweep.dir=" + str(tmp_path / "sweep"), "-m",
                                         "seed=0,1", "optimizer.lr=1e-3,3e-4"), capsys)
    assert outcome.code == 0, outcome.err
    assert timed == ROUNDS  # timed once for the four jobs
    logs = sorted((tmp_path / "sweep").glob("*/sst2.log"))
    assert [OmegaConf.load(log.parent / "config.yaml").trainer.precision for log in logs] == ["32-true"] * 4
    assert (f"trainer.precision=fastest: 32-true (decided {date.today().isoformat()} for this machine kind and shape: "
            f"32-true 50 steps/s, bf16-mixed 20; from {decisions_file})") in logs[-1].read_text()
    other_data = run_in_process(fine_tuning(tiny_data_dir, tokenizer, tmp_path / "other", "+data.limit_train_samples=8",
                                            FASTEST), capsys)
    assert other_data.code == 0, other_data.err
    assert timed == ROUNDS * 2  # other data: timed anew


@pytest.mark.slow
def test_without_native_bf16_32_true_is_chosen_untimed(tiny_data_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(precision, "native_bf16", lambda device: False)
    monkeypatch.setattr(trial, "clock", never_read)
    outcome = run_in_process(pretraining(tiny_data_dir, tmp_path / "cache", tmp_path / "run", "trainer.max_steps=2",
                                         FASTEST), capsys)
    assert outcome.code == 0, outcome.err
    assert OmegaConf.load(tmp_path / "run" / "config.yaml").trainer.precision == "32-true"
    assert ("trainer.precision=fastest: 32-true (no native bf16 on this cpu, nothing to time)"
            in (tmp_path / "run" / "mlm_tiny.log").read_text())


@pytest.mark.parametrize("value", ["fast", "fastest-true"])
def test_bad_precisions_are_one_line(tiny_data_dir, tmp_path, capsys, value):
    outcome = run_in_process(pretraining(tiny_data_dir, tmp_path / "cache", tmp_path / "run",
                                         f"trainer.precision={value}"), capsys)
    assert (outcome.code, outcome.error_lines) == (1, [
        f"bertlab: error: trainer.precision='{value}': must be one of 32-true, 32, 32, 64-true, 64, 64, bf16-mixed, "
        f"bf16, bf16-true, 16-mixed, 16, 16, 16-true, transformer-engine, fastest"]), outcome.err
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_resuming_fastest_needs_the_config_of_the_resumed_run(runs, tmp_path, capsys, tiny_data_dir):
    checkpoint = tmp_path / "loose" / "step=8.ckpt"
    checkpoint.parent.mkdir()
    shutil.copy(runs["chosen"] / "lightning_checkpoints" / "step=8.ckpt", checkpoint)
    outcome = run_in_process(pretraining(tiny_data_dir, tmp_path / "cache", tmp_path / "run", *SCHEDULE, FASTEST,
                                         f"resume='{checkpoint}'"), capsys)
    assert outcome.error_lines == [
        f"bertlab: error: trainer.precision=fastest with resume: {tmp_path}/config.yaml, which records the precision "
        f"the run chose, is missing or has no trainer.precision; resume with trainer.precision=32-true or bf16-mixed "
        f"instead of fastest"], outcome.err


def test_a_corrupt_decisions_file_stops_the_command_in_one_line(tiny_data_dir, tmp_path, capsys, monkeypatch,
                                                                decisions_file):
    monkeypatch.setattr(precision, "native_bf16", lambda device: True)
    monkeypatch.setattr(trial, "clock", never_read)
    decisions_file.parent.mkdir(parents=True)
    decisions_file.write_text("[1, 2")
    outcome = run_in_process(pretraining(tiny_data_dir, tmp_path / "cache", tmp_path / "run", "trainer.max_steps=2",
                                         FASTEST), capsys)
    errors = [line for line in outcome.error_lines if line.startswith("bertlab: error:")]
    assert outcome.code == 1 and len(errors) == 1 and "Traceback" not in outcome.err, outcome.err
    assert errors[0].startswith(f"bertlab: error: trainer.precision=fastest: {decisions_file} is not a "
                                             f"precision decisions file (")
    assert decisions_file.read_text() == "[1, 2"


DECISION = Decision("bf16-mixed", "2026-12-05", {"32-true": 146.0, "bf16-mixed": 151.0}, "CPU x")


def test_the_cache_folder_is_bertlab_cache_dir_else_xdg_else_home(monkeypatch, tmp_path):
    monkeypatch.setenv("BERTLAB_CACHE_DIR", str(tmp_path / "own"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert precision.decisions_file() == tmp_path / "own" / "precision_decisions.json"
    monkeypatch.delenv("BERTLAB_CACHE_DIR")
    assert precision.cache_folder() == tmp_path / "xdg" / "bertlab"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert precision.cache_folder() == tmp_path / "home" / ".cache" / "bertlab"


def test_a_cpus_kind_names_its_bf16_support_threads_and_torch(monkeypatch):
    capabilities = {"cpu_name": "Some EPYC", "avx512_bf16": True, "amx_tile": False, "architecture": "x86_64"}
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: capabilities)
    kind = precision.machine_kind(torch.device("cpu"))
    assert kind == (f"CPU Some EPYC, native bf16 yes, AMX no, {torch.get_num_threads()} threads, "
                    f"torch {torch.__version__}")
    capabilities["avx512_bf16"] = False
    assert precision.cpu_has_native_bf16() is False
    assert precision.machine_kind(torch.device("cpu")) != kind


def test_a_write_keeps_the_other_decisions_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "precision_decisions.json"
    precision.write(path, "a", DECISION)
    precision.write(path, "b", Decision("32-true", "2026-12-06", {"32-true": 9.0}, "CPU y"))
    assert precision.read(path) == {"a": DECISION, "b": Decision("32-true", "2026-12-06",
                                                                         {"32-true": 9.0}, "CPU y")}
    assert json.loads(path.read_text())["a"]["precision"] == "bf16-mixed"
    assert [file.name for file in tmp_path.iterdir()] == ["precision_decisions.json"]


def test_a_missing_file_holds_no_decisions(tmp_path):
    assert precision.read(tmp_path / "absent.json") == {}
