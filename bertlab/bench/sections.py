"""The sections of `python -m bertlab bench`, each run over the sizes and precisions asked for, their results
printed as they come. Each imports its measuring modules when it runs: they import transformers, a dev extra
that the command checks for first."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import torch

from bertlab.errors import BertlabError

SMALL_VOCAB = 8192  # the small recipes' trained WordPiece vocabulary
SMALL_VOCAB_SIZES = ("bert_tiny", "bert_mini", "bert_small")


class Progress:
    """Prints each comparison's results as they come, with the time since the start."""

    def __init__(self) -> None:
        self.started = time.perf_counter()

    def show(self, results: list) -> list:
        print(f"[{time.perf_counter() - self.started:4.0f} s]", flush=True)
        for r in results:
            print(f"  {r.case:<10} {r.precision:<5} {r.system:<34} {r.throughput:>10,.1f} {r.unit:<12} "
                  f"(median of {len(r.timing.seconds)}, spread ±{50 * r.timing.spread:.0f}%)", flush=True)
        return results


def pretraining_results(args: argparse.Namespace, model_dir: str, device: torch.device, precisions: list[str],
                        progress: Progress) -> list:
    from bertlab.bench import pretraining
    from bertlab.tokenizer import load_tokenizer, special_token_ids

    tokenizer = load_tokenizer(model_dir)  # its vocabulary (bert-base-uncased's) for both systems
    special_ids = special_token_ids(tokenizer)
    results = []
    for size in args.sizes:
        for precision in precisions:
            config = pretraining.mlm_config(size, tokenizer.get_vocab_size(), args.dropout)
            setup = pretraining.MlmSetup(size, config, args.batch_size, args.length, model_dir, device, precision,
                                         args.steps, args.warmup, compile=args.compile)
            fast_paths = tuple(name for name in chosen_fast_paths(args.fast_paths, pretraining.FAST_PATH_SWITCHES)
                               if not (args.compile and name == "torch.compile"))
            small_vocab = SMALL_VOCAB if size in SMALL_VOCAB_SIZES else None
            results += progress.show(pretraining.compare(setup, special_ids, args.repeats, small_vocab=small_vocab,
                                                         fast_paths=fast_paths))
    return results


def modernbert_results(args: argparse.Namespace, model_dir: str, device: torch.device, precisions: list[str],
                       progress: Progress) -> list:
    """bertlab's ModernBERT-shaped step against transformers' ModernBertForMaskedLM (bertlab.bench.modernbert)."""
    from bertlab.bench import modernbert, pretraining
    from bertlab.tokenizer import load_tokenizer, special_token_ids

    tokenizer = load_tokenizer(model_dir)
    special_ids = special_token_ids(tokenizer)
    results = []
    for precision in precisions:
        base = pretraining.MlmSetup("", pretraining.mlm_config("bert_tiny", tokenizer.get_vocab_size()),
                                    args.batch_size, args.length, model_dir, device, precision, args.steps,
                                    args.warmup, compile=args.compile)
        for setup in modernbert.setups(base, tuple(args.sizes), tokenizer.get_vocab_size(), args.dropout):
            results += progress.show(modernbert.compare(setup, special_ids, args.repeats))
    return results


def chosen_fast_paths(names: str | None, switches: Iterable[str]) -> list[str]:
    """--fast-paths' names: none without the flag, all of `switches` with "all"."""
    if names is None:
        return []
    if names == "all":
        return list(switches)
    chosen = [name.strip() for name in names.split(",")]
    if unknown := [name for name in chosen if name not in switches]:
        raise BertlabError(f"--fast-paths: unknown {', '.join(unknown)}; expected some of {', '.join(switches)}")
    return chosen


def sst2_results(args: argparse.Namespace, model_dir: str, model_name: str, device: torch.device,
                 precisions: list[str], progress: Progress) -> list:
    from bertlab.bench import fine_tuning, inference

    sst2_dir = Path(args.data_dir) / "sst2"
    wanted = [section for section in ("fine-tuning", "inference") if section in args.sections]
    if wanted and not (sst2_dir / "train.parquet").is_file():
        print(f"skipping {' and '.join(wanted)}: no SST-2 at {sst2_dir} (set BERTLAB_DATA_DIR or --data-dir "
              f"to a folder laid out like shared/data)", file=sys.stderr)
        return []
    results = []
    if "fine-tuning" in wanted:
        setup = fine_tuning.FineTuneSetup(sst2_dir, model_dir, model_name, device, args.fine_tune_steps,
                                          args.warmup, batch_size=args.batch_size)
        results += progress.show(fine_tuning.compare(setup, precisions, args.repeats))
    if "inference" in wanted:
        texts = inference.validation_sentences(sst2_dir, args.inference_sentences)
        results += progress.show(inference.compare(model_dir, model_name, texts, device, precisions, args.repeats))
    return results


def conll_results(args: argparse.Namespace, model_dir: str, model_name: str, device: torch.device,
                  precisions: list[str], progress: Progress) -> list:
    """The fine-tuning section's token-classification row (bertlab.bench.token_classification), on CoNLL-2003."""
    from bertlab.bench import token_classification

    conll_dir = Path(args.data_dir) / "conll2003"
    if "fine-tuning" not in args.sections:
        return []
    if not any(conll_dir.glob("train*")):
        print(f"skipping token-classification fine-tuning: no CoNLL-2003 at {conll_dir} (set BERTLAB_DATA_DIR or "
              f"--data-dir to a folder laid out like shared/data)", file=sys.stderr)
        return []
    setup = token_classification.TaggingSetup(conll_dir, model_dir, model_name, device, args.fine_tune_steps,
                                              args.warmup, batch_size=args.batch_size)
    return progress.show(token_classification.compare(setup, precisions, args.repeats))
