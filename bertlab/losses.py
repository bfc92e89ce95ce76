"""Cross-entropy over a large vocabulary without materialising fp32 log-probabilities.

`F.cross_entropy(logits.float(), …)` on MLM logits ([masked positions, vocab], tens of MB) passes
over memory several times: the fp32 copy, log_softmax's output, a zero-filled gradient, the
log_softmax backward and, under autocast, the cast of the gradient back to bf16. On CPUs those
passes cost more than the decoder matmul. This version keeps only the logits (in their own dtype)
and one fp32 log-sum-exp per row, computing in row blocks that stay in cache; the gradient
softmax − one-hot is written once, in the logits' dtype. The values are the same as the fp32
reference up to rounding order.

Rows whose target is negative (the ignore index, -100) score zero and get no gradient: statically
shaped batches carry such filler rows, which cannot be selected out without a data-dependent shape.
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

_BLOCK_BYTES = 1 << 21  # fp32 rows per block: ~2 MiB, an L2 cache's worth


def _log_sum_exp(logits: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """torch.logsumexp over the last dimension, into `out`. log_softmax's fused kernel, whose value at
    the row's maximum is exactly −log Σ exp(x − max), takes half the time of torch.logsumexp on CPU
    (its separate passes: a copy minus the maximum, a precise exp, a sum)."""
    return torch.sub(logits.amax(-1), torch.log_softmax(logits, -1).amax(-1), out=out)


def _row_blocks(logits: torch.Tensor) -> int:
    if logits.device.type != "cpu":
        return max(1, logits.shape[0])  # GPUs stream the whole tensor well; blocks only add launches
    return max(1, _BLOCK_BYTES // (4 * max(1, logits.shape[-1])))


class _SumCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        scored, targets = targets >= 0, targets.clamp(min=0)
        block = _row_blocks(logits)
        log_sum_exp = torch.empty(logits.shape[0], dtype=torch.float32, device=logits.device)
        for rows, out in zip(logits.split(block), log_sum_exp.split(block)):
            _log_sum_exp(rows.float(), out)
        ctx.save_for_backward(logits, log_sum_exp, targets, scored)
        return torch.where(scored, log_sum_exp - logits.gather(1, targets[:, None]).squeeze(1).float(), 0.0).sum()

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output: torch.Tensor):
        logits, log_sum_exp, targets, scored = ctx.saved_tensors
        block = _row_blocks(logits)
        grad = torch.empty_like(logits)
        in_place = grad.dtype == torch.float32
        row_scale = (grad_output * scored)[:, None]
        for rows, lse, scale, out in zip(logits.split(block), log_sum_exp.split(block), row_scale.split(block),
                                         grad.split(block)):
            # softmax = exp(logit − lse), computed in fp32: straight into `grad` when it is fp32,
            # else in a cached block then rounded into it. The saved logits stay untouched.
            softmax = torch.sub(rows.float(), lse[:, None], out=out if in_place else None).exp_().mul_(scale)
            if not in_place:
                out.copy_(softmax)
        positions = torch.arange(targets.shape[0], device=targets.device)
        grad[positions, targets] -= row_scale[:, 0].to(grad.dtype)
        return grad, None


def cross_entropy_sum(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Σ_i −log softmax(logits_i)[targets_i] in fp32, for logits [N, C] of any float dtype and class
    ids `targets` [N]; rows with a negative target (the ignore index) count zero."""
    return _SumCrossEntropy.apply(logits, targets)


_VOCAB_CHUNK = 2048  # logits columns per chunk: [rows, chunk] fp32 stays in cache for a few hundred rows


class _LinearCrossEntropySum(torch.autograd.Function):
    """Σ_i −log softmax(hidden_i Wᵀ + b)[targets_i] without the [rows, vocab] logits in memory.

    The vocabulary is walked in chunks: the forward keeps one log-sum-exp per row and chunk, the
    backward recomputes each chunk's logits (a matmul is cheaper than storing and re-reading them)
    and turns them into that chunk's slice of every gradient: its probabilities are its own softmax
    (torch's fused kernel, faster than exp(logits − lse) on CPU) times exp(its log-sum-exp − the row's).
    The target terms, a gather, are handled once outside the chunks.
    """

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, dtype):
        scored, targets = targets >= 0, targets.clamp(min=0)
        h, w = hidden.to(dtype), weight.to(dtype)
        starts = range(0, w.shape[0], _VOCAB_CHUNK)
        chunk_lse = torch.empty(len(starts), h.shape[0], dtype=torch.float32, device=h.device)
        for start, out in zip(starts, chunk_lse):
            end = start + _VOCAB_CHUNK
            logits = torch.mm(h, w[start:end].t()).float().add_(bias[start:end])
            _log_sum_exp(logits, out)
        log_sum_exp = torch.logsumexp(chunk_lse, dim=0)
        target_logits = (h * w[targets]).float().sum(-1) + bias[targets]
        ctx.save_for_backward(h, w, bias, targets, log_sum_exp, chunk_lse, scored)
        ctx.dtypes = hidden.dtype, weight.dtype
        return torch.where(scored, log_sum_exp - target_logits, 0.0).sum()

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        h, w, bias, targets, log_sum_exp, chunk_lse, scored = ctx.saved_tensors
        hidden_dtype, weight_dtype = ctx.dtypes
        grad_hidden = torch.zeros(h.shape, dtype=torch.float32, device=h.device)
        grad_weight = torch.empty(w.shape, dtype=weight_dtype, device=w.device)
        grad_bias = torch.empty(bias.shape, dtype=torch.float32, device=bias.device)
        row_scale = (grad_output.float() * scored)[:, None]
        chunk_scale = (chunk_lse - log_sum_exp).exp_().mul_(row_scale[:, 0])
        for start, scale in zip(range(0, w.shape[0], _VOCAB_CHUNK), chunk_scale):
            end = start + _VOCAB_CHUNK
            logits = torch.mm(h, w[start:end].t()).float().add_(bias[start:end])
            softmax = torch.softmax(logits, dim=-1).mul_(scale[:, None])
            torch.sum(softmax, dim=0, out=grad_bias[start:end])
            softmax = softmax.to(h.dtype)
            grad_weight[start:end] = torch.mm(softmax.t(), h)
            grad_hidden += torch.mm(softmax, w[start:end])
        # The −one-hot part of softmax − one-hot, row by row.
        grad_hidden -= row_scale * w[targets].float()
        grad_weight.index_add_(0, targets, (-row_scale * h.float()).to(weight_dtype))
        grad_bias.index_add_(0, targets, -row_scale[:, 0])
        return grad_hidden.to(hidden_dtype), grad_weight, grad_bias.to(bias.dtype), None, None


def linear_cross_entropy_sum(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                             targets: torch.Tensor) -> torch.Tensor:
    """`cross_entropy_sum(F.linear(hidden, weight, bias), targets)` for a vocabulary-sized `weight`
    [C, H], computed chunk by chunk so that the [N, C] logits never exist; rows with a negative
    target count zero, as there. Under autocast the matmuls run in its dtype, as F.linear's would;
    the result is the same up to rounding order."""
    device = hidden.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else weight.dtype
    with torch.autocast(device, enabled=False):
        return _LinearCrossEntropySum.apply(hidden, weight, bias, targets, dtype)
