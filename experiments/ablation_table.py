"""The ablation's table (experiments/variant_ablation.sh): a row for each arm from its recorded pretraining runs and
their GLUE suites, judged against the main job's three recorded runs (main_job_verdict.py; each pretraining run a
unit, Welch's test).

    python experiments/ablation_table.py record RUN SUITE_DIR
        keep a finished run in docs/results/suites/ as ablation_ARM_sSEED.json (the pretraining's final figures, from
        RUN/metrics.json) and ablation_ARM_sSEED.csv (SUITE_DIR/glue_seeds.csv); RUN's folder name is ARM_sSEED
    python experiments/ablation_table.py
        the table of every recorded arm

An arm with one pretraining run gets its figures and its difference, no verdict: the spread between pretraining runs
of one recipe (docs/results/log/pretraining.md) is measured from more than one.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from collections import defaultdict
from pathlib import Path

import numpy as np
from main_job_verdict import MAIN_JOB_SUITES, SUITES, TASKS, suite_means

from bertlab.stats import compare_scores, summarize

RUN = re.compile(r"(?P<arm>.+)_s(?P<seed>\d+)")
# each recorded figure and the metrics.json key it comes from (train/time is in seconds)
METRICS = {"steps": "train/batches", "minutes": "train/time", "loss": "val/loss", "ppl": "val_text/perplexity"}


def record(run: Path, suite: Path) -> None:
    if not RUN.fullmatch(run.name):
        raise ValueError(f"{run}: the run folder's name is not ARM_sSEED")
    suite_means(suite / "glue_seeds.csv")  # refuses a suite that has not scored every task yet
    final = json.loads((run / "metrics.json").read_text()).get("final", {})
    missing = [key for key in METRICS.values() if key not in final]
    if missing:
        raise ValueError(f"{run / 'metrics.json'}: no final {', '.join(missing)} (has the run finished?)")
    figures = {name: final[key] for name, key in METRICS.items()}
    figures["steps"], figures["minutes"] = int(figures["steps"]), figures["minutes"] / 60
    (SUITES / f"ablation_{run.name}.json").write_text(json.dumps(figures, indent=1) + "\n")
    shutil.copyfile(suite / "glue_seeds.csv", SUITES / f"ablation_{run.name}.csv")
    print(f"recorded {run.name} in {SUITES}")


def arms() -> dict[str, list[tuple[dict, dict]]]:
    """Each recorded arm's (pretraining figures, suite means) per run, in seed order."""
    found = defaultdict(list)
    for figures in SUITES.glob("ablation_*_s*.json"):
        match = RUN.fullmatch(figures.stem.removeprefix("ablation_"))
        found[match["arm"]].append((int(match["seed"]), json.loads(figures.read_text()),
                                    suite_means(figures.with_suffix(".csv"))))
    return {arm: [(figures, means) for _, figures, means in sorted(rows, key=lambda row: row[0])]
            for arm, rows in sorted(found.items())}


def joined(values: list[float], digits: int = 1) -> str:
    return " / ".join(f"{value:,.{digits}f}" for value in values)


def task_cells(runs: list[dict]) -> str:
    """Each task's mean over the runs, as table cells."""
    return " | ".join(f"{np.mean([run[task] for run in runs]):.1f}" for task in TASKS)


def table() -> None:
    baseline = [suite_means(path) for path in MAIN_JOB_SUITES]
    base = summarize([run["glue"] for run in baseline])
    print(f"`mlm_tiny_wiki` as shipped ({len(baseline)} runs): GLUE-small {base.mean:.1f} ± {base.std:.1f}, "
          f"{joined([run['glue'] for run in baseline])}\n")
    print("| arm | runs | steps | training min | held-out loss | plain-text ppl | "
          + " | ".join(TASKS) + " | GLUE-small | difference [95% CI] | verdict |")
    print("| --- " * (9 + len(TASKS)) + "|")
    print(f"| baseline | {len(baseline)} | (docs/results/pretraining.md) | | | | {task_cells(baseline)} | "
          f"{base.mean:.1f} ± {base.std:.1f} | | |")
    for arm, rows in arms().items():
        figures, means = [row[0] for row in rows], [row[1] for row in rows]
        glue = [run["glue"] for run in means]
        if len(rows) > 1:
            result, side = compare_scores([run["glue"] for run in baseline], glue, paired=False), summarize(glue)
            scored = (f"{side.mean:.1f} ± {side.std:.1f} ({joined(glue)}) | {result.difference:+.1f} "
                      f"[{result.low:+.1f}, {result.high:+.1f}] | {result.verdict}")
        else:
            scored = f"{glue[0]:.1f} | {glue[0] - base.mean:+.1f} | one run: not judged"
        print(f"| {arm} | {len(rows)} | {joined([run['steps'] for run in figures], 0)} | "
              f"{joined([run['minutes'] for run in figures])} | {joined([run['loss'] for run in figures], 2)} | "
              f"{joined([run['ppl'] for run in figures], 0)} | {task_cells(means)} | {scored} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command")
    recording = commands.add_parser("record", help="keep a finished run and its suite in docs/results/suites/")
    recording.add_argument("run", type=Path, help="the pretraining run's folder, named ARM_sSEED")
    recording.add_argument("suite", type=Path, help="its GLUE suite's folder (holding glue_seeds.csv)")
    arguments = parser.parse_args()
    try:
        if arguments.command == "record":
            record(arguments.run, arguments.suite)
        else:
            table()
    except (ValueError, OSError) as error:
        parser.exit(2, f"error: {error}\n")


if __name__ == "__main__":
    main()
