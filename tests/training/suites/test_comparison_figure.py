"""The figure of `bertlab compare` (bertlab.training.suites.comparison_figure), read from the figure it draws: one
panel per validation curve that any folder logged, each folder in one colour throughout; the GLUE task scores as
bars, the average last; each verdict's differences with their intervals; the PNG at the figure's size."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.image
import pandas as pd
import pytest
from matplotlib.colors import to_rgba
from matplotlib.container import BarContainer, ErrorbarContainer
from matplotlib.figure import Figure

from bertlab.stats import Verdict
from bertlab.training.suites import comparison_figure
from bertlab.training.suites.comparison_figure import plot_curves, plot_forest
from bertlab.training.suites.glue import GLUE_AVERAGE


def drawn_figures(monkeypatch: pytest.MonkeyPatch, module) -> list[Figure]:
    """The Figures that `module` builds from now on, each recorded as it is built."""
    figures = []

    class Recorded(Figure):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            figures.append(self)

    monkeypatch.setattr(module, "Figure", Recorded)
    return figures


def png_size(path: Path) -> tuple[int, int]:
    """(height, width) in pixels of the PNG at `path`, as matplotlib reads it back."""
    assert path.read_bytes().startswith(b"\x89PNG")
    return matplotlib.image.imread(path).shape[:2]


def write_metrics(folder: Path, columns: dict[str, list]) -> Path:
    folder.mkdir()
    pd.DataFrame(columns).to_csv(folder / "metrics.csv", index=False)
    return folder


def curves(axes) -> dict[str, tuple[list, list, str]]:
    """label: (steps, values, colour) of each line of a panel."""
    return {line.get_label(): (list(line.get_xdata()), list(line.get_ydata()), line.get_color())
            for line in axes.get_lines()}


def verdict(difference: float, low: float = math.nan, high: float = math.nan) -> Verdict:
    return Verdict("paired t", difference, low, high, 0.01, "better", 3)


def test_every_curve_any_folder_logged_gets_a_panel_with_each_folder_in_its_own_colour(tmp_path, monkeypatch):
    figures = drawn_figures(monkeypatch, comparison_figure)
    first = write_metrics(tmp_path / "first", {"step": [9, 19], "train/loss": [7.0, 6.0], "val/loss": [6.0, 5.5],
                                               "val/perplexity": [403.0, 245.0]})
    second = write_metrics(tmp_path / "second", {"step": [9, 19, 29], "val/loss": [6.2, 5.2, 5.1],
                                                 "val/accuracy": [0.1, 0.2, 0.3]})
    plot_curves([first, second], ["a", "b"], [{}, {}], tmp_path / "compare.png")
    (figure,) = figures
    # In CURVES' order; train/loss is no validation curve; no GLUE rows, no verdicts: no bars, no forest.
    assert [axes.get_title() for axes in figure.axes] == ["val/loss", "val/perplexity", "val/accuracy"]
    loss, perplexity, accuracy = figure.axes
    assert curves(loss) == {"a": ([9, 19], [6.0, 5.5], "C0"), "b": ([9, 19, 29], [6.2, 5.2, 5.1], "C1")}
    assert curves(perplexity) == {"a": ([9, 19], [403.0, 245.0], "C0")}
    assert curves(accuracy) == {"b": ([9, 19, 29], [0.1, 0.2, 0.3], "C1")}
    assert (perplexity.get_yscale(), loss.get_yscale(), accuracy.get_yscale()) == ("log", "linear", "linear")
    assert {axes.get_xlabel() for axes in figure.axes} == {"step"}
    assert [text.get_text() for text in loss.get_legend().get_texts()] == ["a", "b"]
    assert png_size(tmp_path / "compare.png") == (380, 3 * 500)  # 5 × 3.8 inches a panel, at 100 dpi


def test_a_fine_tune_with_a_selection_split_is_drawn_as_selection_and_dev_curves(tmp_path, monkeypatch):
    figures = drawn_figures(monkeypatch, comparison_figure)
    run = write_metrics(tmp_path / "run", {"step": [9, 19], "val/accuracy": [0.7, 0.8], "dev/accuracy": [0.6, 0.65]})
    plot_curves([run], ["run"], [{}], tmp_path / "compare.png")
    assert [axes.get_title() for axes in figures[0].axes] == ["selection/accuracy", "dev/accuracy"]
    assert curves(figures[0].axes[0]) == {"run": ([9, 19], [0.7, 0.8], "C0")}


def test_glue_scores_are_bars_per_suite_with_the_average_last_and_gaps_for_tasks_a_suite_lacks(tmp_path, monkeypatch):
    figures = drawn_figures(monkeypatch, comparison_figure)
    folders = [tmp_path / name for name in ("base", "run", "other")]
    for folder in folders:
        folder.mkdir()  # no metrics.csv: no curves
    rows = [{"GLUE sst2": 80.0, "GLUE rte": 55.0, GLUE_AVERAGE: 67.5}, {"val/loss": 5.0},
            {"GLUE rte": 57.0, "GLUE cola": 20.0}]
    plot_curves(folders, ["base", "run", "other"], rows, tmp_path / "compare.png")
    (axes,) = figures[0].axes
    assert axes.get_title() == "GLUE task scores"
    assert [label.get_text() for label in axes.get_xticklabels()] == ["cola", "rte", "sst2", "average"]
    # Two suites (the run without GLUE rows has no bars): each bar 0.4 wide, the second suite's beside the first's.
    assert list(axes.get_xticks()) == pytest.approx([0.2, 1.2, 2.2, 3.2])
    bars = {container.get_label(): container for container in axes.containers if isinstance(container, BarContainer)}
    assert list(bars) == ["base", "other"]
    for name, centres, heights, colour in (("base", [0, 1, 2, 3], [math.nan, 55.0, 80.0, 67.5], "C0"),
                                           ("other", [0.4, 1.4, 2.4, 3.4], [20.0, 57.0, math.nan, math.nan], "C2")):
        patches = bars[name].patches
        assert [patch.get_x() + patch.get_width() / 2 for patch in patches] == pytest.approx(centres)
        assert [patch.get_width() for patch in patches] == pytest.approx([0.4] * 4)
        assert [patch.get_height() for patch in patches] == pytest.approx(heights, nan_ok=True)
        assert {patch.get_facecolor() for patch in patches} == {to_rgba(colour)}  # the folder's colour
    assert png_size(tmp_path / "compare.png") == (380, 500)


def test_the_forest_shows_each_comparisons_differences_with_their_intervals_first_task_on_top():
    axes = Figure().add_subplot()
    plot_forest(axes, [("b against a", [{"task": "rte", "verdict": verdict(3.0, 2.7, 3.4)},
                                        {"task": "sst2", "verdict": verdict(-0.5, -1.5, 0.5)},
                                        {"task": GLUE_AVERAGE, "verdict": verdict(1.25)}]),  # one seed: no interval
                       ("c against a", [{"task": "rte", "verdict": verdict(-2.0, -4.0, 0.0)}])])
    # Tasks from the bottom: the average, sst2, rte; each comparison in a band of 0.3 of the 0.6 around its task.
    assert [label.get_text() for label in axes.get_yticklabels()] == [GLUE_AVERAGE, "sst2", "rte"]
    assert list(axes.get_yticks()) == [0, 1, 2]
    found = {}
    for container in axes.containers:
        assert isinstance(container, ErrorbarContainer)
        data, _, (spans,) = container.lines
        found[container.get_label()] = (list(data.get_xdata()), list(data.get_ydata()), data.get_color(),
                                        [(segment[0][0], segment[1][0]) for segment in spans.get_segments()])
    assert list(found) == ["b", "c"]
    b_x, b_y, b_colour, b_spans = found["b"]
    assert (b_x, b_colour) == ([1.25, -0.5, 3.0], "C1")  # each comparison in its suite's colour
    assert b_y == pytest.approx([-0.15, 0.85, 1.85])
    assert b_spans == pytest.approx([(1.25, 1.25), (-1.5, 0.5), (2.7, 3.4)])
    c_x, c_y, c_colour, c_spans = found["c"]
    assert (c_x, c_colour, c_spans) == ([-2.0], "C2", [(-4.0, 0.0)]) and c_y == pytest.approx([2.15])
    assert [line.get_xdata()[0] for line in axes.get_lines() if line.get_color() == "black"] == [0]  # the zero line
    assert axes.get_xlabel() == "task score ×100"


def test_the_forest_stands_last_beside_the_bars_and_leaves_out_comparisons_without_verdicts(tmp_path, monkeypatch):
    figures = drawn_figures(monkeypatch, comparison_figure)
    folders = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    for folder in folders:
        folder.mkdir()
    rows = [{"GLUE rte": 55.0}, {"GLUE rte": 58.0}, {"GLUE rte": 56.0}]
    judged = [("b against a", [{"task": "rte", "verdict": verdict(3.0, 2.0, 4.0)}], []),
              ("c against a", [], ["rte: not judged"])]
    plot_curves(folders, ["a", "b", "c"], rows, tmp_path / "compare.png", judged)
    bars, forest = figures[0].axes
    assert (bars.get_title(), forest.get_title()) == ("GLUE task scores", "difference against the baseline, 95% CI")
    assert [container.get_label() for container in forest.containers] == ["b"]
    assert png_size(tmp_path / "compare.png") == (380, 2 * 500)
