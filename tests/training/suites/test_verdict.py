"""The verdict between two sides of GLUE scores (bertlab.training.suites.verdict): the unit is the seed (paired
where both sides ran the same seeds) for one suite a side and the pretraining run for groups; the GLUE average is
judged only where both sides ran the same tasks; the plain-text measure is judged lower-is-better."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable

import pytest
from scipy import stats

from bertlab.training.suites.glue import GLUE_AVERAGE
from bertlab.training.suites.verdict import text_verdicts, verdict_lines, verdicts, with_averages


def seed_rows(scores: dict[str, list[float]], seeds: Iterable[int] | None = None) -> list[dict]:
    """glue_seeds.csv's rows (task, seed, score) of each task's scores, seeds 0, 1, … unless given."""
    return [{"task": task, "seed": seed, "score": score}
            for task, values in scores.items() for seed, score in zip(seeds or range(len(values)), values)]


def test_an_average_row_is_added_for_each_seed_that_ran_every_task():
    rows = with_averages(seed_rows({"cola": [10.0, 20.0], "rte": [50.0, 60.0]}, seeds=(0, 1))
                         + [{"task": "cola", "seed": 2, "score": 30.0}])
    averages = {row["seed"]: row["score"] for row in rows if row["task"] == GLUE_AVERAGE}
    assert averages == {0: 30.0, 1: 40.0}  # seed 2 ran one task of two
    assert with_averages(rows) == rows  # rows that carry averages are kept as they are


def test_one_suite_a_side_with_the_same_seeds_is_judged_paired_per_seed():
    baseline = with_averages(seed_rows({"sst2": [80.0, 81.0, 82.0]}))
    other = with_averages(seed_rows({"sst2": [81.0, 82.5, 83.0]}))
    table, notes = verdicts([baseline], [other])
    assert [entry["task"] for entry in table] == ["sst2", GLUE_AVERAGE] and notes == []
    entry = table[0]
    assert entry["unit"] == "seeds"
    assert entry["verdict"].difference == pytest.approx(1.1666667)
    assert entry["verdict"].p_value == pytest.approx(stats.ttest_rel([81.0, 82.5, 83.0], [80.0, 81.0, 82.0]).pvalue)


def test_groups_are_judged_with_the_pretraining_run_as_the_unit():
    baseline = [with_averages(seed_rows({"sst2": [80.0, 80.2, 80.4]})), with_averages(seed_rows({"sst2": [80.6, 80.8, 81.0]}))]
    other = [with_averages(seed_rows({"sst2": [82.0, 82.2, 82.4]})), with_averages(seed_rows({"sst2": [81.6, 81.8, 82.0]}))]
    table, _ = verdicts(baseline, other)
    entry = table[0]
    assert entry["unit"] == "pretraining runs" and entry["baseline"].n == 2 and entry["other"].n == 2
    assert entry["baseline"].mean == pytest.approx(statistics.fmean([80.2, 80.8]))
    welch = stats.ttest_ind([82.2, 81.8], [80.2, 80.8], equal_var=False)
    assert entry["verdict"].test == "Welch t" and entry["verdict"].p_value == pytest.approx(welch.pvalue)
    assert entry["verdict"].verdict == ("better" if welch.pvalue < 0.05 else "no detectable difference")


def test_the_average_of_sides_that_ran_different_tasks_is_left_out_and_said_so():
    baseline = with_averages(seed_rows({"sst2": [80.0, 81.0, 82.0], "rte": [50.0, 52.0, 54.0]}))
    other = with_averages(seed_rows({"sst2": [80.0, 81.0, 82.0]}))
    table, notes = verdicts([baseline], [other])
    assert [entry["task"] for entry in table] == ["sst2"]
    assert notes == [f"{GLUE_AVERAGE}: not judged, the sides ran different tasks"]


def test_a_lower_plain_text_ratio_is_better():
    baseline = [math.log(x) for x in (0.080, 0.082, 0.084)]
    other = [math.log(x) for x in (0.060, 0.061, 0.062)]
    table, notes = text_verdicts(baseline, other)
    assert table[0]["verdict"].difference < 0 and table[0]["verdict"].verdict == "better"
    assert text_verdicts(other, baseline)[0][0]["verdict"].verdict == "worse"
    assert "lower is better" in notes[0]
    lines = verdict_lines(table)
    assert lines[0].startswith("| task | baseline mean [95% CI] (n) |") and "| better |" in lines[2]
