"""A GLUE suite's scores and their report (bertlab.training.suites.glue_scores, bertlab.training.suites.glue_report): the
table's arithmetic against hand-computed numbers."""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from bertlab.training.suites.glue import GLUE_AVERAGE, GLUE_SEEDS
from bertlab.training.suites.glue_report import write_glue_table
from bertlab.training.suites.glue_scores import glue_table, read_seed_scores, score_table, seed_scores


def write_job(suite: Path, task: str, seed: int, rows: list[dict], monitor: str, metrics: list[str],
              lr: float = 1e-3, subdir: str = "") -> None:
    job = suite / task / subdir / f"seed_{seed}"
    (job / "hf_model").mkdir(parents=True)
    (job / "hf_model" / "model.safetensors").write_bytes(b"")
    (job / "metrics.json").write_text("{}")
    OmegaConf.save({"seed": seed, "monitor": monitor, "monitor_mode": "max", "optimizer": {"lr": lr},
                    "glue": {"task": task, "metrics": metrics}}, job / "config.yaml")
    pd.DataFrame(rows).to_csv(job / "metrics.csv", index=False)


def test_the_table_averages_metrics_seeds_and_tasks_as_glue_does(tmp_path):
    # MRPC: F1 picks the step; its score is the mean of F1 and accuracy. STS-B: Pearson and Spearman.
    write_job(tmp_path, "mrpc", 0, [{"step": 9, "val/f1": 0.80, "val/accuracy": 0.70},
                                    {"step": 19, "val/f1": 0.75, "val/accuracy": 0.90}], "val/f1", ["f1", "accuracy"])
    write_job(tmp_path, "mrpc", 1, [{"step": 9, "val/f1": 0.90, "val/accuracy": 0.80}], "val/f1", ["f1", "accuracy"])
    write_job(tmp_path, "stsb", 0, [{"step": 9, "val/pearson": 0.60, "val/spearman": 0.50}], "val/pearson",
              ["pearson", "spearman"])
    write_job(tmp_path, "stsb", 1, [{"step": 9, "val/pearson": 0.50, "val/spearman": 0.90},
                                    {"step": 19, "val/pearson": 0.70, "val/spearman": 0.60}], "val/pearson",
              ["pearson", "spearman"])
    (tmp_path / "rte" / "seed_0").mkdir(parents=True)  # an unfinished job: not counted
    rows, average = glue_table(tmp_path)
    table = {(row["task"], row["metric"]): row for row in rows}
    assert table["mrpc", "f1"]["mean"] == pytest.approx(85.0) and table["mrpc", "accuracy"]["mean"] == pytest.approx(75.0)
    assert table["mrpc", "f1"]["std"] == pytest.approx(7.0710678) and table["mrpc", "f1"]["median"] == pytest.approx(85.0)
    assert table["mrpc", "f1"]["task score"] == pytest.approx(80.0)
    assert table["stsb", "pearson"]["mean"] == pytest.approx(65.0) and table["stsb", "spearman"]["mean"] == pytest.approx(55.0)
    assert table["stsb", "spearman"]["task score"] == pytest.approx(60.0)
    assert average == pytest.approx(70.0)
    assert [row["task"] for row in rows] == ["mrpc", "mrpc", "stsb", "stsb"] and {row["seeds"] for row in rows} == {2}
    markdown = write_glue_table(tmp_path)
    assert "| mrpc | f1 | 0.001 | 2 | 85.0 ± 7.1 | 85.0 | 80.0 |" in markdown and "**70.0**" in markdown
    assert "other lrs" not in markdown
    assert (tmp_path / "glue.png").stat().st_size > 1000
    with (tmp_path / "glue.csv").open() as handle:
        assert list(csv.DictReader(handle))[-1]["task score"] == str(average)


def test_a_task_run_at_several_learning_rates_is_reported_at_its_best(tmp_path):
    # SST-2: 1e-3 scores 80 and 84 (mean 82), 3e-4 scores 83 and 83 (mean 83): 3e-4 is reported even though
    # 1e-3 holds the single best seed. RTE ran at one rate only.
    for lr, accuracies in ((1e-3, (0.80, 0.84)), (3e-4, (0.83, 0.83))):
        for seed, accuracy in enumerate(accuracies):
            write_job(tmp_path, "sst2", seed, [{"step": 9, "val/accuracy": accuracy}], "val/accuracy", ["accuracy"],
                      lr=lr, subdir=f"lr_{lr}")
    write_job(tmp_path, "rte", 0, [{"step": 9, "val/accuracy": 0.55}], "val/accuracy", ["accuracy"], subdir="lr_0.001")
    rows, average = glue_table(tmp_path)
    sst2, rte = rows
    assert (sst2["lr"], sst2["seeds"], sst2["task score"], sst2["other lrs"]) == (3e-4, 2, pytest.approx(83.0),
                                                                                 "0.001: 82.0")
    assert (rte["lr"], rte["other lrs"]) == (1e-3, "") and average == pytest.approx(69.0)
    markdown = write_glue_table(tmp_path)
    assert "| sst2 | accuracy | 0.0003 | 2 | 83.0 ± 0.0 | 83.0 | 83.0 | 0.001: 82.0 |" in markdown


def test_held_out_selection_reports_the_validation_split_at_the_step_and_rate_the_held_out_rows_chose(tmp_path):
    # val/ is the selection split, dev/ the validation split. Rate 1e-3: the held-out rows pick step 9 (dev 0.80,
    # 0.82), dev itself would pick step 19 (0.86, 0.84). Rate 3e-4 scores better on dev (0.90) but worse on the
    # held-out rows, so the suite reports 1e-3, and only the dev-selected figure takes 3e-4.
    for seed, (first, second) in enumerate(((0.80, 0.86), (0.82, 0.84))):
        write_job(tmp_path, "rte", seed, [{"step": 9, "val/accuracy": 0.70, "dev/accuracy": first},
                                          {"step": 19, "val/accuracy": 0.60, "dev/accuracy": second}],
                  "val/accuracy", ["accuracy"], lr=1e-3, subdir="lr_0.001")
        write_job(tmp_path, "rte", seed, [{"step": 9, "val/accuracy": 0.50, "dev/accuracy": 0.90}],
                  "val/accuracy", ["accuracy"], lr=3e-4, subdir="lr_0.0003")
    (row,), average = glue_table(tmp_path)
    assert (row["lr"], row["task score"], row["other lrs"]) == (1e-3, pytest.approx(81.0), "0.0003: 50.0")
    seeds = seed_scores(tmp_path)
    assert [(r["task"], r["seed"], r["lr"], r["dev-selected lr"]) for r in seeds] == [
        ("rte", 0, 1e-3, 3e-4), ("rte", 1, 1e-3, 3e-4), (GLUE_AVERAGE, 0, "", ""), (GLUE_AVERAGE, 1, "", "")]
    assert [r["score"] for r in seeds] == [pytest.approx(80.0), pytest.approx(82.0)] * 2
    assert [r["dev-selected score"] for r in seeds] == [pytest.approx(90.0)] * 4
    rte, glue = score_table(seeds)
    # Scores 80 and 82: mean 81, std √2, half-width t(0.975, 1) · √2 / √2 = 12.706.
    assert (rte["seeds"], rte["mean"], rte["std"]) == (2, pytest.approx(81.0), pytest.approx(2 ** 0.5))
    assert (rte["ci low"], rte["ci high"]) == (pytest.approx(81 - 12.7062, abs=1e-3), pytest.approx(81 + 12.7062, abs=1e-3))
    assert (rte["dev-selected mean"], rte["held-out − dev-selected"]) == (pytest.approx(90.0), pytest.approx(-9.0))
    assert glue["task"] == GLUE_AVERAGE and glue["mean"] == pytest.approx(81.0)
    markdown = write_glue_table(tmp_path)
    assert "| rte | 2 | 81.0 | 1.4 | [68.3, 93.7] | 90.0 | -9.0 [-21.7, 3.7] |" in markdown
    assert "chosen on a selection split held out of each task's training rows" in markdown
    assert read_seed_scores(tmp_path / GLUE_SEEDS) == [{**r, "lr": str(r["lr"]), "dev-selected lr": str(r["dev-selected lr"])}
                                                       for r in seeds]
