"""Cross-entropy over a large vocabulary without materialising fp32 log-probabilities.

`F.cross_entropy(logits.float(), …)` on MLM logits ([masked positions, vocab], tens of MB) passes
over memory several times: the fp32 copy, log_softmax's output, a zero-filled gradient, the
log_softmax backward and, under autocast, the cast of the gradient back to bf16. On CPUs those
passes cost more than the decoder matmul. This version keeps only the logits (in their own dtype)
and one fp32 log-sum-exp per row, computing in row blocks that stay in cache; the gradient
softmax − one-hot is written once, in the logits' dtype. The values are the same as the fp32
reference up to rounding order.
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

_BLOCK_BYTES = 1 << 21  # fp32 rows per block: ~2 MiB, an L2 cache's worth


def _row_blocks(logits: torch.Tensor) -> int:
    if logits.device.type != "cpu":
        return max(1, logits.shape[0])  # GPUs stream the whole tensor well; blocks only add launches
    return max(1, _BLOCK_BYTES // (4 * max(1, logits.shape[-1])))


class _SumCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        block = _row_blocks(logits)
        log_sum_exp = torch.empty(logits.shape[0], dtype=torch.float32, device=logits.device)
        for rows, out in zip(logits.split(block), log_sum_exp.split(block)):
            torch.logsumexp(rows.float(), dim=-1, out=out)
        ctx.save_for_backward(logits, log_sum_exp, targets)
        return (log_sum_exp - logits.gather(1, targets[:, None]).squeeze(1).float()).sum()

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output: torch.Tensor):
        logits, log_sum_exp, targets = ctx.saved_tensors
        block = _row_blocks(logits)
        grad = torch.empty_like(logits)
        in_place = grad.dtype == torch.float32
        for rows, lse, out in zip(logits.split(block), log_sum_exp.split(block), grad.split(block)):
            # softmax = exp(logit − lse), computed in fp32: straight into `grad` when it is fp32,
            # else in a cached block then rounded into it. The saved logits stay untouched.
            softmax = torch.sub(rows.float(), lse[:, None], out=out if in_place else None).exp_().mul_(grad_output)
            if not in_place:
                out.copy_(softmax)
        positions = torch.arange(targets.shape[0], device=targets.device)
        grad[positions, targets] -= grad_output.to(grad.dtype)
        return grad, None


def cross_entropy_sum(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Σ_i −log softmax(logits_i)[targets_i] in fp32, for logits [N, C] of any float dtype and valid
    class ids `targets` [N] (no ignore index: select the rows to score first)."""
    return _SumCrossEntropy.apply(logits, targets)
