"""`python -m bertlab compare [--output DIR] FOLDER FOLDER … [-- FOLDER FOLDER …]`: runs side by side — the config
keys that differ (between runs, and between suites and the bertlab runs they fine-tuned), the final validation
loss and perplexity (and the other final validation metrics), the wall time, the GLUE rows of a suite folder
(from `bertlab glue`) — their validation curves overlaid in one PNG, and the verdict between GLUE suites: per
task and for the GLUE average, the difference with its 95% interval and better / worse / no detectable
difference, drawn as a forest plot beside the curves (bertlab.training.verdict; docs/statistics.md). Writes
compare.md, compare.csv, verdict.csv and compare.png into DIR (default outputs/compare/<time>) and prints the
tables.

A FOLDER is a run folder (config.yaml, metrics.csv) or a GLUE suite folder (glue.csv); a pretraining
run's `latest` link works too; a CSV file laid out as a suite's glue_seeds.csv (task, seed, score) stands for
a suite, so that per-seed scores from elsewhere can be judged. Each suite is judged against the first, seed
by seed; with `--`, the suites before it (one per pretraining run of the baseline) are judged as a group
against those after it, the pretraining run being the unit.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from omegaconf import OmegaConf

from bertlab.commands.arguments import ArgumentParser, add_overwrite, check_output
from bertlab.errors import DataError
from bertlab.hf_format import write_atomically
from bertlab.metrics import VALIDATION_PREFIXES, final_values, metric_names, read_metrics, series
from bertlab.training.glue import GLUE_AVERAGE, GLUE_CSV, job_configs
from bertlab.training.verdict import suite_seed_scores, verdicts
from bertlab.training.run_folder import CONFIG, TIMESTAMP, TIMING, timestamped_folder

# Keys that differ between any two runs and say nothing about the experiment.
IGNORED = ("paths.", "hydra.", "resume", "trainer.default_root_dir", "logger.", "callbacks.checkpoint.dirpath")
CURVES = ("val/loss", "val/perplexity", "val/accuracy", "val_text/loss", "val_text/perplexity")
RESULTS = ("compare.md", "compare.csv", "verdict.csv", "compare.png")


def flatten(path: Path) -> dict[str, Any]:
    """A YAML config as dotted key → value."""
    flat: dict[str, Any] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{prefix}{key}.")
        else:
            flat[prefix[:-1]] = node

    walk(OmegaConf.to_container(OmegaConf.load(path)), "")
    return flat


def is_suite(folder: Path) -> bool:
    """A GLUE suite folder (glue.csv, its jobs below it), not a run folder (config.yaml)."""
    return (folder / GLUE_CSV).is_file() and not (folder / CONFIG).is_file()


def flat_config(folder: Path) -> dict[str, Any]:
    """A run's resolved config as dotted key → value. A GLUE suite's is what all its jobs share, so that
    their task, seed and rate drop out and two suites differ in what was fine-tuned and how."""
    if (folder / CONFIG).is_file():
        return flatten(folder / CONFIG)
    jobs = [flatten(path) for path in job_configs(folder)]
    if not jobs:
        return {}
    return {key: value for key, value in jobs[0].items() if all(key in job and job[key] == value for job in jobs)}


def pretraining_config(suite_config: dict[str, Any]) -> dict[str, Any]:
    """For a suite that fine-tuned a bertlab run's export (`<run>/hf_model`), that run's config as
    `pretraining.<key>`, so that suites of two pretrainings differ in how they pretrained, not only in the
    checkpoint's path; empty for other checkpoints."""
    init_from = suite_config.get("model.init_from")
    run_config = Path(init_from).parent / CONFIG if isinstance(init_from, str) else None
    if run_config is None or not run_config.is_file():
        return {}
    return {f"pretraining.{key}": value for key, value in flatten(run_config).items() if not key.startswith(IGNORED)}


def describe(folder: Path) -> dict[str, Any]:
    """One row of the comparison: final validation metrics, wall time, GLUE task scores."""
    if folder.is_file():  # per-seed scores laid out as glue_seeds.csv
        seeds = suite_seed_scores(folder)
        return {"run": str(folder), **{task if task == GLUE_AVERAGE else f"GLUE {task}": statistics.fmean(
            row["score"] for row in seeds if row["task"] == task) for task in dict.fromkeys(r["task"] for r in seeds)}}
    if not folder.is_dir():
        raise DataError(f"{folder}: no such folder; expected a run folder, a GLUE suite folder or a CSV of "
                        f"per-seed scores")
    row: dict[str, Any] = {"run": str(folder)}
    frame = read_metrics(folder)
    row.update(final_values(frame, prefix=VALIDATION_PREFIXES))
    timing = folder / TIMING
    if timing.is_file():
        row["wall time (min)"] = json.loads(timing.read_text())["wall_time_min"]
    glue = folder / GLUE_CSV
    if glue.is_file():
        with glue.open(newline="") as handle:
            for line in csv.DictReader(handle):
                name = GLUE_AVERAGE if line["task"] == GLUE_AVERAGE else f"GLUE {line['task']}"
                row[name] = float(line["task score"])
    if len(row) == 1 and not flat_config(folder):
        raise DataError(f"{folder}: neither a run folder (config.yaml, metrics.csv) nor a GLUE suite (glue.csv)")
    return row


def differing_keys(configs: list[dict[str, Any]], everywhere: bool = False) -> list[str]:
    """The keys whose values differ between the folders that have a config (one without, a suite whose jobs are
    gone, is left out); with `everywhere`, only among the keys every config has."""
    configs = [config for config in configs if config]
    keys = set.intersection(*map(set, configs)) if everywhere and configs else set().union(*configs)
    return [key for key in sorted(keys) if not key.startswith(IGNORED)
            and len({json.dumps(config.get(key), sort_keys=True, default=str) for config in configs}) > 1]


def color(index: int) -> str:
    """A folder's colour, the same in every panel."""
    return f"C{index % 10}"


def plot_curves(folders: list[Path], labels: list[str], rows: list[dict[str, Any]], path: Path,
                judged: list[tuple[str, list[dict[str, Any]], list[str]]] = ()) -> None:
    """The validation curves overlaid, one panel per metric, the GLUE task scores of suite folders as bars, and
    the verdicts as a forest plot: each task's difference with its 95% interval, a line at zero."""
    frames = [read_metrics(folder) for folder in folders]
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


def format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    return "" if value is None else str(value)


def label(folder: Path) -> str:
    """The folder's name; a folder named by its start time (outputs/<name>/<time>, the target of `latest`, and
    a suite's outputs/glue/<name>/<time>[_scratch]) is `<name>/<time>`: the time alone does not say which
    experiment it was. A suite is named as the run it fine-tuned, so its label starts with `glue/`."""
    folder = folder.resolve()
    name = f"{folder.parent.name}/{folder.name}" if TIMESTAMP.match(folder.name) else folder.name
    return f"glue/{name}" if is_suite(folder) else name


def drop_partial_averages(rows: list[dict[str, Any]], labels: list[str]) -> list[str]:
    """Leaves out the GLUE average of a suite that lacks a task another compared suite ran: averages over
    different tasks are not comparable. Returns a line for each average left out."""
    tasks = [{key for key in row if key.startswith("GLUE ")} - {GLUE_AVERAGE} for row in rows]
    compared = set().union(*tasks)
    notes = []
    for row, name, row_tasks in zip(rows, labels, tasks):
        if GLUE_AVERAGE in row and row_tasks != compared:
            del row[GLUE_AVERAGE]
            missing = ", ".join(sorted(key.removeprefix("GLUE ") for key in compared - row_tasks))
            notes.append(f"{name}: {GLUE_AVERAGE} left out, the suite has no {missing}")
    return notes


def compare(folders: list[Path], output: Path, against: list[Path] = ()) -> str:
    """Writes compare.md, compare.csv, verdict.csv and compare.png into `output`; returns the Markdown. With
    `against`, `folders` are the baseline group and `against` the group judged against it."""
    baseline_count = len(folders)
    folders = [*folders, *against]
    rows = [describe(folder) for folder in folders]
    labels = [f"{index + 1}: {label(folder)}" for index, folder in enumerate(folders)]
    configs = [flat_config(folder) for folder in folders]
    # Runs are compared with runs and suites with suites: a pretraining config and a fine-tuning one differ in
    # nearly every key. A key some suite lacks is one its jobs set per task; its GLUE rows say which tasks ran.
    kinds = [is_suite(folder) for folder in folders]
    differing = {kind: differing_keys([config for config, other in zip(configs, kinds) if other == kind], kind)
                 for kind in set(kinds)}
    # A suite of another checkpoint has no pretraining keys: those differ among the suites that have them.
    pretrainings = [pretraining_config(config) if kind else {} for config, kind in zip(configs, kinds)]
    if True in differing:
        differing[True] += differing_keys(pretrainings)
    configs = [{**config, **pretraining} for config, pretraining in zip(configs, pretrainings)]
    for row, config, kind in zip(rows, configs, kinds):
        row.update({key: config.get(key) for key in differing[kind]})
    keys = sorted(set().union(*differing.values()))
    notes = drop_partial_averages(rows, labels)
    columns = ["run", *keys, *sorted({key for row in rows for key in row} - {"run", *keys})]
    output.mkdir(parents=True, exist_ok=True)

    def write_csv(temp: str) -> None:
        with open(temp, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            writer.writerows(rows)

    write_atomically(output / "compare.csv", write_csv)
    # One line per key, one column per run: the differing keys first, then the results.
    lines = ["| | " + " | ".join(labels) + " |", "|" + " --- |" * (len(labels) + 1)]
    lines += ["| " + " | ".join([key, *(format_value(row.get(key)) for row in rows)]) + " |" for key in columns[1:]]
    judged = judge_suites(folders, labels, baseline_count if against else None)
    verdict_rows = [{"comparison": name, **flat} for name, table, _ in judged for flat in map(verdict_row, table)]
    if verdict_rows:
        def write_verdicts(temp: str) -> None:
            with open(temp, "w", newline="") as handle:
                writer = csv.DictWriter(handle, fieldnames=list(verdict_rows[0]))
                writer.writeheader()
                writer.writerows(verdict_rows)

        write_atomically(output / "verdict.csv", write_verdicts)
    for name, table, verdict_notes in judged:
        lines += ["", f"**Verdict: {name}**", "", *verdict_lines(table), "", *verdict_notes]
    lines += ["", *notes, *(f"{label} = {folder}" for label, folder in zip(labels, folders))]
    markdown = "\n".join(lines) + "\n"
    write_atomically(output / "compare.md", lambda temp: Path(temp).write_text(markdown))
    plot_curves(folders, labels, rows, output / "compare.png", judged)
    return markdown


def judge_suites(folders: list[Path], labels: list[str], baseline_count: int | None
                 ) -> list[tuple[str, list[dict[str, Any]], list[str]]]:
    """(name, verdict table, notes) of each comparison: the group after `--` against the group before it, or
    each suite against the first suite."""
    scores = [suite_seed_scores(folder) if is_suite(folder) or folder.is_file() else None for folder in folders]
    if baseline_count is not None:
        missing = [label for label, rows in zip(labels, scores) if rows is None]
        if missing:
            raise DataError(f"compare … -- …: {', '.join(missing)}: not a GLUE suite; groups hold GLUE suites "
                            f"(one per pretraining run) or CSVs of per-seed scores")
        table, notes = verdicts(scores[:baseline_count], scores[baseline_count:])
        name = f"{', '.join(labels[baseline_count:])} against {', '.join(labels[:baseline_count])}"
        return [(name, table, notes)]
    suites = [(label, rows) for label, rows in zip(labels, scores) if rows is not None]
    return [(f"{label} against {suites[0][0]}", *verdicts([suites[0][1]], [rows]))
            for label, rows in suites[1:]]


def verdict_row(entry: dict[str, Any]) -> dict[str, Any]:
    """A verdict table entry as flat columns, for verdict.csv."""
    a, b, verdict = entry["baseline"], entry["other"], entry["verdict"]
    return {"task": entry["task"], "unit": entry["unit"], "baseline n": a.n, "baseline mean": a.mean,
            "baseline ci low": a.low, "baseline ci high": a.high, "n": b.n, "mean": b.mean, "ci low": b.low,
            "ci high": b.high, "difference": verdict.difference, "difference ci low": verdict.low,
            "difference ci high": verdict.high, "test": verdict.test, "p": verdict.p_value,
            "verdict": verdict.verdict, "needed for 80% power": verdict.needed}


def verdict_lines(table: list[dict[str, Any]]) -> list[str]:
    lines = ["| task | baseline mean [95% CI] (n) | mean [95% CI] (n) | difference [95% CI] | test | p | verdict | "
             "n for 80% power |", "|" + " --- |" * 8]
    for entry in table:
        a, b, verdict = entry["baseline"], entry["other"], entry["verdict"]
        needed = "–" if verdict.needed is None else f"{verdict.needed} {entry['unit']}" + (
            " a side" if verdict.test == "Welch t" else "")
        lines.append(f"| {entry['task']} | {a.mean:.1f} {span(a.low, a.high)} ({a.n}) | {b.mean:.1f} "
                     f"{span(b.low, b.high)} ({b.n}) | {verdict.difference:+.1f} {span(verdict.low, verdict.high)} | "
                     f"{verdict.test} | {'–' if math.isnan(verdict.p_value) else f'{verdict.p_value:.3f}'} | "
                     f"{verdict.verdict} | {needed} |")
    return lines


def span(low: float, high: float) -> str:
    return "[–]" if math.isnan(low) else f"[{low:.1f}, {high:.1f}]"


def main(argv: list[str], prog: str) -> None:
    parser = ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("folders", nargs="+", type=Path,
                        help="run folders, GLUE suite folders or CSVs of per-seed scores; `--` between two groups")
    parser.add_argument("--output", type=Path, help="where compare.md/.csv/.png go (default: outputs/compare/<time>)")
    add_overwrite(parser)
    baseline, separator, against = (argv[:argv.index("--")], "--", argv[argv.index("--") + 1:]) if "--" in argv \
        else (argv, "", [])
    args = parser.parse_args(baseline)
    if separator and not against:
        parser.error("`--` separates two groups of GLUE suites: give the second group after it")
    if args.output:
        check_output("--output", args.output, args.overwrite, RESULTS)
    output = args.output or timestamped_folder("compare")
    print(compare(args.folders, output, [Path(item) for item in against]), end="")
    written = ["compare.md", "compare.csv", *(["verdict.csv"] * (output / "verdict.csv").is_file()), "compare.png"]
    print(f"Written: {', '.join(str(output / name) for name in written)}")
