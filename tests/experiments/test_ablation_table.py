"""The ablation's table (experiments/ablation_table.py) shows the verdicts `bertlab compare` recorded, as it recorded
them, beside each run's final plain-text figures; `moved` names the arms the plain-text measure tells apart."""

from __future__ import annotations

import csv
import importlib.util
import json
import math
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from bertlab.commands.compare import compare

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("ablation_table", ROOT / "experiments" / "ablation_table.py")
ablation_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ablation_table)


def pretraining_run(folder: Path, seed: int, ratio: float, minutes: float) -> Path:
    """A finished pretraining run whose last plain-text ratio is `ratio`, against a unigram perplexity of 1,000."""
    folder.mkdir(parents=True)
    OmegaConf.save({"seed": seed, "command": "train"}, folder / "config.yaml")
    pd.DataFrame({"step": [299, 599], "text/perplexity": [900.0, 1000 * ratio], "text/unigram_perplexity": 1000.0,
                  "text/perplexity_ratio": [0.9, ratio]}).to_csv(folder / "metrics.csv", index=False)
    (folder / "timing.json").write_text(json.dumps({"wall_time_min": minutes}))
    return folder


def suite_scores(path: Path, scores: dict[str, list[float]]) -> Path:
    """Per-seed scores laid out as a suite's glue_seeds.csv."""
    path.write_text("task,seed,score\n" + "".join(f"{task},{seed},{score}\n" for task, values in scores.items()
                                                  for seed, score in enumerate(values)))
    return path


def record(out: Path, records: Path, arm: str, stage: str) -> None:
    records.mkdir(exist_ok=True)
    for name, suffix in (("compare.csv", ""), ("verdict.csv", "_verdict")):
        (records / f"{arm}_{stage}{suffix}.csv").write_bytes((out / name).read_bytes())


@pytest.fixture
def records(tmp_path) -> Path:
    """Two arms judged by `bertlab compare` as variant_ablation.sh judges them: `faster` (ratios 0.06–0.062 against
    the baseline's 0.09–0.11) also scored on GLUE, `same` (the baseline's ratios in another order) not."""
    baseline = [pretraining_run(tmp_path / f"baseline_s{seed}", seed, 0.09 + 0.01 * seed, 4.0 + seed)
                for seed in range(3)]
    for arm, ratios in (("faster", [0.06, 0.061, 0.062]), ("same", [0.11, 0.09, 0.10])):
        runs = [pretraining_run(tmp_path / f"{arm}_s{seed}", seed, ratio, 5.0) for seed, ratio in enumerate(ratios)]
        compare(baseline, tmp_path / f"{arm}_text", against=runs)
        record(tmp_path / f"{arm}_text", tmp_path / "records", arm, "text")
    suites = [suite_scores(tmp_path / f"{side}_s{run}.csv", {"rte": [50 + shift + run, 51 + shift, 52 + shift],
                                                            "stsb": [70 + shift, 71 + shift - run, 69 + shift]})
              for side, shift in (("baseline", 0), ("faster", 5)) for run in range(3)]
    compare(suites[:3], tmp_path / "faster_glue", against=suites[3:])
    record(tmp_path / "faster_glue", tmp_path / "records", "faster", "glue")
    return tmp_path / "records"


def verdicts(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_the_table_shows_compares_verdicts_and_each_runs_figures(records):
    markdown = ablation_table.table(records)
    (faster,) = verdicts(records / "faster_text_verdict.csv")
    difference = float(faster["difference"])
    assert faster["verdict"] == "better" and difference == pytest.approx(
        sum(math.log(0.06 + 0.001 * run) - math.log(0.09 + 0.01 * run) for run in range(3)) / 3)
    _, text, _, glue = markdown.rstrip("\n").split("\n\n")  # the plain-text table, then the GLUE-small one
    rows = {line.split(" | ")[0].removeprefix("| "): line for line in text.splitlines()}
    # the baseline's ratio, perplexity and minutes, run by run
    assert rows["baseline"].startswith("| baseline | 3 | 0.090 / 0.100 / 0.110 | 90.0 / 100.0 / 110.0 | 4.0 / 5.0 / 6.0 |")
    assert f"| {difference:+.3f} [" in rows["faster"] and f"| ×{math.exp(difference):.2f} [" in rows["faster"]
    assert rows["faster"].count("| better |") == 1 and "| no detectable difference |" in rows["same"]
    (glue_row,) = [line for line in glue.splitlines() if line.startswith("| faster | 3 | ")]
    by_task = {row["task"]: row for row in verdicts(records / "faster_glue_verdict.csv")}
    assert list(by_task) == ["rte", "stsb", "GLUE average"]
    assert all(f"{float(row['difference']):+.1f} [" in glue_row for row in by_task.values())
    written = verdicts(records / "table.csv")
    assert [(row["arm"], row["stage"], row["task"]) for row in written] == [
        ("faster", "plain text", "log text/perplexity_ratio"), ("same", "plain text", "log text/perplexity_ratio"),
        *(("faster", "GLUE-small", task) for task in by_task)]
    assert written[0]["difference"] == faster["difference"] and written[0]["perplexity ratio to unigram"] == (
        "0.0600 / 0.0610 / 0.0620")
    assert (records / "table.md").read_text() == markdown


def test_moved_names_the_arms_told_apart_on_plain_text(records):
    assert ablation_table.moved(records) == ["faster"]


def test_a_folder_without_verdicts_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no \\*_text_verdict.csv; judge an arm first"):
        ablation_table.table(tmp_path)
