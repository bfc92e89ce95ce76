"""The rows of `bertlab compare`: for each run folder, GLUE suite folder or CSV of per-seed scores, its final
validation metrics, wall time and GLUE task scores, beside the config keys that differ (between runs, and between
suites and the bertlab runs they fine-tuned); and the verdicts between its suites (bertlab.training.suites.verdict).
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import OmegaConf

from bertlab.checkpoint.dispatch import read_config
from bertlab.errors import CheckpointError, DataError
from bertlab.metrics import (TEXT_RATIO, VALIDATION_PREFIXES, best_point, final_values, metric_names,
                             named_for_their_sets, read_metrics, series)
from bertlab.tables import markdown_table
from bertlab.training.run.model_group import ARCHITECTURE_KEYS
from bertlab.training.run.run_folder import CONFIG, TIMESTAMP, TIMING
from bertlab.training.suites.glue import GLUE_AVERAGE, GLUE_CSV, job_configs
from bertlab.training.suites.verdict import log_text_ratio, suite_seed_scores, text_verdicts, verdicts

# Keys that differ between any two runs and say nothing about the experiment.
IGNORED = ("paths.", "hydra.", "resume", "trainer.default_root_dir", "logger.", "callbacks.checkpoint.dirpath")


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
        return as_built(flatten(folder / CONFIG))
    jobs = [flatten(path) for path in job_configs(folder)]
    if not jobs:
        return {}
    return as_built({key: value for key, value in jobs[0].items()
                     if all(key in job and job[key] == value for job in jobs)})


def as_built(config: dict[str, Any]) -> dict[str, Any]:
    """A config whose model came from `model.init_from` with the architecture that checkpoint gave it: the
    `model` group's own architecture keys were not used (bertlab.training.run.model_group), so showing them
    would set a pretrained rotary model beside a "scratch" one as if it were absolute. Where the checkpoint is
    gone or is no folder (a hub id), those keys are left out."""
    init_from = config.get("model.init_from")
    if not init_from:
        return config
    try:
        built = read_config(init_from).to_dict()
    except (CheckpointError, OSError):
        built = {}
    architecture = {f"model.{key}": built[key] for key in ARCHITECTURE_KEYS if key in built}
    own = {key: value for key, value in config.items()
           if not (key.startswith("model.") and key.removeprefix("model.") in ARCHITECTURE_KEYS)}
    return {**own, **architecture}


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
    row.update(final_values(named_for_their_sets(frame), prefix=VALIDATION_PREFIXES))
    row.update(exported_values(frame, flat_config(folder)))
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


def exported_values(frame: pd.DataFrame, config: dict[str, Any]) -> dict[str, float]:
    """For a run that exports its best checkpoint (a `monitor`), each validation metric at that checkpoint's step,
    as "<metric> (exported)", beside the final values."""
    monitor = config.get("monitor")
    if monitor not in frame.columns or series(frame, monitor).empty:
        return {}
    step, _ = best_point(series(frame, monitor), config.get("monitor_mode"), monitor)
    named = named_for_their_sets(frame)
    at_step = named[named["step"] == step]
    return {f"{name} (exported)": float(at_step[name].dropna().iloc[-1]) for name in metric_names(named)
            if name.startswith(VALIDATION_PREFIXES) and not at_step[name].dropna().empty}


def differing_keys(configs: list[dict[str, Any]], everywhere: bool = False) -> list[str]:
    """The keys whose values differ between the folders that have a config (one without, a suite whose jobs are
    gone, is left out); with `everywhere`, only among the keys every config has."""
    configs = [config for config in configs if config]
    keys = set.intersection(*map(set, configs)) if everywhere and configs else set().union(*configs)
    return [key for key in sorted(keys) if not key.startswith(IGNORED)
            and len({json.dumps(config.get(key), sort_keys=True, default=str) for config in configs}) > 1]


def cell_text(value: Any) -> str:
    """A value as a table cell shows it: floats to 4 significant digits, null as empty."""
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


def check_one_kind(folders: list[Path], labels: list[str], configs: list[dict[str, Any]]) -> None:
    """Runs of different commands share no metric worth a row (a masked LM's token accuracy is not a classifier's
    accuracy): refused, naming each run's kind. Suites sit beside the runs they fine-tuned, in rows of their own."""
    commands = {name: config["command"] for folder, name, config in zip(folders, labels, configs)
                if not is_suite(folder) and config.get("command")}
    if len(set(commands.values())) > 1:
        kinds = ", ".join(f"{name} is a `{command}` run" for name, command in commands.items())
        raise DataError(f"compare: runs of different kinds ({kinds}); their metrics do not compare: give runs of one kind")


def side_by_side(folders: list[Path], labels: list[str]) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """The comparison's rows (each folder's results and the config keys that differ), its columns (the differing
    keys first, then the results), and a line for each GLUE average left out."""
    rows = [describe(folder) for folder in folders]
    configs = [flat_config(folder) for folder in folders]
    check_one_kind(folders, labels, configs)
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
    return rows, columns, notes


def table_lines(labels: list[str], rows: list[dict[str, Any]], columns: list[str]) -> list[str]:
    """One line per key, one column per run: the differing keys first, then the results."""
    return markdown_table([None, *labels],
                          ([key, *(cell_text(row.get(key)) for row in rows)] for key in columns[1:]))


def judge_suites(folders: list[Path], labels: list[str], baseline_count: int | None
                 ) -> list[tuple[str, list[dict[str, Any]], list[str]]]:
    """(name, verdict table, notes) of each comparison: the group after `--` against the group before it, or
    each suite against the first suite; pretraining runs on the plain-text measure (`text_verdicts`), groups
    of them with `--`, else each against the first."""
    scores = [suite_seed_scores(folder) if is_suite(folder) or folder.is_file() else None for folder in folders]
    ratios = [None if rows is not None else log_text_ratio(folder) for folder, rows in zip(folders, scores)]
    if baseline_count is not None and None not in ratios:
        name = f"{', '.join(labels[baseline_count:])} against {', '.join(labels[:baseline_count])}"
        return [(name, *text_verdicts(ratios[:baseline_count], ratios[baseline_count:]))]
    runs = [(label, ratio) for label, ratio in zip(labels, ratios) if ratio is not None]
    judged_runs = [(f"{label} against {runs[0][0]}", *text_verdicts([runs[0][1]], [ratio])) for label, ratio in runs[1:]]
    if baseline_count is not None:
        missing = [label for label, rows in zip(labels, scores) if rows is None]
        if missing:
            raise DataError(f"compare … -- …: {', '.join(missing)}: not a GLUE suite; groups hold GLUE suites "
                            f"(one per pretraining run) or CSVs of per-seed scores, or pretraining runs that "
                            f"logged {TEXT_RATIO}")
        table, notes = verdicts(scores[:baseline_count], scores[baseline_count:])
        name = f"{', '.join(labels[baseline_count:])} against {', '.join(labels[:baseline_count])}"
        return [(name, table, notes)]
    suites = [(label, rows) for label, rows in zip(labels, scores) if rows is not None]
    return judged_runs + [(f"{label} against {suites[0][0]}", *verdicts([suites[0][1]], [rows]))
                          for label, rows in suites[1:]]
