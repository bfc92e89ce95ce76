"""Seeded runs repeat bit for bit; a run killed with SIGKILL and resumed ends with the weights and
metrics.csv of a run never interrupted; checkpoints are pruned (written atomically: tests/lit/test_run_artifacts.py).
BERTLAB_KILL_MOMENTS=10 adds ten kill moments each of `train` and `fine-tune` in trainer.precision=fastest
(about 20 s a moment on 2 cores, so not in the suite by default)."""

from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from bertlab.training.run.run_folder import checkpoint_step
from tests.bertlab_runs import (FP32, fine_tuning, kill_moment, pretraining, run_in_process, sentiment_tokenizer,
                                sha256, start_child, wait_for_kill)

# ~12 batches per epoch: 22 steps cross two epoch boundaries; a validation and a checkpoint every 4 steps.
# Without metrics.png/json (slow to draw): resuming must not depend on them.
SCHEDULE = ["+data.max_train_lines=40", "trainer.max_steps=22", "trainer.val_check_interval=4",
            "callbacks.artifacts=null"]
THROUGHPUT = re.compile(r"per_sec|^(train|validate)/(time|batches|samples|lengths)$")


@pytest.fixture(scope="module")
def runs(tiny_data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Run folders: "first" and "again" (seed 0), "other_seed" (seed 1), "killed" (seed 0, SIGKILLed
    after its step-8 checkpoint, then resumed in place with resume=auto) and "forked" (resumed from
    the killed run's checkpoint file into a new folder with resume=<path>)."""
    root = tmp_path_factory.mktemp("reliability")
    cache = root / "cache"

    def args(name: str, *overrides: str) -> list[str]:
        return pretraining(tiny_data_dir, cache, root / name, *SCHEDULE, *overrides)

    outcome = run_in_process(args("first", "seed=0"))  # also fills the cache the others share
    assert outcome.code == 0, outcome.err
    child = start_child(args("killed", "seed=0", *kill_moment(step=8)), root / "killed.log")
    for name, seed in (("again", 0), ("other_seed", 1)):
        outcome = run_in_process(args(name, f"seed={seed}"))
        assert outcome.code == 0, outcome.err
    wait_for_kill(child, root / "killed.log")
    assert not (root / "killed" / "hf_model").exists()  # it never finished

    killed_checkpoint = root / "killed" / "lightning_checkpoints" / "last.ckpt"
    outcome = run_in_process(args("forked", "seed=0", f"resume={killed_checkpoint}"))
    assert outcome.code == 0, outcome.err
    outcome = run_in_process(args("killed", "seed=0", "resume=auto"))
    assert outcome.code == 0, outcome.err
    return {name: root / name for name in ("first", "again", "other_seed", "killed", "forked")}


def weights(run_dir: Path) -> str:
    return sha256(run_dir / "hf_model" / "model.safetensors")


def metrics(run_dir: Path) -> list[dict[str, str]]:
    """metrics.csv row by row, without the columns of the throughput monitor: wall-clock speeds
    and counts of this process's batches, which no rerun or resume can repeat."""
    with (run_dir / "metrics.csv").open(newline="") as handle:
        rows = [{key: value for key, value in row.items() if value and not THROUGHPUT.search(key)}
                for row in csv.DictReader(handle)]
    assert {"train/loss", "val/loss", "lr-AdamW/decay"} <= {key for row in rows for key in row}
    return rows


@pytest.mark.slow
def test_same_seed_gives_identical_weights_and_metrics(runs):
    assert weights(runs["first"]) == weights(runs["again"])
    assert metrics(runs["first"]) == metrics(runs["again"])
    assert "deterministic: true" in (runs["first"] / "config.yaml").read_text()


@pytest.mark.slow
def test_other_seed_gives_other_weights_and_metrics(runs):
    assert weights(runs["first"]) != weights(runs["other_seed"])
    assert metrics(runs["first"]) != metrics(runs["other_seed"])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["killed", "forked"])
def test_resumed_run_ends_bitwise_identical_to_an_uninterrupted_one(runs, name):
    assert weights(runs[name]) == weights(runs["first"])
    assert metrics(runs[name]) == metrics(runs["first"])
    uninterrupted = torch.load(runs["first"] / "lightning_checkpoints" / "last.ckpt", weights_only=True)
    resumed = torch.load(runs[name] / "lightning_checkpoints" / "last.ckpt", weights_only=True)
    assert resumed["global_step"] == uninterrupted["global_step"] == 22
    for key, value in uninterrupted["state_dict"].items():
        assert torch.equal(resumed["state_dict"][key], value), key
    for state, expected in zip(resumed["optimizer_states"][0]["state"].values(),
                               uninterrupted["optimizer_states"][0]["state"].values()):
        assert all(torch.equal(state[key], expected[key]) for key in expected)
    assert resumed["lr_schedulers"] == uninterrupted["lr_schedulers"]


@pytest.mark.slow
def test_checkpoints_every_validation_and_at_the_end_newest_two_kept(runs):
    checkpoints = runs["first"] / "lightning_checkpoints"
    # 22 is no multiple of the interval: the final step gets a validation (and a checkpoint) of its own.
    assert sorted(path.name for path in checkpoints.iterdir()) == ["last.ckpt", "step=20.ckpt", "step=22.ckpt"]
    assert torch.load(checkpoints / "last.ckpt", weights_only=True)["global_step"] == 22


@pytest.mark.slow
def test_a_run_on_copied_pairs_validates_on_both_sets_and_resumes_bit_for_bit(tiny_data_dir, tmp_path, capsys):
    schedule = ["+data.max_train_lines=40", "data.copy_pair_prob=1.0", "trainer.max_steps=6",
                "trainer.val_check_interval=2", "trainer.log_every_n_steps=1", "callbacks.checkpoint.save_top_k=-1"]
    first = tmp_path / "first"
    outcome = run_in_process(pretraining(tiny_data_dir, tmp_path / "cache", first, *schedule), capsys)
    assert outcome.code == 0, outcome.err
    assert "val_text/perplexity (held-out plain text): " in outcome.out
    halfway = first / "lightning_checkpoints" / "step=2.ckpt"
    forked = tmp_path / "forked"
    outcome = run_in_process(pretraining(tiny_data_dir, tmp_path / "cache", forked, *schedule, f"resume='{halfway}'"))
    assert outcome.code == 0, outcome.err

    rows = metrics(first)
    for name in ("loss", "perplexity", "accuracy"):
        assert [row["step"] for row in rows if f"val/{name}" in row] == ["1", "3", "5"]
        assert [row["step"] for row in rows if f"val_text/{name}" in row] == ["1", "3", "5"]
    assert all(row["val/loss"] != row["val_text/loss"] for row in rows if "val/loss" in row)
    summary = json.loads((first / "metrics.json").read_text())
    assert set(summary["validation_sets"]) == {"val", "val_text"} and "val_text/loss" in summary["best"]
    # The throughput monitor logs a validation's speeds at steps of its own (its batch count); rows of the
    # first validation with such a step past the checkpoint's are not handed back on resume, and hold nothing else.
    assert [row for row in metrics(forked) if set(row) != {"step"}] == [row for row in rows if set(row) != {"step"}]
    assert weights(forked) == weights(first)


# Kill moments: after the n-th checkpoint (a validation every 4 steps), at once or a little later; 30 steps leave
# 10 after the last moment, ~40 ms at the fastest pace seen (~250 steps/s), so a delayed kill still lands mid-run.
KILL_MOMENTS = [(checkpoints, delay) for checkpoints in range(1, 6) for delay in (0.0, 0.03)]
MOMENTS_ASKED = int(os.environ.get("BERTLAB_KILL_MOMENTS", "0"))


@pytest.mark.slow
@pytest.mark.skipif(MOMENTS_ASKED < 1, reason="set BERTLAB_KILL_MOMENTS=N (1-10) to kill and resume each command at "
                                               "N moments, about 20 s each on 2 cores")
@pytest.mark.parametrize("command", ["train", "fine-tune"])
@pytest.mark.parametrize(("checkpoints", "delay"), KILL_MOMENTS)
def test_killed_at_any_moment_and_resumed_in_fastest_the_run_ends_bit_for_bit(command, checkpoints, delay,
                                                                              tiny_data_dir, tmp_path_factory):
    """The issue's scenario: the recipes' trainer.precision=fastest, an uninterrupted run and one killed at
    this moment and resumed with resume=auto end with the same weights and metrics.csv."""
    if KILL_MOMENTS.index((checkpoints, delay)) >= MOMENTS_ASKED:
        pytest.skip(f"BERTLAB_KILL_MOMENTS={MOMENTS_ASKED} leaves this moment out")
    root = tmp_path_factory.getbasetemp() / f"kill_moments_{command}"
    max_steps, interval = 30, 4
    schedule = [f"trainer.max_steps={max_steps}", f"trainer.val_check_interval={interval}", "callbacks.artifacts=null"]

    def args(name: str, *overrides: str) -> list[str]:
        if command == "train":
            argv = pretraining(tiny_data_dir, root / "cache", root / name, "+data.max_train_lines=40", *schedule,
                               *overrides)
        else:
            tokenizer = root / "tokenizer"
            if not tokenizer.exists():
                sentiment_tokenizer(tiny_data_dir, tokenizer)
            argv = fine_tuning(tiny_data_dir, tokenizer, root / name, *schedule, *overrides)
        return ["trainer.precision=fastest" if item in FP32 else item for item in argv]

    first = root / "first"
    if not (first / "hf_model" / "model.safetensors").exists():
        outcome = run_in_process(args("first", "seed=0"))  # times the precisions once; every later run reads them
        assert outcome.code == 0, outcome.err
    killed = root / f"killed_{checkpoints}_{delay}"
    step = checkpoints * interval
    child = start_child(args(killed.name, "seed=0", *kill_moment(step, delay)), root / f"{killed.name}.log")
    wait_for_kill(child, root / f"{killed.name}.log")
    saved = checkpoint_step(killed / "lightning_checkpoints" / "last.ckpt")
    assert saved == step if delay == 0 else step <= saved < max_steps
    outcome = run_in_process(args(killed.name, "seed=0", "resume=auto"))
    assert outcome.code == 0, outcome.err
    precisions = [OmegaConf.load(run / "config.yaml").trainer.precision for run in (first, killed)]
    assert precisions[0] == precisions[1] != "fastest"
    assert weights(killed) == weights(first)
    assert metrics(killed) == metrics(first)
