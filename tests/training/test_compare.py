"""`bertlab compare`: the config keys that differ, final validation metrics, wall time and GLUE rows
side by side, and the curves overlaid in one PNG."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import matplotlib.image
import pandas as pd
from omegaconf import OmegaConf

from bertlab.commands.compare import compare
from tests.bertlab_runs import run_in_process


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
