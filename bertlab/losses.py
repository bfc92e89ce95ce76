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

`masked_lm_loss`: bertlab.model's masked-LM head's loss through them, chunked on CPU, one matmul on a GPU;
`labelled_masked_lm`, that loss at the positions `predicted_positions` picks (labels `IGNORE_INDEX` elsewhere).

`sampled_softmax_loss`: a sampled softmax for the masked-LM loss in training (`task.softmax_samples`): each masked
position is scored against the step's target tokens and a sample of the vocabulary shared by all positions, so the
decoder costs positions × candidates instead of positions × vocabulary.

The sample is `samples` draws with replacement from q ∝ count^0.75, counted once each. The softmax's sum over the
vocabulary, Σ_v exp(s_v), is estimated by summing the targets exactly and weighting each other token drawn by
1 / π(c), π(c) = 1 − (1 − q(c))^samples the chance that it is drawn at all (Horvitz–Thompson), which is unbiased:
hence a logit correction −log π(c) at drawn non-targets and none at targets. Correcting by the expected count of
draws instead (samples × q(c), as TensorFlow's sampled_softmax_loss does) would weight a frequent token, drawn for
sure but counted once, by far less than 1, and correcting the targets too would weight a rare target, there for
sure, by far more than 1 at every other position. Once every π(c) rounds to 1, the loss is the full softmax's.
"""

from __future__ import annotations

import math

import torch
from torch.autograd.function import once_differentiable

IGNORE_INDEX = -100  # the label of a position no loss reads: torch's cross_entropy's ignore_index, as transformers'
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


_CHUNK_BYTES = 1 << 22  # a [rows, chunk] fp32 block of ~4 MiB: the fastest of 1-16 MiB for the MLM heads on CPU
_GROUP_BYTES = 1 << 28  # fp32 probabilities held at once; more rows than that are taken in groups


def _vocab_chunk(rows: int) -> int:
    """Vocabulary columns per chunk, a multiple of 64: a block of _CHUNK_BYTES at `rows` rounded up to a
    multiple of 256, so that torch.compile meets few distinct chunk sizes as the number of rows varies."""
    padded_rows = 256 * math.ceil(max(1, rows) / 256)
    return max(64, _CHUNK_BYTES // (4 * padded_rows) // 64 * 64)


class _LinearCrossEntropySum(torch.autograd.Function):
    """Σ_i −log softmax(hidden_i Wᵀ + b)[targets_i]; when gradients are wanted, all three come from the forward.

    The vocabulary is walked in chunks whose [rows, chunk] logits stay in cache: each chunk's softmax
    (torch's fused kernel) is kept with its log-sum-exp, read off the softmax's maximum. Once
    the rows' log-sum-exps are known, each chunk's probabilities are its softmax times exp(its
    log-sum-exp − the row's) and give that chunk's slice of the weight and bias gradients and its
    share of the hidden gradient. Keeping the probabilities (fp32 [rows, vocab], until the forward
    returns) spares the backward recomputing the logits, one of the four vocabulary-wide matmuls;
    it only scales the saved gradients. The target terms, a gather, are handled once outside the chunks.
    `logits_out`, when given ([rows, vocab], no gradient), receives each chunk's logits on the way.
    """

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, dtype, needs_gradients, logits_out):
        scored, targets = targets >= 0, targets.clamp(min=0)
        h, w = hidden.to(dtype), weight.to(dtype)
        starts = range(0, w.shape[0], _vocab_chunk(h.shape[0]))
        chunk_lse = torch.empty(len(starts), h.shape[0], dtype=torch.float32, device=h.device)
        probabilities = []
        for start, lse in zip(starts, chunk_lse):
            end = start + starts.step
            logits = torch.mm(h, w[start:end].t()).float().add_(bias[start:end])
            if logits_out is not None:
                logits_out[:, start:end] = logits
            maxima = logits.amax(-1)
            softmax = torch.softmax(logits, -1, out=logits)
            torch.sub(maxima, softmax.amax(-1).log_(), out=lse)  # the softmax at the maximum is exp(max − lse)
            if needs_gradients:
                probabilities.append(softmax)
        log_sum_exp = torch.logsumexp(chunk_lse, dim=0)
        target_logits = (h * w[targets]).float().sum(-1) + bias[targets]
        if needs_gradients:
            shares = (chunk_lse - log_sum_exp).exp_()  # each chunk's share of its row's exp sum
            gradients = _gradients(h, w, targets, scored, zip(starts, probabilities, shares))
            ctx.save_for_backward(*(g.to(t.dtype) for g, t in zip(gradients, (hidden, weight, bias))))
        return torch.where(scored, log_sum_exp - target_logits, 0.0).sum()

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        grad_hidden, grad_weight, grad_bias = (gradient * grad_output for gradient in ctx.saved_tensors)
        return grad_hidden, grad_weight, grad_bias, None, None, None, None


def _gradients(h, w, targets, scored, chunks):
    """fp32 gradients of the loss for hidden, weight and bias: softmax − one-hot, the softmax from
    `chunks` (start column, the chunk's softmax, its share of the row's exp sum), the one-hot row by row."""
    row_scale = scored.float()[:, None]
    grad_hidden = torch.zeros(h.shape, dtype=torch.float32, device=h.device)
    grad_weight = torch.empty(w.shape, dtype=torch.float32, device=w.device)
    grad_bias = torch.empty(w.shape[0], dtype=torch.float32, device=w.device)
    for start, softmax, share in chunks:
        end = start + softmax.shape[1]
        probabilities = softmax.mul_((share * row_scale[:, 0])[:, None])
        torch.sum(probabilities, dim=0, out=grad_bias[start:end])
        probabilities = probabilities.to(h.dtype)
        grad_weight[start:end] = torch.mm(probabilities.t(), h)
        grad_hidden += torch.mm(probabilities, w[start:end])
    grad_hidden -= row_scale * w[targets].float()
    grad_weight.index_add_(0, targets, -row_scale * h.float())
    grad_bias.index_add_(0, targets, -row_scale[:, 0])
    return grad_hidden, grad_weight, grad_bias


def linear_cross_entropy_sum(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                             targets: torch.Tensor, with_logits: bool = False):
    """`cross_entropy_sum(F.linear(hidden, weight, bias), targets)` for a vocabulary-sized `weight`
    [C, H], computed in cache-sized vocabulary chunks; rows with a negative target count zero, as
    there. Under autocast the matmuls run in its dtype, as F.linear's would; the result is the same
    up to rounding order. Rows are taken in groups whose probabilities fit in _GROUP_BYTES.
    `with_logits`: (loss, logits), the logits [N, C] in the matmuls' dtype and without a graph, written
    as the chunks pass (one write of them, not the backward through them)."""
    device = hidden.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else weight.dtype
    needs_gradients = torch.is_grad_enabled() and any(t.requires_grad for t in (hidden, weight, bias))
    rows_per_group = max(1, _GROUP_BYTES // (4 * weight.shape[0]))
    logits = torch.empty(hidden.shape[0], weight.shape[0], dtype=dtype, device=hidden.device) if with_logits else None
    row_groups = hidden.split(rows_per_group)
    logit_groups = logits.split(rows_per_group) if with_logits else [None] * len(row_groups)
    with torch.autocast(device, enabled=False):
        losses = [_LinearCrossEntropySum.apply(rows, weight, bias, row_targets, dtype, needs_gradients, row_logits)
                  for rows, row_targets, row_logits in zip(row_groups, targets.split(rows_per_group), logit_groups)]
    loss = losses[0] if len(losses) == 1 else torch.stack(losses).sum()
    return (loss, logits) if with_logits else loss


def masked_lm_loss(head, hidden: torch.Tensor, targets: torch.Tensor, count: int | torch.Tensor,
                   return_logits: bool, differentiable_logits: bool) -> tuple[torch.Tensor | None, torch.Tensor]:
    """(logits, loss) of bertlab.model's masked-LM `head` (a BertLMPredictionHead) at the states `hidden` [N, H]: the
    cross-entropy summed over `targets` [N], over `count`. The gradients flow through the loss alone: the logits come
    without their graph, and on CPU the loss is computed in cache-sized vocabulary chunks (linear_cross_entropy_sum),
    the fast path of a training step; `return_logits=False` skips the logits altogether (None). A caller who computes
    a loss of its own from the logits asks for `differentiable_logits` (the slower path of a plain cross-entropy over
    logits kept for the backward pass)."""
    # Chunked on CPU, as the logits would not stay in its cache; a GPU does one large matmul faster
    # (benchmarks.mlm_head_loss: 2.1 against 3.3 ms compiled, BERT-Base's batch-256 block on an H200).
    # Without gradients, logits are wanted whole (validation): the plain path computes them once.
    if hidden.device.type == "cpu" and not differentiable_logits and (torch.is_grad_enabled() or not return_logits):
        transformed = head.transform(hidden)
        weight = head.decoder_weight
        bias = weight.new_zeros(weight.shape[0]) if head.bias is None else head.bias
        if not return_logits:
            return None, linear_cross_entropy_sum(transformed, weight, bias, targets) / count
        loss, logits = linear_cross_entropy_sum(transformed, weight, bias, targets, with_logits=True)
        return logits, loss / count
    logits = head(hidden)
    loss = cross_entropy_sum(logits, targets) / count
    if not return_logits:
        return None, loss
    return (logits if differentiable_logits else logits.detach()), loss


def predicted_positions(labels: torch.Tensor, per_row: int | None = None) -> torch.Tensor:
    """[rows, per_row] positions for sparse prediction: each row's labelled positions in order, then
    unlabelled ones to fill the row. Labels beyond `per_row` in a row would be left out; None: the most
    labels of any row (at least one), read from the device."""
    if per_row is None:
        per_row = max(int((labels != IGNORE_INDEX).sum(dim=1).max()), 1)
    return (labels == IGNORE_INDEX).to(torch.uint8).argsort(dim=1, stable=True)[:, :per_row]


def predicted_states(sequence_output: torch.Tensor, labels: torch.Tensor, predictions_per_row: int | None = None,
                     positions: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The states the MLM head scores and their labels, [N, H] and [N], at `predicted_positions` in row order:
    `sequence_output` is already at them when `positions` are given (the encoder's last layer ran only there), else
    it is gathered. Without `predictions_per_row`, the labelled positions alone; with it, every row's whole block,
    labelled -100 at the filling positions."""
    if positions is None:
        positions = predicted_positions(labels, predictions_per_row)
        # as bertlab.model.gather_positions
        sequence_output = sequence_output.gather(1, positions[..., None].expand(-1, -1, sequence_output.shape[-1]))
    hidden, targets = sequence_output.flatten(0, 1), labels.gather(1, positions).flatten()
    if predictions_per_row is None:
        selected = targets != IGNORE_INDEX
        hidden, targets = hidden[selected], targets[selected]
    return hidden, targets


def labelled_masked_lm(head, sequence_output: torch.Tensor, labels: torch.Tensor, return_logits: bool,
                       predictions_per_row: int | None, positions: torch.Tensor | None, differentiable_logits: bool):
    """bertlab.model.masked_lm with labels: the loss and logits only at the labelled positions, from
    masked_lm_loss: the logits without their graph unless `differentiable_logits`, none with `return_logits=False`.

    The head reads `predicted_states`, at `predicted_positions` ([B, P]). Without
    `predictions_per_row`, P is the batch's most labels in a row and the filling positions are dropped:
    the logits are those of the labelled positions in row order, as many as masking chose, a shape
    that changes every batch. With it (at least the most labels of any row) the head predicts the same
    number of positions in every row instead; the filling positions score nothing, so the loss is the
    same, and the shapes depend only on the batch's shape, which torch.compile then compiles once.
    """
    hidden, targets = predicted_states(sequence_output, labels, predictions_per_row, positions)
    # A batch without a masked token contributes zero loss rather than a NaN mean over nothing.
    count = max(targets.numel(), 1) if predictions_per_row is None else (targets != IGNORE_INDEX).sum().clamp(min=1)
    return masked_lm_loss(head, hidden, targets, count, return_logits, differentiable_logits)


PROPOSAL_POWER = 0.75  # word2vec's: flatter than the unigram distribution, so that rarer tokens get drawn too


def sampled_softmax_loss(hidden: torch.Tensor, targets: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                         unigram_log_probs: torch.Tensor, samples: int,
                         generator: torch.Generator) -> tuple[torch.Tensor, int]:
    """The mean over rows of −log softmax over candidates c of (hidden · weight[c] + bias[c] − correction(c)) at the
    row's target, the candidates being the targets and the tokens drawn, each once; and how many candidates there
    were (the decoder's width, for the step's FLOPs). `hidden` [rows, H]: the MLM head's transformed states at the
    masked positions; `targets` [rows]: their tokens; `weight` [V, H] and `bias` [V]: the decoder's;
    `unigram_log_probs` [V]: the training tokens' (bertlab.lit.pretraining.unigram_log_probs, where special tokens
    count as unseen ones); `generator` draws the sample."""
    proposal = (PROPOSAL_POWER * unigram_log_probs).softmax(0)
    drawn = torch.multinomial(proposal, samples, replacement=True, generator=generator)
    candidates, index = torch.unique(torch.cat((targets, drawn)), return_inverse=True)
    drawn_at_all = -torch.expm1(samples * torch.log1p(-proposal[candidates]))
    correction = torch.where(torch.isin(candidates, targets), 0.0, drawn_at_all.log())
    logit_bias = -correction if bias is None else bias[candidates] - correction
    loss = linear_cross_entropy_sum(hidden, weight[candidates], logit_bias, index[:targets.numel()])
    return loss / max(targets.numel(), 1), candidates.numel()
