"""`python -m bertlab glue`: the suite's jobs and folders, and a tiny 2-task × 2-seed suite through the command
line that skips its finished jobs when run again, and refuses to when they ran with other settings."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from bertlab.checkpoint.dispatch import read_config
from bertlab.commands.glue import OPTIONS, suite_launches, task_rates
from bertlab.model import BertForMaskedLM
from bertlab.tokenizer import save_tokenizer, train_tokenizer
from bertlab.training.suites.glue import GLUE_SEEDS
from bertlab.training.suites.glue_scores import glue_table
from tests.bertlab_runs import FP32, QUIET, run_in_process
from tests.factories import small_config


def test_the_suite_holds_rows_out_by_default_and_select_on_dev_gets_its_own_folder(tmp_path):
    checkpoint = tmp_path / "mlm_tiny" / "2026-11-25_03-07-47" / "hf_model"
    options = {**OPTIONS, "tasks": "rte"}
    (honest,) = suite_launches(checkpoint, options)
    (dev,) = suite_launches(checkpoint, {**options, "select_on": "dev"})
    assert "data.selection_fraction=0.05" in honest and not any("selection_fraction" in item for item in dev)
    assert "hydra.sweep.dir=${paths.output_dir}/glue/mlm_tiny/2026-11-25_03-07-47" in honest
    assert "hydra.sweep.dir=${paths.output_dir}/glue/mlm_tiny/2026-11-25_03-07-47_dev" in dev


# Two optimizer steps on a few rows (64, of which 5% = 3 are held out to select on): each job takes seconds.
TINY_JOBS = ["trainer.max_steps=2", "trainer.val_check_interval=2", "data.limit_train_samples=64",
             "data.limit_eval_samples=16", "data.max_seq_length=32", *FP32, *QUIET]


@pytest.fixture
def tiny_glue(tiny_data_dir: Path, tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    """A data folder with sst2/ and a small STS-B-like glue/stsb/, and a tiny masked-LM checkpoint."""
    data = tmp_path / "data"
    (data / "glue" / "stsb").mkdir(parents=True)
    (data / "sst2").symlink_to(tiny_data_dir / "sst2")
    sentences = pd.read_parquet(tiny_data_dir / "sst2" / "train.parquet")["sentence"].tolist()
    for split, rows in (("train", 64), ("validation", 16)):
        # Pairs that share no sentence: chained ones would be one unit that the selection split cannot split.
        pd.DataFrame({"sentence1": sentences[:rows], "sentence2": sentences[128:128 + rows],
                      "label": [float(i % 6) for i in range(rows)], "idx": range(rows)}).to_parquet(
            data / "glue" / "stsb" / f"{split}.parquet")
    tokenizer = train_tokenizer(sentences, vocab_size=60)
    checkpoint = tmp_path / "pretrained" / "hf_model"
    BertForMaskedLM(small_config(vocab_size=tokenizer.get_vocab_size(), num_hidden_layers=1, num_attention_heads=2)
                    ).save_pretrained(checkpoint)
    save_tokenizer(tokenizer, checkpoint)
    monkeypatch.setenv("BERTLAB_DATA_DIR", str(data))
    return checkpoint.parent, tmp_path / "suite"


@pytest.mark.slow
def test_a_suite_runs_every_task_and_seed_then_skips_them_when_run_again(tiny_glue, capsys):
    run, suite = tiny_glue
    argv = ["glue", str(run), "tasks=sst2,stsb", "seeds=0,1", *TINY_JOBS, f"hydra.sweep.dir={suite}"]
    outcome = run_in_process(argv, capsys)
    assert outcome.code == 0, outcome.err
    assert "GLUE job 4/4: stsb seed 1" in outcome.out
    rows, average = glue_table(suite)
    assert {(row["task"], row["metric"], row["seeds"]) for row in rows} == {
        ("sst2", "accuracy", 2), ("stsb", "pearson", 2), ("stsb", "spearman", 2)}
    assert f"**{average:.1f}**" in (suite / "glue.md").read_text()
    config = json.loads((suite / "stsb" / "seed_1" / "hf_model" / "config.json").read_text())
    assert config["num_labels"] == 1 and config["vocab_size"] == read_config(run / "hf_model").vocab_size
    assert OmegaConf.load(suite / "sst2" / "seed_0" / "config.yaml").data.selection_fraction == 0.05
    assert {"val/accuracy", "dev/accuracy"} <= set(pd.read_csv(suite / "sst2" / "seed_0" / "metrics.csv").columns)
    assert "dev-selected" in (suite / "glue.md").read_text() and (suite / GLUE_SEEDS).is_file()
    exported = {path: path.stat().st_mtime_ns for path in suite.glob("*/*/hf_model/model.safetensors")}

    again = run_in_process(argv, capsys)
    assert again.code == 0, again.err
    assert again.out.count("finished before, skipped") == 4
    assert {path: path.stat().st_mtime_ns for path in suite.glob("*/*/hf_model/model.safetensors")} == exported
    assert glue_table(suite) == (rows, average)

    recorded = (suite / "sst2" / "seed_0" / ".hydra" / "overrides.yaml").read_text()
    changed = run_in_process([*argv, "optimizer.weight_decay=0.1"], capsys)
    assert changed.code == 1 and changed.error_lines[-1].startswith(
        f"bertlab: error: {suite}/sst2/seed_0 finished before with optimizer.weight_decay=(not set), and this call "
        "sets optimizer.weight_decay=0.1: a suite's jobs share their settings")
    assert (suite / "sst2" / "seed_0" / ".hydra" / "overrides.yaml").read_text() == recorded
    assert {path: path.stat().st_mtime_ns for path in suite.glob("*/*/hf_model/model.safetensors")} == exported


@pytest.mark.slow
def test_a_learning_rate_grid_runs_each_rate_in_its_own_folder(tiny_glue, capsys):
    run, suite = tiny_glue
    outcome = run_in_process(["glue", str(run), "tasks=stsb", "seeds=0", "lrs=1e-3,2e-3", *TINY_JOBS,
                              f"hydra.sweep.dir={suite}"], capsys)
    assert outcome.code == 0, outcome.err
    assert "GLUE job 2/2: stsb seed 0, lr 0.002" in outcome.out
    for lr in (0.001, 0.002):
        assert OmegaConf.load(suite / "stsb" / f"lr_{lr}" / "seed_0" / "config.yaml").optimizer.lr == lr
    (row, _), _ = glue_table(suite)
    assert row["lr"] in (0.001, 0.002) and row["other lrs"].startswith(f"{0.003 - row['lr']:g}: ")
    summary = (suite / "summary.md").read_text()  # the sweep summary finds the jobs a level deeper
    assert "stsb/lr_0.001/seed_0" in summary and "stsb/lr_0.002/seed_0" in summary


@pytest.mark.slow
def test_a_task_of_its_own_rate_runs_in_the_same_suite(tiny_glue, capsys):
    run, suite = tiny_glue
    outcome = run_in_process(["glue", str(run), "tasks=sst2,stsb", "seeds=0", "lrs=stsb:2e-3,1e-3", *TINY_JOBS,
                              f"hydra.sweep.dir={suite}"], capsys)
    assert outcome.code == 0, outcome.err
    assert "GLUE job 1/2: sst2 seed 0, lr 0.001" in outcome.out and "GLUE job 2/2: stsb seed 0, lr 0.002" in outcome.out
    assert sorted(path.relative_to(suite).as_posix() for path in suite.glob("*/lr_*/seed_*")) == [
        "sst2/lr_0.001/seed_0", "stsb/lr_0.002/seed_0"]
    rows, _ = glue_table(suite)
    assert {(row["task"], row["lr"]) for row in rows} == {("sst2", 0.001), ("stsb", 0.002)}


@pytest.mark.parametrize("arguments, message", [
    (["lrs=1e-3,fast"], "lrs=1e-3,fast: expected positive numbers, e.g. lrs=3e-4,1e-3"),
    (["tasks=sst2,rte", "lrs=sst2:2e-4"], "lrs=sst2:2e-4: no rate for rte; add a rate for every other task"),
    (["tasks=sst2,rte", "lrs=cola:2e-4,1e-3"], "lrs=cola:2e-4,1e-3: cola:2e-4 names a task that is not in"),
    (["lrs=sst2:fast,1e-3"], "lrs=sst2:fast,1e-3: expected positive numbers"),
    (["lrs=1e-3,0"], "lrs=1e-3,0: expected positive numbers"),
    (["lrs=1e-3,3e-4", "optimizer.lr=1e-4"],
     "give the learning rate as lrs=… (a grid) or optimizer.lr=… (one), not both"),
])
def test_glue_refuses_a_bad_learning_rate_grid_in_one_line(tiny_glue, capsys, arguments, message):
    run, _ = tiny_glue
    outcome = run_in_process(["glue", str(run), *arguments], capsys)
    assert outcome.code == 2 and outcome.error_lines[-1].startswith("bertlab: error: bertlab glue: " + message)


def test_glue_refuses_unknown_tasks_in_one_line(tiny_glue, capsys):
    run, suite = tiny_glue
    outcome = run_in_process(["glue", str(run), "tasks=cola,squad"], capsys)
    assert outcome.code == 2 and outcome.error_lines[-1].startswith(
        "bertlab: error: bertlab glue: tasks=cola,squad: unknown squad; expected some of cola, sst2")


def test_a_tasks_own_items_make_its_grid_and_the_others_share_the_plain_ones():
    """The README's `lrs=sst2:2e-4,sst2:5e-4` chooses SST-2's rate between two; `rte:3e-4` gives RTE one."""
    assert task_rates("sst2:2e-4,sst2:5e-4,rte:3e-4,1e-3", ["cola", "sst2", "rte"]) == {
        "cola": ["1e-3"], "sst2": ["2e-4", "5e-4"], "rte": ["3e-4"]}
