"""The MLM loss on the masked positions, forward and backward, three ways: bertlab's chunked
`linear_cross_entropy_sum` (cache-sized vocabulary chunks; the CPU training step's path), the logits then
bertlab's `cross_entropy_sum`, and the logits then `F.cross_entropy` — eager and under torch.compile.
Which is fastest differs between a CPU (cache-sized chunks) and a GPU (one large matmul).

Run from the repository root: `python -m benchmarks.mlm_head_loss [--device cuda] [--rows 4864]`
(4,864 = BERT-Base's static block at batch 256 × 128: 19 predictions a row). Prints one table.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from bertlab.losses import cross_entropy_sum, linear_cross_entropy_sum


def chunked(hidden, weight, bias, targets):
    return linear_cross_entropy_sum(hidden, weight, bias, targets)


def logits_then_bertlab(hidden, weight, bias, targets):
    return cross_entropy_sum(F.linear(hidden, weight, bias), targets)


def logits_then_torch(hidden, weight, bias, targets):
    return F.cross_entropy(F.linear(hidden, weight, bias).float(), targets, reduction="sum")


def seconds_per_call(loss_fn, inputs, device: torch.device, dtype: torch.dtype, repeats: int) -> float:
    def step():
        with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
            loss = loss_fn(*inputs)
        loss.backward()
    for _ in range(3):
        step()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--rows", type=int, default=4864)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--vocab", type=int, default=30522)
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="bf16")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--no-compile", action="store_true")
    args = parser.parse_args()
    device, dtype = torch.device(args.device), {"fp32": torch.float32, "bf16": torch.bfloat16}[args.precision]
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(args.rows, args.hidden, generator=generator).to(device).requires_grad_()
    weight = (0.02 * torch.randn(args.vocab, args.hidden, generator=generator)).to(device).requires_grad_()
    bias = torch.zeros(args.vocab, device=device, requires_grad=True)
    targets = torch.randint(0, args.vocab, (args.rows,), generator=generator).to(device)
    inputs = (hidden, weight, bias, targets)
    print(f"{args.rows} rows × hidden {args.hidden} × vocab {args.vocab}, {args.precision}, on {device}; "
          f"forward + backward, median of {args.repeats}")
    print("| loss | eager ms | compiled ms |\n|---|---|---|")
    for loss_fn in (chunked, logits_then_bertlab, logits_then_torch):
        eager = seconds_per_call(loss_fn, inputs, device, dtype, args.repeats)
        compiled = "" if args.no_compile else \
            f"{1e3 * seconds_per_call(torch.compile(loss_fn), inputs, device, dtype, args.repeats):.2f}"
        print(f"| {loss_fn.__name__} | {1e3 * eager:.2f} | {compiled} |", flush=True)


if __name__ == "__main__":
    main()
