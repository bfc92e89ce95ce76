"""A GLUE suite's report, written into its folder: glue.csv (per task and metric the mean, std and median over
seeds, the task score, and the task score's spread and 95% interval over seeds), glue.md (those tables, and the
dev-selected figures beside the reported ones where the suite held out a selection split), glue_seeds.csv (each
task's score per seed, what `bertlab compare` judges) and glue.png."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from bertlab.atomic_files import write_atomically
from bertlab.tables import interval, markdown_row, markdown_table, write_csv, write_markdown
from bertlab.training.suites.glue import GLUE_AVERAGE, GLUE_CSV, GLUE_SEEDS
from bertlab.training.suites.glue_scores import glue_table, score_table, seed_scores


def write_glue_table(suite_dir: Path) -> str:
    """glue.csv, glue.md, glue_seeds.csv and glue.png in `suite_dir`; returns the Markdown."""
    rows, average = glue_table(suite_dir)
    seeds = seed_scores(suite_dir)
    scores = {row["task"]: row for row in score_table(seeds)}
    columns = ["task", "metric", "lr", "seeds", "mean", "std", "median", "task score", "other lrs",
               "task seeds", "task std", "task ci low", "task ci high", "dev-selected score"]

    def task_columns(task: str) -> dict[str, Any]:
        entry = scores.get(task, {})
        return {"task seeds": entry.get("seeds"), "task std": entry.get("std"), "task ci low": entry.get("ci low"),
                "task ci high": entry.get("ci high"), "dev-selected score": entry.get("dev-selected mean")}

    write_csv(suite_dir / GLUE_CSV, [*({**row, **task_columns(row["task"])} for row in rows),
                                     {"task": GLUE_AVERAGE, "task score": average, **task_columns(GLUE_AVERAGE)}],
              columns)
    write_csv(suite_dir / GLUE_SEEDS, seeds)
    grid = any(row["other lrs"] for row in rows)
    lines = markdown_table(
        ["task", "metric", "lr", "seeds", "mean ± std", "median", "task score",
         *["other lrs: selection score"] * grid],
        [[r["task"], r["metric"], f"{r['lr']:g}", r["seeds"], f"{r['mean']:.1f} ± {r['std']:.1f}",
          f"{r['median']:.1f}", f"{r['task score']:.1f}", *[r["other lrs"]] * grid] for r in rows])
    lines.append(markdown_row([f"**{GLUE_AVERAGE}**", *[None] * 5, f"**{average:.1f}**", *[None] * grid]))
    lines += ["", *score_lines(list(scores.values())), "", selection_note(seeds)]
    markdown = write_markdown(suite_dir / "glue.md", "\n".join(lines) + "\n")
    plot_glue(list(scores.values()), suite_dir / "glue.png")
    return markdown


def score_lines(table: list[dict[str, Any]]) -> list[str]:
    """The task scores over seeds as Markdown, with the honest-vs-dev columns where the suite held rows out."""
    held_out = any("dev-selected mean" in entry for entry in table)
    header = ["task score", "seeds", "mean", "std", "95% CI",
              *["dev-selected", "held-out − dev-selected [95% CI]"] * held_out]
    rows = []
    for entry in table:
        name = f"**{entry['task']}**" if entry["task"] == GLUE_AVERAGE else entry["task"]
        row = [name, entry["seeds"], f"{entry['mean']:.1f}", f"{entry['std']:.1f}",
               interval(entry["ci low"], entry["ci high"])]
        if held_out:
            row += ([f"{entry['dev-selected mean']:.1f}", f"{entry['held-out − dev-selected']:+.1f} "
                     f"{interval(entry['difference ci low'], entry['difference ci high'])}"]
                    if "dev-selected mean" in entry else [None, None])
        rows.append(row)
    return markdown_table(header, rows)


def selection_note(seeds: list[dict[str, Any]]) -> str:
    if all(row["held out"] for row in seeds):
        return ("Reported: the validation split, once, at the checkpoint and learning rate chosen on a selection "
                "split held out of each task's training rows; dev-selected: the same jobs with the checkpoint and rate "
                "chosen on the validation split instead (95% CI: Student's t over seeds; docs/statistics.md).")
    return ("Reported: the validation split at the checkpoint and learning rate chosen on the validation split "
            "itself (dev selection, as papers report; 95% CI: Student's t over seeds; docs/statistics.md).")


def plot_glue(table: list[dict[str, Any]], path: Path) -> None:
    """Each task's score and the GLUE average: the mean over seeds with its 95% interval; the dev-selected mean
    beside it where the suite held out a selection split."""
    figure = Figure(figsize=(7, 0.5 * len(table) + 1.5), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    table = table[::-1]
    positions = range(len(table))
    means = [entry["mean"] for entry in table]
    errors = [[0 if math.isnan(entry["ci low"]) else entry["mean"] - entry["ci low"] for entry in table],
              [0 if math.isnan(entry["ci high"]) else entry["ci high"] - entry["mean"] for entry in table]]
    axes.barh(positions, means, xerr=errors, capsize=3, color=["C1" if entry["task"] == GLUE_AVERAGE else "C0"
                                                               for entry in table], label="reported (95% CI)")
    dev = [(position, entry["dev-selected mean"]) for position, entry in zip(positions, table)
           if "dev-selected mean" in entry]
    if dev:
        axes.scatter([value for _, value in dev], [position for position, _ in dev], marker="D", color="black",
                     zorder=3, label="dev-selected mean")
    axes.set_yticks(list(positions), [f"{entry['task']} (n={entry['seeds']})" for entry in table])
    axes.set_xlabel("task score ×100: mean over seeds, 95% CI (Student's t)")
    axes.legend(loc="lower right", fontsize=8)
    axes.grid(axis="x", alpha=0.3)
    write_atomically(path, lambda temp: figure.savefig(temp, format="png", dpi=100))
