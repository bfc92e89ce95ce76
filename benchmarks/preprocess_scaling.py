"""Pretraining preprocessing as the corpus grows: throughput and peak memory.

For each factor of `--factors` (1 10 100) it writes the lines of `--source` (the shared corpus's
corpus/train.txt under $BERTLAB_DATA_DIR or ../shared/data) that many times, shuffled with a fixed
seed, then runs `PretrainingDataModule.setup` on that file in a process of its own with an empty
cache: lines to arrow, documents, held-out validation documents, a WordPiece vocabulary of
`--vocab-size` (8192), tokenizing and packing into 128-token sequences in `--num-proc` processes (2).

Run from the repository root: `python -m benchmarks.preprocess_scaling [--output table.md]`. Prints a
markdown table (and writes it to `--output`): seconds of `setup`; tokens in the packed sequences of
both splits, [CLS] and [SEP] included; tokens/s; two memory peaks; and the size of the cache folder.
"peak anonymous" is the memory the run's processes hold together (the sum of their Pss_Anon in
/proc/PID/smaps_rollup, which splits the pages that forked workers share; sampled every 0.1 s, so
a shorter spike can be missed). "peak RSS" is the largest single process's (getrusage); it also counts
the pages of memory-mapped arrow files the process has read, which the kernel can drop, so it grows
with the files read even when the memory held does not. Linux only. Each corpus and cache is
deleted after its run; `--workdir` picks where they go (×100 of the shared corpus: a few GB).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.compute as pc

from bertlab.data.pretraining import PretrainingDataModule

SEED = 0
SAMPLE_SECONDS = 0.1
MIB = 2**20
DATA_DIR = Path(os.environ.get("BERTLAB_DATA_DIR") or Path(__file__).resolve().parents[2] / "shared" / "data")


def write_corpus(source: Path, factor: int, path: Path) -> int:
    """`source`'s lines, `factor` times each, in a seeded random order; returns the number of lines."""
    lines = source.read_bytes().splitlines()
    order = np.random.default_rng(SEED).permutation(len(lines) * factor)
    with path.open("wb") as corpus:
        corpus.writelines(lines[index % len(lines)] + b"\n" for index in order.tolist())
    return len(order)


def preprocess(corpus: Path, cache_dir: Path, num_proc: int, vocab_size: int) -> dict[str, float]:
    """What the child process measures: `setup` from an empty cache, and the tokens it packed."""
    started = time.perf_counter()
    module = PretrainingDataModule(str(corpus), vocab_size=vocab_size, cache_dir=str(cache_dir), num_proc=num_proc)
    module.setup("fit")
    seconds = time.perf_counter() - started
    tokens = sum(pc.sum(pc.list_value_length(split.data.column("input_ids"))).as_py()
                 for split in module.datasets.values())
    return {"seconds": seconds, "tokens": tokens}


def process_tree(pid: int) -> list[int]:
    try:
        children = [int(child) for task in Path(f"/proc/{pid}/task").iterdir()
                    for child in (task / "children").read_text().split()]
    except OSError:  # it ended meanwhile
        return []
    return [pid, *(process for child in children for process in process_tree(child))]


def anonymous_bytes(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            found = re.search(r"^Pss_Anon:\s+(\d+) kB", Path(f"/proc/{pid}/smaps_rollup").read_text(), re.MULTILINE)
        except OSError:  # it ended meanwhile
            continue
        total += int(found[1]) * 1024 if found else 0
    return total


def measured_run(arguments: list[str]) -> tuple[int, int]:
    """Runs `python arguments…`; returns its peak anonymous memory and peak RSS in bytes (see the docstring)."""
    # Its output (progress bars, the tokenizer trainer's) goes to stderr: stdout keeps the table alone.
    pid = os.posix_spawn(sys.executable, [sys.executable, *arguments], os.environ,
                         file_actions=[(os.POSIX_SPAWN_DUP2, 2, 1)])
    peak_anonymous = 0
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        peak_anonymous = max(peak_anonymous, anonymous_bytes(process_tree(pid)))
        time.sleep(SAMPLE_SECONDS)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"preprocessing run {arguments} failed")
    return peak_anonymous, usage.ru_maxrss * 1024  # ru_maxrss: KiB, the largest of the process and its children


def folder_bytes(folder: Path) -> int:
    return sum(file.stat().st_size for file in folder.rglob("*") if file.is_file())


def measure(args: argparse.Namespace, factor: int) -> str:
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.workdir) as folder:
        folder = Path(folder)
        lines = write_corpus(args.source, factor, folder / "train.txt")
        peak_anonymous, peak_rss = measured_run([
            "-m", "benchmarks.preprocess_scaling", f"--num-proc={args.num_proc}", f"--vocab-size={args.vocab_size}",
            "--run", str(folder / "train.txt"), str(folder / "cache"), str(folder / "result.json")])
        result = json.loads((folder / "result.json").read_text())
        cache = folder_bytes(folder / "cache")
    return (f"| ×{factor} | {lines:,} | {result['seconds']:.1f} | {result['tokens']:,} | "
            f"{result['tokens'] / result['seconds']:,.0f} | {peak_anonymous / MIB:,.0f} | {peak_rss / MIB:,.0f} | "
            f"{cache / MIB:,.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DATA_DIR / "corpus" / "train.txt")
    parser.add_argument("--factors", type=int, nargs="+", default=[1, 10, 100])
    parser.add_argument("--num-proc", type=int, default=2)
    parser.add_argument("--vocab-size", type=int, default=8192)
    parser.add_argument("--workdir", type=Path, help="where corpora and caches go (default: the temporary folder)")
    parser.add_argument("--output", type=Path, help="also write the table to this markdown file")
    parser.add_argument("--run", nargs=3, type=Path, help=argparse.SUPPRESS)  # the child: CORPUS CACHE_DIR RESULT
    args = parser.parse_args()
    if args.run:
        corpus, cache_dir, result = args.run
        result.write_text(json.dumps(preprocess(corpus, cache_dir, args.num_proc, args.vocab_size)))
        return
    lines = [f"Preprocessing {args.source} ×{' ×'.join(map(str, args.factors))}, lines shuffled (seed {SEED}); "
             f"vocabulary {args.vocab_size}, num_proc {args.num_proc}, {os.cpu_count()} CPU cores",
             "",
             "| corpus | lines | seconds | tokens | tokens/s | peak anonymous MiB | peak RSS MiB | cache MiB |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    print("\n".join(lines), flush=True)
    for factor in args.factors:
        lines.append(measure(args, factor))
        print(lines[-1], flush=True)
    if args.output:
        args.output.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
