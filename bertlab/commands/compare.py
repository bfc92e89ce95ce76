"""`python -m bertlab compare [--output DIR] FOLDER FOLDER … [-- FOLDER FOLDER …]`: runs side by side — the config
keys that differ (between runs, and between suites and the bertlab runs they fine-tuned), the final validation
loss and perplexity (and the other final validation metrics), the wall time, the GLUE rows of a suite folder
(from `bertlab glue`) — their validation curves overlaid in one PNG, and the verdict between GLUE suites: per
task and for the GLUE average, the difference with its 95% interval and better / worse / no detectable
difference, drawn as a forest plot beside the curves (bertlab.training.suites.verdict; docs/statistics.md). Writes
compare.md, compare.csv, verdict.csv and compare.png into DIR (default outputs/compare/<time>) and prints the
tables.

A FOLDER is a run folder (config.yaml, metrics.csv) or a GLUE suite folder (glue.csv); a pretraining
run's `latest` link works too; a CSV file laid out as a suite's glue_seeds.csv (task, seed, score) stands for
a suite, so that per-seed scores from elsewhere can be judged. Each suite is judged against the first, seed
by seed; with `--`, the suites before it (one per pretraining run of the baseline) are judged as a group
against those after it, the pretraining run being the unit.
"""

from __future__ import annotations

from pathlib import Path

from bertlab.commands.arguments import ArgumentParser, add_overwrite, check_output
from bertlab.tables import write_csv, write_markdown
from bertlab.training.run.run_folder import timestamped_folder
from bertlab.training.suites.comparison import judge_suites, label, side_by_side, table_lines
from bertlab.training.suites.comparison_figure import plot_curves
from bertlab.training.suites.verdict import verdict_lines, verdict_row

RESULTS = ("compare.md", "compare.csv", "verdict.csv", "compare.png")


def compare(folders: list[Path], output: Path, against: list[Path] = ()) -> str:
    """Writes compare.md, compare.csv, verdict.csv and compare.png into `output`; returns the Markdown. With
    `against`, `folders` are the baseline group and `against` the group judged against it."""
    baseline_count = len(folders)
    folders = [*folders, *against]
    labels = [f"{index + 1}: {label(folder)}" for index, folder in enumerate(folders)]
    rows, columns, notes = side_by_side(folders, labels)
    output.mkdir(parents=True, exist_ok=True)
    write_csv(output / "compare.csv", rows, columns)
    lines = table_lines(labels, rows, columns)
    judged = judge_suites(folders, labels, baseline_count if against else None)
    verdict_rows = [{"comparison": name, **flat} for name, table, _ in judged for flat in map(verdict_row, table)]
    if verdict_rows:
        write_csv(output / "verdict.csv", verdict_rows)
    for name, table, verdict_notes in judged:
        lines += ["", f"**Verdict: {name}**", "", *verdict_lines(table), "", *verdict_notes]
    lines += ["", *notes, *(f"{name} = {folder}" for name, folder in zip(labels, folders))]
    markdown = write_markdown(output / "compare.md", "\n".join(lines) + "\n")
    plot_curves(folders, labels, rows, output / "compare.png", judged)
    return markdown


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
