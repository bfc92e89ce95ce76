"""The ablation's table on the standard objective (experiments/variant_ablation.sh): each arm's runs' final plain-text
figures and `bertlab compare`'s verdicts against the baseline's runs — on the plain-text measure, then on GLUE-small
for the arms scored there — read from the files compare wrote, never judged again here.

    python experiments/ablation_table.py table RECORDS
        writes RECORDS/table.md (two tables a person reads) and RECORDS/table.csv (every verdict row, an arm and a
        stage before it), and prints the Markdown
    python experiments/ablation_table.py moved RECORDS
        the arms whose plain-text verdict is better or worse, one a line: those worth a GLUE suite

RECORDS holds, for each judged arm, ARM_text.csv and ARM_text_verdict.csv (compare.csv and verdict.csv of `bertlab
compare BASELINE_RUNS -- ARM_RUNS`) and, for an arm scored on GLUE, ARM_glue.csv and ARM_glue_verdict.csv (of the
same over their suites).
"""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path

from bertlab.metrics import TEXT_RATIO
from bertlab.stats import BETTER, WORSE
from bertlab.tables import markdown_table, write_csv, write_markdown

# each run's final figures shown beside the verdict: compare.csv's column and its heading
RUN_FIGURES = {TEXT_RATIO: "perplexity ratio to unigram", "text/perplexity": "plain-text perplexity",
               "wall time (min)": "minutes"}
STAGES = {"text": "plain text", "glue": "GLUE-small"}


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def verdict_files(records: Path, stage: str) -> dict[str, Path]:
    """arm → its verdict.csv of `stage` (text or glue), by arm name."""
    suffix = f"_{stage}_verdict.csv"
    return {path.name.removesuffix(suffix): path for path in sorted(records.glob(f"*{suffix}"))}


def per_run(rows: list[dict[str, str]], column: str, digits: int) -> str:
    return " / ".join(f"{float(row[column]):,.{digits}f}" if row.get(column) else "–" for row in rows)


def runs_of(records: Path, arm: str, baseline_count: int) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """(baseline's, arm's) rows of the arm's compare.csv: the baseline's runs come first."""
    rows = read_rows(records / f"{arm}_text.csv")
    return rows[:baseline_count], rows[baseline_count:]


def span(row: dict[str, str], form: str, transform=float) -> str:
    """The difference's 95% interval of a verdict row, each bound through `transform` and formatted by `form`."""
    low, high = row["difference ci low"], row["difference ci high"]
    if not low or math.isnan(float(low)):
        return "[–]"
    return f"[{transform(float(low)):{form}}, {transform(float(high)):{form}}]"


def p_value(row: dict[str, str]) -> str:
    return "–" if not row["p"] or math.isnan(float(row["p"])) else f"{float(row['p']):.3f}"


def figure_cells(rows: list[dict[str, str]]) -> list[str]:
    return [per_run(rows, column, 3 if column == TEXT_RATIO else 1) for column in RUN_FIGURES]


def text_table(records: Path) -> tuple[list[str], list[dict[str, str]]]:
    """The plain-text table's lines and the CSV rows of its verdicts."""
    lines, csv_rows, baseline_line = [], [], None
    for arm, path in verdict_files(records, "text").items():
        (verdict,) = read_rows(path)
        baseline, runs = runs_of(records, arm, int(verdict["baseline n"]))
        if baseline_line is None:
            baseline_line = ["baseline", len(baseline), *figure_cells(baseline), "", "", "", "", ""]
        difference = float(verdict["difference"])
        lines.append([arm, len(runs), *figure_cells(runs), f"{difference:+.3f} {span(verdict, '+.3f')}",
                      f"×{math.exp(difference):.2f} {span(verdict, '.2f', math.exp)}", p_value(verdict),
                      verdict["verdict"], verdict["needed for 80% power"] or "–"])
        csv_rows.append({"arm": arm, "stage": STAGES["text"], **verdict,
                         **{RUN_FIGURES[column]: per_run(runs, column, 4) for column in RUN_FIGURES}})
    header = ["arm", "runs", *RUN_FIGURES.values(), f"difference in log {TEXT_RATIO} [95% CI]",
              "perplexity × baseline's [95% CI]", "p", "verdict", "runs a side for 80% power"]
    return (markdown_table(header, [baseline_line, *lines]) if lines else []), csv_rows


def glue_table(records: Path) -> tuple[list[str], list[dict[str, str]]]:
    """The GLUE-small table's lines (a column per task: the difference, its interval and the verdict) and the CSV
    rows of its verdicts."""
    judged = {arm: read_rows(path) for arm, path in verdict_files(records, "glue").items()}
    if not judged:
        return [], []
    tasks = list(dict.fromkeys(row["task"] for rows in judged.values() for row in rows))
    first = next(iter(judged.values()))
    baseline_line = ["baseline", first[0]["baseline n"],
                     *(next((f"{float(row['baseline mean']):.1f}" for row in first if row["task"] == task), "–")
                       for task in tasks)]
    lines, csv_rows = [], []
    for arm, rows in judged.items():
        by_task = {row["task"]: row for row in rows}
        lines.append([arm, rows[0]["n"], *(
            f"{float(row['mean']):.1f}: {float(row['difference']):+.1f} "
            f"{span(row, '+.1f')} {row['verdict']}"
            if (row := by_task.get(task)) else "–" for task in tasks)])
        csv_rows += [{"arm": arm, "stage": STAGES["glue"], **row} for row in rows]
    return markdown_table(["arm", "runs", *tasks], [baseline_line, *lines]), csv_rows


def table(records: Path) -> str:
    text_lines, text_rows = text_table(records)
    glue_lines, glue_rows = glue_table(records)
    if not text_rows:
        raise ValueError(f"{records}: no *_text_verdict.csv; judge an arm first (variant_ablation.sh judge ARM)")
    lines = [f"Each arm against the baseline on the plain-text measure: the log of each run's last {TEXT_RATIO}, "
             "lower is better, pretraining runs as the unit (Welch's test, `bertlab compare`). Each run's final "
             "figures, run by run:", "", *text_lines]
    if glue_lines:
        lines += ["", "The arms scored on GLUE-small, against the baseline's suites (pretraining runs as the unit): "
                  "each task's mean over the arm's runs, its difference [95% CI] and verdict:", "", *glue_lines]
    write_csv(records / "table.csv", text_rows + glue_rows,
              list(dict.fromkeys(key for row in text_rows + glue_rows for key in row)))
    return write_markdown(records / "table.md", "\n".join(lines) + "\n")


def moved(records: Path) -> list[str]:
    return [arm for arm, path in verdict_files(records, "text").items()
            if read_rows(path)[0]["verdict"] in (BETTER, WORSE)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["table", "moved"])
    parser.add_argument("records", type=Path, help="the folder of compare's records (docs/results/suites/ablation_plain)")
    arguments = parser.parse_args()
    try:
        print(table(arguments.records) if arguments.command == "table" else "\n".join(moved(arguments.records)))
    except (ValueError, OSError, KeyError) as error:
        parser.exit(2, f"error: {error}\n")


if __name__ == "__main__":
    main()
