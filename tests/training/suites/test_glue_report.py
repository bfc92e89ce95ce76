"""A GLUE suite's report (bertlab.training.suites.glue_report): its files, the task scores' Markdown (with the
held-out − dev-selected columns only where the suite held rows out), the note that says how the reported figures
were selected, and the figure of the scores with their intervals. The arithmetic of the scores:
tests/training/suites/test_glue_scores.py."""

from __future__ import annotations

import csv
import math

import pytest
from matplotlib.collections import PathCollection
from matplotlib.colors import to_rgba
from matplotlib.container import BarContainer

from bertlab.training.suites import glue_report
from bertlab.training.suites.glue import GLUE_AVERAGE, GLUE_SEEDS
from bertlab.training.suites.glue_report import plot_glue, score_lines, selection_note, write_glue_table
from bertlab.training.suites.glue_scores import read_seed_scores
from tests.training.suites.test_comparison_figure import drawn_figures, png_size
from tests.training.suites.test_glue_scores import write_job

NAN = math.nan
RTE = {"task": "rte", "seeds": 3, "mean": 56.5, "std": 1.5, "ci low": 52.77, "ci high": 60.23}
SST2 = {"task": "sst2", "seeds": 1, "mean": 81.0, "std": NAN, "ci low": NAN, "ci high": NAN}  # one seed: no interval
AVERAGE = {"task": GLUE_AVERAGE, "seeds": 1, "mean": 68.5, "std": NAN, "ci low": NAN, "ci high": NAN}
HELD_OUT = {"dev-selected mean": 65.5, "held-out − dev-selected": -9.0, "difference ci low": -21.71,
            "difference ci high": 3.71}


def test_a_suite_that_selected_on_dev_reports_as_before_and_shows_no_dev_selected_column(tmp_path):
    for seed, accuracy in enumerate((0.80, 0.84, 0.82)):
        write_job(tmp_path, "sst2", seed, [{"step": 9, "val/accuracy": accuracy}], "val/accuracy", ["accuracy"])
    markdown = write_glue_table(tmp_path)
    assert "| sst2 | 3 | 82.0 | 2.0 | [77.0, 87.0] |" in markdown and "dev-selected" not in markdown
    assert "chosen on the validation split itself" in markdown
    with (tmp_path / "glue.csv").open() as handle:
        average = list(csv.DictReader(handle))[-1]
    assert (average["task seeds"], float(average["task ci low"])) == ("3", pytest.approx(82 - 4.302653 * 2 / 3 ** 0.5))


def test_the_report_writes_the_seeds_table_and_the_figure_and_returns_what_glue_md_holds(tmp_path):
    for seed, accuracy in enumerate((0.60, 0.64)):
        write_job(tmp_path, "rte", seed, [{"step": 9, "val/accuracy": accuracy}], "val/accuracy", ["accuracy"])
    markdown = write_glue_table(tmp_path)
    assert (tmp_path / "glue.md").read_text(encoding="utf-8") == markdown
    seeds = read_seed_scores(tmp_path / GLUE_SEEDS)  # a task's score per seed, then the average per seed
    assert [(row["task"], row["seed"], row["score"]) for row in seeds] == [
        ("rte", 0, pytest.approx(60.0)), ("rte", 1, pytest.approx(64.0)),
        (GLUE_AVERAGE, 0, pytest.approx(60.0)), (GLUE_AVERAGE, 1, pytest.approx(64.0))]
    assert png_size(tmp_path / "glue.png") == (250, 700)  # 0.5 inch a row (rte, the average) and 1.5


def test_the_score_lines_give_each_task_its_interval_and_bold_the_average():
    lines = score_lines([RTE, SST2, AVERAGE])
    assert lines[0] == "| task score | seeds | mean | std | 95% CI |"
    assert lines[2] == "| rte | 3 | 56.5 | 1.5 | [52.8, 60.2] |"
    assert lines[3].startswith("| sst2 | 1 | 81.0 |") and lines[3].endswith("| – |")
    assert lines[4].startswith(f"| **{GLUE_AVERAGE}** | 1 | 68.5 |")
    assert len(lines) == 5


def test_the_score_lines_add_the_dev_selected_columns_where_the_suite_held_rows_out():
    lines = score_lines([{**RTE, **HELD_OUT}, SST2])
    assert lines[0].endswith("| 95% CI | dev-selected | held-out − dev-selected [95% CI] |")
    assert lines[2] == "| rte | 3 | 56.5 | 1.5 | [52.8, 60.2] | 65.5 | -9.0 [-21.7, 3.7] |"
    assert lines[3].endswith("| – | | |")  # a task without the dev-selected figures: cells that do not apply
    assert score_lines([{**RTE, **HELD_OUT, "held-out − dev-selected": 0.3}])[2].endswith("| +0.3 [-21.7, 3.7] |")


def test_the_note_says_the_selection_split_was_held_out_only_when_every_job_held_it_out():
    held_out = selection_note([{"held out": True}, {"held out": True}])
    assert "chosen on a selection split held out of each task's training rows" in held_out
    assert "dev-selected: the same jobs" in held_out
    for seeds in ([{"held out": True}, {"held out": False}], [{"held out": False}]):
        note = selection_note(seeds)
        assert "chosen on the validation split itself" in note and "held out" not in note


def test_the_figure_draws_each_score_with_its_interval_the_first_task_on_top(tmp_path, monkeypatch):
    figures = drawn_figures(monkeypatch, glue_report)
    plot_glue([RTE, SST2, AVERAGE], tmp_path / "glue.png")
    (axes,) = figures[0].axes
    assert [label.get_text() for label in axes.get_yticklabels()] == [f"{GLUE_AVERAGE} (n=1)", "sst2 (n=1)",
                                                                      "rte (n=3)"]
    (bars,) = [container for container in axes.containers if isinstance(container, BarContainer)]
    assert [patch.get_width() for patch in bars.patches] == [68.5, 81.0, 56.5]
    assert [patch.get_y() + patch.get_height() / 2 for patch in bars.patches] == pytest.approx([0, 1, 2])
    assert [patch.get_facecolor() for patch in bars.patches] == [to_rgba("C1"), to_rgba("C0"), to_rgba("C0")]
    (spans,) = bars.errorbar.lines[2]  # a single seed's score: no interval, a span of nothing at its mean
    assert [(segment[0][0], segment[1][0]) for segment in spans.get_segments()] == pytest.approx(
        [(68.5, 68.5), (81.0, 81.0), (52.77, 60.23)])
    assert not [collection for collection in axes.collections if isinstance(collection, PathCollection)]
    assert [text.get_text() for text in axes.get_legend().get_texts()] == ["reported (95% CI)"]
    assert png_size(tmp_path / "glue.png") == (300, 700)  # 0.5 inch a row and 1.5, 7 inches wide, at 100 dpi


def test_the_figure_marks_the_dev_selected_mean_where_the_suite_held_rows_out(tmp_path, monkeypatch):
    figures = drawn_figures(monkeypatch, glue_report)
    plot_glue([{**RTE, **HELD_OUT}, SST2, {**AVERAGE, **HELD_OUT, "dev-selected mean": 70.0}], tmp_path / "glue.png")
    (axes,) = figures[0].axes
    (points,) = [collection for collection in axes.collections if isinstance(collection, PathCollection)]
    assert points.get_offsets().tolist() == [[70.0, 0.0], [65.5, 2.0]]  # the average (bottom) and rte, not sst2
    assert {text.get_text() for text in axes.get_legend().get_texts()} == {"reported (95% CI)", "dev-selected mean"}
