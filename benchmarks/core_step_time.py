"""Core model benchmark: MLM training-step time (bert-tiny) with full vs sparse prediction (the head
alone, or the head and the last layer at the labelled positions), sparse prediction with the loss-only
head (no logits in memory) and with torch's own dropout instead of bertlab's, in fp32 and, where the
CPU does it natively, bf16 autocast; and activation memory kept for backward with vs without gradient
checkpointing (bert-mini).

Run from the repository root: `python -m benchmarks.core_step_time`. CPU only; prints two tables.
Memory is counted, not sampled: the bytes of distinct non-parameter tensors autograd keeps for
backward (plus the layer inputs that checkpointing keeps to recompute each layer), since CPU torch
has no peak-allocation counter.
"""

from __future__ import annotations

import contextlib
import copy
import statistics
import time
from unittest import mock

import torch
import torch.nn.functional as F
from torch import nn

from bertlab import BertConfig, BertForMaskedLM
from bertlab import model as bertlab_model
from bertlab.lit.masking import mask_tokens
from bertlab.losses import IGNORE_INDEX
from bertlab.model import BertLayer
from bertlab.training.run.model_group import model_preset

BATCH, LENGTH, MASK_FRACTION = 32, 128, 0.15
WARMUP_STEPS, TIMED_STEPS = 3, 10


def mlm_batch(vocab_size: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random tokens, every row full length, MASK_FRACTION of positions labelled."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(1000, vocab_size, (BATCH, LENGTH), generator=generator)
    input_ids, labels = mask_tokens(input_ids, torch.zeros_like(input_ids), vocab_size=vocab_size,
                                    mask_token_id=103,  # [MASK] in the BERT uncased vocabulary
                                    generator=generator, mlm_probability=MASK_FRACTION, mask_replace_prob=1.0,
                                    random_replace_prob=0.0)
    return dict(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), labels=labels)


def sparse_loss(model: BertForMaskedLM, batch: dict) -> torch.Tensor:
    return model(**batch).loss


def sparse_head_only(model: BertForMaskedLM, batch: dict) -> torch.Tensor:
    """The head at the labelled positions, the last layer at every one (as it runs when every layer's
    hidden states are asked for)."""
    return model(**batch, output_hidden_states=True).loss


def loss_only(model: BertForMaskedLM, batch: dict) -> torch.Tensor:
    """What PretrainingModule's training step runs."""
    return model(**batch, return_logits=False).loss


def torch_dropout() -> contextlib.AbstractContextManager:
    """bertlab.model's CPU dropout mask swapped for torch's bernoulli_ one."""
    return mock.patch.object(bertlab_model, "random_keep_mask",
                             lambda shape, p, device: torch.empty(shape, device=device).bernoulli_(1 - p))


def full_loss(model: BertForMaskedLM, batch: dict) -> torch.Tensor:
    """The usual way: decode every position, let cross-entropy ignore the unlabelled ones."""
    logits = model(batch["input_ids"], batch["attention_mask"]).logits
    return F.cross_entropy(logits.flatten(0, 1).float(), batch["labels"].flatten(), ignore_index=IGNORE_INDEX)


def under_autocast(loss_fn, dtype: torch.dtype):
    def autocast_loss(model: BertForMaskedLM, batch: dict) -> torch.Tensor:
        with torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32):
            return loss_fn(model, batch)
    return autocast_loss


def median_step_seconds(model: nn.Module, loss_fn, batch: dict) -> float:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    times = []
    for step in range(WARMUP_STEPS + TIMED_STEPS):
        start = time.perf_counter()
        loss_fn(model, batch).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step >= WARMUP_STEPS:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def activation_bytes(model: nn.Module, loss_fn, batch: dict) -> int:
    """Bytes of distinct non-parameter storages kept for backward by one forward pass: what ops
    save, plus the BertLayer inputs (gradient checkpointing's own hooks hide what it saves inside a
    layer and keep those inputs to recompute it, so they are counted explicitly)."""
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    kept: dict[int, torch.UntypedStorage] = {}  # holding the storages keeps addresses from being reused

    def keep(tensor: torch.Tensor) -> None:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            kept[storage.data_ptr()] = storage

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        keep(tensor)
        return tensor

    def keep_layer_inputs(_module, args) -> None:
        for arg in args:
            if isinstance(arg, torch.Tensor):
                keep(arg)

    hooks = [m.register_forward_pre_hook(keep_layer_inputs) for m in model.modules() if isinstance(m, BertLayer)]
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            loss = loss_fn(model, batch)
    finally:
        for hook in hooks:
            hook.remove()
    loss.backward()
    model.zero_grad(set_to_none=True)
    return sum(storage.nbytes() for storage in kept.values())


def mib(n_bytes: int) -> str:
    return f"{n_bytes / 2**20:9.1f} MiB"


def main() -> None:
    torch.manual_seed(0)
    config = BertConfig.from_dict(model_preset("bert_tiny"))
    model = BertForMaskedLM(config).train()
    batch = mlm_batch(config.vocab_size)
    labelled = int((batch["labels"] != IGNORE_INDEX).sum())
    print(f"bert-tiny {model_preset('bert_tiny')}, vocab {config.vocab_size}, batch {BATCH} x {LENGTH}, "
          f"{labelled} labelled positions ({labelled / (BATCH * LENGTH):.1%}); "
          f"{torch.get_num_threads()} torch threads; median of {TIMED_STEPS} steps after {WARMUP_STEPS}")
    print(f"{'MLM step (fwd+bwd+AdamW)':<44}{'median':>10}{'tokens/s':>11}{'kept for backward':>20}")
    variants = {"full prediction": (full_loss, contextlib.nullcontext),
                "sparse head, last layer everywhere": (sparse_head_only, contextlib.nullcontext),
                "sparse prediction": (sparse_loss, contextlib.nullcontext),
                "sparse, loss only (the training step)": (loss_only, contextlib.nullcontext),
                "sparse, loss only, torch's dropout mask": (loss_only, torch_dropout)}
    dtypes = [torch.float32] + [torch.bfloat16] * torch.cpu._is_avx512_bf16_supported()
    for dtype in dtypes:
        results = {}
        for name, (loss_fn, patch) in variants.items():
            loss_fn = under_autocast(loss_fn, dtype)
            with patch():
                seconds = median_step_seconds(copy.deepcopy(model), loss_fn, batch)
                memory = activation_bytes(copy.deepcopy(model), loss_fn, batch)
            results[name] = seconds
            label = f"{name}, {str(dtype).removeprefix('torch.')}"
            print(f"{label:<44}{seconds * 1e3:>8.0f}ms{BATCH * LENGTH / seconds:>11.0f}{mib(memory):>20}")
        baseline = results["sparse prediction"]
        print("speed-up over sparse prediction: " + ", ".join(
            f"{name} {baseline / seconds:.2f}x" for name, seconds in results.items() if seconds != baseline) + "\n")

    config = BertConfig.from_dict(model_preset("bert_mini"))
    model = BertForMaskedLM(config).train()
    batch = mlm_batch(config.vocab_size)
    print(f"bert-mini {model_preset('bert_mini')}, batch {BATCH} x {LENGTH}, sparse MLM: activations kept for backward")
    without = activation_bytes(model, sparse_loss, batch)
    model.gradient_checkpointing_enable()
    with_checkpointing = activation_bytes(model, sparse_loss, batch)
    print(f"{'without gradient checkpointing':<34}{mib(without)}")
    print(f"{'with gradient checkpointing':<34}{mib(with_checkpointing)}  "
          f"({without / with_checkpointing:.1f}x less)")


if __name__ == "__main__":
    main()
