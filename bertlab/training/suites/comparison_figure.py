"""The figure of `bertlab compare`: the validation curves overlaid, the GLUE task scores as bars, and the verdicts
as a forest plot."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from bertlab.atomic_files import write_atomically
from bertlab.metrics import TEXT_RATIO, metric_names, named_for_their_sets, read_metrics, series
from bertlab.training.suites.glue import GLUE_AVERAGE

CURVES = ("val/loss", "val/perplexity", "val/accuracy", "val_text/loss", "val_text/perplexity", "selection/loss",
          "selection/accuracy", "dev/loss", "dev/accuracy", TEXT_RATIO)


def color(index: int) -> str:
    """A folder's colour, the same in every panel."""
    return f"C{index % 10}"


def plot_curves(folders: list[Path], labels: list[str], rows: list[dict[str, Any]], path: Path,
                judged: list[tuple[str, list[dict[str, Any]], list[str]]] = ()) -> None:
    """The validation curves overlaid, one panel per metric, the GLUE task scores of suite folders as bars, and
    the verdicts as a forest plot: each task's difference with its 95% interval, a line at zero."""
    frames = [named_for_their_sets(read_metrics(folder)) for folder in folders]
    panels = [name for name in CURVES if any(name in metric_names(frame) for frame in frames)]
    tasks = sorted({key for row in rows for key in row if key.startswith("GLUE ")},
                   key=lambda key: (key == GLUE_AVERAGE, key))
    judged = [(name, table) for name, table, _ in judged if table]
    count = len(panels) + bool(tasks) + bool(judged)
    figure = Figure(figsize=(5 * max(1, count), 3.8), layout="constrained")
    FigureCanvasAgg(figure)
    for index, name in enumerate(panels):
        axes = figure.add_subplot(1, count, index + 1)
        for folder_index, (frame, label) in enumerate(zip(frames, labels)):
            if name in metric_names(frame):
                values = series(frame, name)
                axes.plot(values.index, values.values, marker="o", markersize=3, label=label, color=color(folder_index))
        axes.set_title(name)
        axes.set_xlabel("step")
        axes.grid(alpha=0.3)
        if "perplexity" in name:
            axes.set_yscale("log")
        axes.legend(fontsize=8)
    if tasks:
        axes = figure.add_subplot(1, count, len(panels) + 1)
        suites = [index for index, row in enumerate(rows) if any(key in row for key in tasks)]
        width = 0.8 / len(suites)
        for offset, index in enumerate(suites):
            axes.bar([task + offset * width for task in range(len(tasks))],
                     [rows[index].get(key, math.nan) for key in tasks], width, label=labels[index], color=color(index))
        axes.set_xticks([task + width * (len(suites) - 1) / 2 for task in range(len(tasks))],
                        [key.removeprefix("GLUE ") for key in tasks])
        axes.set_title("GLUE task scores")
        axes.grid(axis="y", alpha=0.3)
        axes.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncols=2)  # below: bars reach the top
    if judged:
        plot_forest(figure.add_subplot(1, count, count), judged)
    write_atomically(path, lambda temp: figure.savefig(temp, format="png", dpi=100))


def plot_forest(axes, judged: list[tuple[str, list[dict[str, Any]]]]) -> None:
    """Each comparison's differences by task, with their 95% intervals (a point alone where there is none)."""
    tasks = list(dict.fromkeys(entry["task"] for _, table in judged for entry in table))[::-1]
    height = 0.6 / len(judged)
    for index, (name, table) in enumerate(judged):
        entries = {entry["task"]: entry["verdict"] for entry in table}
        shown = [task for task in tasks if task in entries]
        positions = [tasks.index(task) - 0.3 + (index + 0.5) * height for task in shown]
        differences = [entries[task].difference for task in shown]
        errors = [[0 if math.isnan(entries[task].low) else entries[task].difference - entries[task].low for task in shown],
                  [0 if math.isnan(entries[task].high) else entries[task].high - entries[task].difference
                   for task in shown]]
        axes.errorbar(differences, positions, xerr=errors, fmt="o", capsize=3, color=color(index + 1),
                      label=name.split(" against ")[0])
    axes.axvline(0, color="black", linewidth=1)
    axes.set_yticks(range(len(tasks)), [task.removeprefix("GLUE ") if task != GLUE_AVERAGE else task for task in tasks])
    axes.set_title("difference against the baseline, 95% CI")
    axes.set_xlabel("task score ×100")
    axes.grid(axis="x", alpha=0.3)
    axes.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2))
