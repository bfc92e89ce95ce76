"""`python -m bertlab summarize SWEEP_FOLDER`: the final validation metrics of every run of a sweep
(`-m seed=1,2,3`), per run and as mean ± std, written as summary.csv and summary.md in the folder.
Every sweep also writes them when it ends (bertlab.training.suites.hydra_callbacks.SweepSummary)."""

from __future__ import annotations

from pathlib import Path

from bertlab.commands.arguments import ArgumentParser
from bertlab.training.suites.sweeps import summarize, write_tables


def main(argv: list[str], prog: str) -> None:
    parser = ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("sweep_dir", type=Path)
    args = parser.parse_args(argv)
    rows, metrics = summarize(args.sweep_dir)
    print(write_tables(args.sweep_dir, rows, metrics), end="")
    print(f"Written: {args.sweep_dir / 'summary.csv'}, {args.sweep_dir / 'summary.md'}")
