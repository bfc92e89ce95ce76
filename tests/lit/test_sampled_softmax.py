"""The sampled softmax of masked-LM training (bertlab.losses.sampled_softmax_loss, task.softmax_samples): its limit is the
full softmax, its gradients reach the model, its draws repeat with the seed, and it teaches the full softmax."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from bertlab.lit.masking import masking_generator
from bertlab.lit.pretraining import unigram_log_probs
from bertlab.losses import sampled_softmax_loss
from tests.lit.helpers import VOCAB, loader, pretraining_batch, pretraining_module, trainer

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # Lightning's hints about workers, logging

SPECIALS = [0, 1, 2, 3, 4]


def batch_counts() -> torch.Tensor:
    return torch.bincount(pretraining_batch()["input_ids"].flatten(), minlength=VOCAB)


def test_with_every_token_drawn_for_sure_the_loss_and_its_gradients_are_the_full_softmaxs():
    hidden = torch.randn(12, 16, requires_grad=True)
    weight = torch.randn(VOCAB, 16, requires_grad=True)
    bias = torch.randn(VOCAB, requires_grad=True)
    targets = torch.randint(5, VOCAB, (12,))
    # Uneven counts, specials as unseen tokens: the rarest is drawn with probability ~1e-3 a draw, so 10⁵ draws
    # take every token with π = 1 to float precision, and no logit is corrected.
    log_probs = unigram_log_probs(torch.randint(0, 50, (VOCAB,)).numpy(), SPECIALS).float()
    sampled, candidates = sampled_softmax_loss(hidden, targets, weight, bias, log_probs, 10**5,
                                               torch.Generator().manual_seed(0))
    sampled_grads = torch.autograd.grad(sampled, (hidden, weight, bias))
    full = F.cross_entropy(F.linear(hidden, weight, bias), targets)
    full_grads = torch.autograd.grad(full, (hidden, weight, bias))

    assert candidates == VOCAB
    assert sampled.item() == pytest.approx(full.item(), rel=1e-5)
    for ours, theirs in zip(sampled_grads, full_grads):
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_sampled_loss_reaches_the_encoder_and_the_decoder_and_repeats_with_the_seed(dtype):
    module = pretraining_module(softmax_samples=8, dropout=0.0)  # dropout draws from the global generator
    module.set_unigram(batch_counts().numpy())

    def loss(seed: int) -> torch.Tensor:
        module.zero_grad()
        with torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32):
            value = module._sampled_mlm_loss(pretraining_batch(), masking_generator(seed, 0))
        value.backward()
        return value.detach()

    first = loss(seed=1)
    model = module.model
    assert torch.isfinite(first)
    assert model.bert.encoder.layer[0].attention.self.query.weight.grad.abs().sum() > 0
    assert model.cls.predictions.decoder_weight.grad.abs().sum() > 0
    assert model.cls.predictions.bias.grad.abs().sum() > 0
    assert loss(seed=1) == first
    assert loss(seed=2) != first


def test_training_with_the_sampled_loss_lowers_the_full_softmax_loss(tmp_path):
    module = pretraining_module(softmax_samples=8)
    module.set_unigram(batch_counts().numpy())
    batch = pretraining_batch()
    run = trainer(tmp_path, max_steps=30)
    before = run.validate(module, loader([batch]), verbose=False)[0]["val/loss"]
    run.fit(module, loader([batch] * 30))
    after = run.validate(module, loader([batch]), verbose=False)[0]["val/loss"]

    assert after < before - 1.0
