"""A sampled softmax for the masked-LM loss in training (`task.softmax_samples`): each masked position is scored
against the step's target tokens and a sample of the vocabulary shared by all positions, so the decoder costs
positions × candidates instead of positions × vocabulary.

The sample is `samples` draws with replacement from q ∝ count^0.75, counted once each. The softmax's sum over the
vocabulary, Σ_v exp(s_v), is estimated by summing the targets exactly and weighting each other token drawn by
1 / π(c), π(c) = 1 − (1 − q(c))^samples the chance that it is drawn at all (Horvitz–Thompson), which is unbiased:
hence a logit correction −log π(c) at drawn non-targets and none at targets. Correcting by the expected count of
draws instead (samples × q(c), as TensorFlow's sampled_softmax_loss does) would weight a frequent token, drawn for
sure but counted once, by far less than 1, and correcting the targets too would weight a rare target, there for
sure, by far more than 1 at every other position. Once every π(c) rounds to 1, the loss is the full softmax's.
"""

from __future__ import annotations

import torch

from bertlab.losses import linear_cross_entropy_sum

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
