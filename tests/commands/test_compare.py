"""`bertlab compare`: the config keys that differ, final validation metrics, wall time and GLUE rows
side by side, and the curves overlaid in one PNG."""

from __future__ import annotations

import csv
import json
import math
import statistics
from pathlib import Path

import matplotlib.image
import pandas as pd
import pytest
from omegaconf import OmegaConf

from bertlab.commands.compare import compare
from bertlab.config import BertConfig
from bertlab.model import BertModel
from tests.bertlab_runs import run_in_process
from tests.training.suites.test_verdict import seed_rows


def write_run(folder: Path, config: dict, losses: list[float], minutes: float | None = None) -> Path:
    folder.mkdir(parents=True)
    OmegaConf.save(config, folder / "config.yaml")
    pd.DataFrame({"step": [9, 19, 29][:len(losses)], "val/loss": losses,
                  "val/perplexity": [2.718281828 ** loss for loss in losses]}).to_csv(folder / "metrics.csv", index=False)
    if minutes is not None:
        (folder / "timing.json").write_text(json.dumps({"wall_time_min": minutes}))
    return folder


def test_two_runs_that_differ_in_one_key(tmp_path):
    base = {"seed": 0, "task": {"mlm_probability": 0.15}, "paths": {"run_dir": "a"}}
    first = write_run(tmp_path / "a", base, [6.0, 5.5], minutes=8.0)
    second = write_run(tmp_path / "b", base | {"task": {"mlm_probability": 0.4}, "paths": {"run_dir": "b"}},
                       [6.0, 5.2, 5.1])
    (second / "glue.csv").write_text("task,metric,seeds,mean,std,median,task score\nrte,accuracy,3,55.0,1.0,55.0,55.0\n"
                                     "GLUE average,,,,,,55.0\n")
    markdown = compare([first, second], tmp_path / "out")
    assert "| | 1: a | 2: b |" in markdown
    assert "| task.mlm_probability | 0.15 | 0.4 |" in markdown  # the one differing key; paths.* are ignored
    assert "paths.run_dir" not in markdown and "| seed |" not in markdown
    assert "| val/loss | 5.5 | 5.1 |" in markdown and "| wall time (min) | 8 |  |" in markdown
    assert "| GLUE average |  | 55 |" in markdown and "| GLUE rte |  | 55 |" in markdown
    with (tmp_path / "out" / "compare.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [row["task.mlm_probability"] for row in rows] == ["0.15", "0.4"]
    assert (tmp_path / "out" / "compare.png").stat().st_size > 5000


def test_two_glue_suites_are_drawn_as_bars(tmp_path):
    suites = []
    for name, scores in (("scratch", (54.0, 16.5)), ("pretrained", (51.6, 55.6))):
        suite = tmp_path / name
        suite.mkdir()
        (suite / "glue.csv").write_text("task,metric,seeds,mean,std,median,task score\n"
                                        f"rte,accuracy,3,,,,{scores[0]}\nstsb,pearson,3,,,,{scores[1]}\n"
                                        f"GLUE average,,,,,,{sum(scores) / 2}\n")
        suites.append(suite)
    compare(suites, tmp_path / "out")
    image = matplotlib.image.imread(tmp_path / "out" / "compare.png")
    assert (image[..., :3] < 0.9).any(axis=-1).mean() > 0.02, "the figure has bars, not only a white page"


def test_a_folder_that_is_no_run_is_one_line_error(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    outcome = run_in_process(["compare", str(tmp_path / "empty"), "--output", str(tmp_path / "out")], capsys)
    assert outcome.code == 1
    assert outcome.error_lines[-1] == (f"bertlab: error: {tmp_path / 'empty'}: neither a run folder (config.yaml, "
                                       f"metrics.csv) nor a GLUE suite (glue.csv)")


def test_runs_of_different_kinds_are_refused_in_one_line_naming_them(tmp_path, capsys):
    pretraining = write_run(tmp_path / "mlm", {"command": "train", "seed": 0}, [6.0])
    classifier = write_run(tmp_path / "sst2", {"command": "fine-tune", "seed": 0}, [0.5])
    outcome = run_in_process(["compare", str(pretraining), str(classifier), "--output", str(tmp_path / "out")], capsys)
    assert outcome.code == 1 and not (tmp_path / "out").exists()
    assert outcome.error_lines == ["bertlab: error: compare: runs of different kinds (1: mlm is a `train` run, 2: sst2 is "
                                   "a `fine-tune` run); their metrics do not compare: give runs of one kind"]


def test_folders_named_by_time_are_labelled_with_their_run_name_and_suites_as_suites(tmp_path):
    config = {"seed": 0}
    first = write_run(tmp_path / "mlm_tiny_wiki" / "2026-11-27_22-47-35", config, [6.0])
    second = write_run(tmp_path / "one_cycle" / "2026-11-28_12-15-22", config | {"seed": 1}, [6.1])
    (tmp_path / "one_cycle" / "latest").symlink_to(second.name)
    suites = [tmp_path / "glue" / "one_cycle" / name for name in (second.name, f"{second.name}_scratch")]
    for suite in suites:
        suite.mkdir(parents=True)
        (suite / "glue.csv").write_text("task,metric,seeds,mean,std,median,task score\nGLUE average,,,,,,55.0\n")
    markdown = compare([first, tmp_path / "one_cycle" / "latest", *suites], tmp_path / "out")
    assert ("| | 1: mlm_tiny_wiki/2026-11-27_22-47-35 | 2: one_cycle/2026-11-28_12-15-22 "
            "| 3: glue/one_cycle/2026-11-28_12-15-22 | 4: glue/one_cycle/2026-11-28_12-15-22_scratch |") in markdown


def test_a_suite_beside_runs_adds_no_config_keys(tmp_path):
    base = {"seed": 0, "task": {"mlm_probability": 0.4}}
    first = write_run(tmp_path / "a", base, [6.0])
    second = write_run(tmp_path / "b", base | {"task": {"mlm_probability": 0.15}}, [6.1])
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "glue.csv").write_text("task,metric,seeds,mean,std,median,task score\nGLUE average,,,,,,55.0\n")
    markdown = compare([first, second, suite], tmp_path / "out")
    assert "| task.mlm_probability | 0.4 | 0.15 |  |" in markdown
    assert "| seed |" not in markdown, "a key the runs share is not a difference because the suite lacks it"


def write_suite(folder: Path, scores: dict[str, float], jobs: dict[str, dict]) -> Path:
    """A suite folder: glue.csv with `scores` (task → score) and a config.yaml for each job path in `jobs`."""
    folder.mkdir(parents=True)
    lines = [f"{task},,3,,,,{score}" for task, score in scores.items()]
    average = sum(scores.values()) / len(scores)
    (folder / "glue.csv").write_text("\n".join(["task,metric,seeds,mean,std,median,task score", *lines,
                                                f"GLUE average,,,,,,{average}"]) + "\n")
    for job, config in jobs.items():
        (folder / job).mkdir(parents=True)
        OmegaConf.save(config, folder / job / "config.yaml")
    return folder


def test_suites_are_compared_by_what_their_jobs_share_and_runs_only_with_runs(tmp_path):
    def job(init_from, task, seed, lr):
        return {"model": {"init_from": init_from}, "glue": {"task": task}, "seed": seed, "optimizer": {"lr": lr}}

    run = write_run(tmp_path / "run", {"seed": 0, "model": {"init_from": None}, "optimizer": {"lr": 2e-3}}, [6.0])
    plain = write_suite(tmp_path / "plain", {"rte": 55.0, "sst2": 80.0},
                        {"rte/seed_0": job("a", "rte", 0, 3e-4), "sst2/seed_1": job("a", "sst2", 1, 3e-4)})
    grid = write_suite(tmp_path / "grid", {"rte": 57.0, "sst2": 81.0},  # `glue … lrs=`: <task>/lr_<rate>/seed_<n>
                       {"rte/lr_0.0001/seed_0": job("b", "rte", 0, 1e-4),
                        "sst2/lr_0.0003/seed_0": job("b", "sst2", 0, 3e-4)})
    markdown = compare([run, plain, grid], tmp_path / "out")
    assert "| model.init_from |  | a | b |" in markdown
    assert "glue.task" not in markdown and "| seed |" not in markdown, "what varies inside a suite is no difference"
    assert "| optimizer.lr |" not in markdown, "the grid suite's rate varies by task; the run has no other run"


def test_an_average_over_fewer_tasks_is_left_out_and_said_so(tmp_path):
    part = write_suite(tmp_path / "part", {"sst2": 82.2}, {})
    full = write_suite(tmp_path / "full", {"rte": 58.2, "sst2": 82.5}, {})
    markdown = compare([part, full], tmp_path / "out")
    assert "| GLUE average |  | 70.35 |" in markdown and "| GLUE sst2 | 82.2 | 82.5 |" in markdown
    assert "1: glue/part: GLUE average left out, the suite has no rte" in markdown


def test_suites_of_two_pretrainings_show_how_they_pretrained(tmp_path):
    def pretraining(name, seed):
        run = write_run(tmp_path / name, {"seed": seed, "task": {"mlm_probability": 0.4},
                                          "paths": {"run_dir": name}}, [7.9])
        (run / "hf_model").mkdir()
        return str(run / "hf_model")

    def job(init_from, task):
        return {"model": {"init_from": init_from}, "glue": {"task": task}, "seed": 0}

    suites = [write_suite(tmp_path / f"suite_{seed}", {"rte": 57.0},
                          {"rte/seed_0": job(pretraining(f"run_{seed}", seed), "rte")}) for seed in (1, 2)]
    hub_model = tmp_path / "hub_model"
    hub_model.mkdir()
    suites.append(write_suite(tmp_path / "suite_hub", {"rte": 60.0}, {"rte/seed_0": job(str(hub_model), "rte")}))
    markdown = compare(suites, tmp_path / "out")
    assert "| pretraining.seed | 1 | 2 |  |" in markdown
    assert "pretraining.task.mlm_probability" not in markdown, "what both pretrainings share is no difference"
    assert "pretraining.paths" not in markdown, "folder keys say nothing about the experiment"


def test_a_suite_from_a_checkpoint_shows_the_architecture_the_checkpoint_gave_it(tmp_path):
    """The model group's architecture keys are not used with `init_from`: their defaults must not appear as a
    difference from a scratch suite of the checkpoint's architecture."""
    checkpoint = tmp_path / "rotary_checkpoint"
    BertModel(BertConfig(vocab_size=40, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=16, position_embedding_type="rotary")).save_pretrained(checkpoint)

    def job(init_from, position_embedding_type):
        return {"model": {"init_from": init_from, "position_embedding_type": position_embedding_type,
                          "hidden_size": 8}, "glue": {"task": "rte"}, "seed": 0}

    scratch = write_suite(tmp_path / "scratch", {"rte": 55.0}, {"rte/seed_0": job(None, "rotary")})
    pretrained = write_suite(tmp_path / "pretrained", {"rte": 57.0},
                             {"rte/seed_0": job(str(checkpoint), "absolute")})
    markdown = compare([scratch, pretrained], tmp_path / "out")
    assert "position_embedding_type" not in markdown, "both models were rotary"
    assert "hidden_size" not in markdown


def write_seed_scores(path: Path, scores: dict[str, list[float]], seeds: list[int] | None = None) -> Path:
    """A CSV laid out as a suite's glue_seeds.csv: task, seed, score."""
    pd.DataFrame(seed_rows(scores, seeds)).to_csv(path, index=False)
    return path


def test_two_suites_of_the_same_seeds_get_a_paired_verdict_per_task_and_on_average(tmp_path):
    # RTE: +3 on every seed give or take 0.2, found better; SST-2: within ±0.5 of each other, undecided.
    base = write_seed_scores(tmp_path / "base.csv", {"rte": [55.0, 58.0, 56.5], "sst2": [81.0, 82.0, 81.5]})
    other = write_seed_scores(tmp_path / "other.csv", {"rte": [58.2, 60.9, 59.5], "sst2": [81.4, 81.6, 81.9]})
    markdown = compare([base, other], tmp_path / "out")
    lines = {line.split(" | ")[0]: line for line in markdown.splitlines() if line.startswith("| ")}
    # RTE's differences 3.2, 2.9, 3.0: mean 3.03, std 0.153, half-width 4.303 · 0.153 / √3 = 0.38.
    assert "| rte | 56.5 [52.8, 60.2] (3) | 59.5 [56.2, 62.9] (3) | +3.0 [2.7, 3.4] | paired t |" in lines["| rte"]
    assert lines["| rte"].endswith("| better | 2 seeds |")
    assert "| no detectable difference |" in lines["| sst2"]
    assert "| paired t |" in lines["| GLUE average"]
    with (tmp_path / "out" / "verdict.csv").open() as handle:
        verdicts = {row["task"]: row for row in csv.DictReader(handle)}
    assert verdicts["rte"]["verdict"] == "better" and verdicts["rte"]["test"] == "paired t"
    image = matplotlib.image.imread(tmp_path / "out" / "compare.png")
    assert image.shape[1] > 2 * image.shape[0], "the forest plot stands beside the bars"


def test_suites_of_other_seeds_are_judged_unpaired_by_welchs_test(tmp_path):
    base = write_seed_scores(tmp_path / "base.csv", {"rte": [55.0, 58.0, 56.5]}, seeds=[0, 1, 2])
    other = write_seed_scores(tmp_path / "other.csv", {"rte": [57.0, 59.0, 58.0]}, seeds=[3, 4, 5])
    markdown = compare([base, other], tmp_path / "out")
    assert "| Welch t |" in markdown and "| paired t |" not in markdown


def test_groups_of_pretraining_runs_are_judged_with_the_run_as_the_unit(tmp_path, capsys):
    # Three pretraining runs a side, two fine-tuning seeds each; each run is scored by its seeds' mean.
    baseline = [write_seed_scores(tmp_path / f"a{run}.csv", {"rte": [50.0 + run, 52.0 + run]}) for run in range(3)]
    other = [write_seed_scores(tmp_path / f"b{run}.csv", {"rte": [55.0 + run, 57.0 + run]}) for run in range(3)]
    outcome = run_in_process(["compare", "--output", str(tmp_path / "out"), *map(str, baseline), "--",
                              *map(str, other)], capsys)
    assert outcome.code == 0, outcome.err
    with (tmp_path / "out" / "verdict.csv").open() as handle:
        rte = next(row for row in csv.DictReader(handle) if row["task"] == "rte")
    assert (rte["unit"], rte["test"], rte["n"], rte["baseline n"]) == ("pretraining runs", "Welch t", "3", "3")
    assert float(rte["baseline mean"]) == 52.0 and float(rte["difference"]) == 5.0 and rte["verdict"] == "better"
    assert "b0.csv, 5: b1.csv, 6: b2.csv against 1: a0.csv" in outcome.out


def test_a_group_member_that_is_no_suite_is_refused_in_one_line(tmp_path, capsys):
    run = write_run(tmp_path / "run", {"seed": 0}, [6.0])
    other = write_seed_scores(tmp_path / "b.csv", {"rte": [55.0, 57.0]})
    outcome = run_in_process(["compare", "--output", str(tmp_path / "out"), str(run), "--", str(other)], capsys)
    assert outcome.code == 1 and "1: run: not a GLUE suite; groups hold GLUE suites" in outcome.error_lines[-1]


def test_fine_tuning_runs_name_their_splits_and_show_the_exported_checkpoints_figures(tmp_path):
    """A run with a selection split logs it as val/… and the task's validation split as dev/…: compare names
    them selection/… and dev/…, at the last step and at the step the exported checkpoint was chosen at."""
    folders = []
    for name, selection, dev in (("a", [0.7, 0.9, 0.8], [0.6, 0.7, 0.75]), ("b", [0.8, 0.7, 0.75], [0.7, 0.6, 0.8])):
        folders.append(tmp_path / name)
        folders[-1].mkdir()
        OmegaConf.save({"seed": 0, "monitor": "val/accuracy", "monitor_mode": "max", "run": name},
                       folders[-1] / "config.yaml")
        pd.DataFrame({"step": [9, 19, 29], "val/accuracy": selection, "dev/accuracy": dev}).to_csv(
            folders[-1] / "metrics.csv", index=False)
    markdown = compare(folders, tmp_path / "out")
    assert "val/accuracy" not in markdown
    assert "| selection/accuracy | 0.8 | 0.75 |" in markdown and "| dev/accuracy | 0.75 | 0.8 |" in markdown
    assert "| selection/accuracy (exported) | 0.9 | 0.8 |" in markdown
    assert "| dev/accuracy (exported) | 0.7 | 0.7 |" in markdown
    assert (tmp_path / "out" / "compare.png").stat().st_size > 5000  # the selection/ and dev/ curves drawn


def write_pretraining_run(folder: Path, seed: int, ratios: list[float]) -> Path:
    """A pretraining run that logged the plain-text measure: its model's perplexity against a unigram's of 1,000."""
    write_run(folder, {"seed": seed}, [6.0] * len(ratios))
    frame = pd.read_csv(folder / "metrics.csv")
    frame["text/perplexity"] = [1000.0 * ratio for ratio in ratios]
    frame["text/unigram_perplexity"] = 1000.0
    frame["text/perplexity_ratio"] = ratios
    frame.to_csv(folder / "metrics.csv", index=False)
    return folder


def test_groups_of_pretraining_runs_are_judged_on_the_log_of_their_plain_text_ratio(tmp_path, capsys):
    # The last ratio of each run counts: 0.09–0.11 against 0.059–0.061, lower being better.
    baseline = [write_pretraining_run(tmp_path / f"a{run}", run, [0.5, 0.09 + 0.01 * run]) for run in range(3)]
    other = [write_pretraining_run(tmp_path / f"b{run}", run, [0.4, 0.059 + 0.001 * run]) for run in range(3)]
    outcome = run_in_process(["compare", "--output", str(tmp_path / "out"), *map(str, baseline), "--",
                              *map(str, other)], capsys)
    assert outcome.code == 0, outcome.err
    with (tmp_path / "out" / "verdict.csv").open() as handle:
        (row,) = csv.DictReader(handle)
    expected = statistics.fmean(math.log(0.059 + 0.001 * run) - math.log(0.09 + 0.01 * run) for run in range(3))
    assert (row["task"], row["unit"], row["test"], row["n"]) == ("log text/perplexity_ratio", "pretraining runs",
                                                                 "Welch t", "3")
    assert float(row["difference"]) == pytest.approx(expected) and row["verdict"] == "better"
    assert "lower is better" in outcome.out
    # The other way round, the same interval judged worse.
    swapped = compare(other, tmp_path / "swapped", against=baseline)
    assert "| worse |" in swapped
    # Without groups, each run against the first: one run a side is a difference without a test.
    single = compare([baseline[0], other[0]], tmp_path / "single")
    assert "log text/perplexity_ratio" in single and "| no detectable difference |" in single
