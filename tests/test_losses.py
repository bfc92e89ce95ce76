"""`cross_entropy_sum` against torch's cross-entropy: the same loss and gradient, in fp32 and bf16."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from bertlab import losses
from bertlab.losses import cross_entropy_sum


def reference(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    logits = logits.detach().requires_grad_()
    loss = F.cross_entropy(logits.float(), targets, reduction="sum")
    loss.backward()
    return loss.detach(), logits.grad


def blockwise(logits: torch.Tensor, targets: torch.Tensor, scale: float = 1.0):
    logits = logits.detach().requires_grad_()
    loss = cross_entropy_sum(logits, targets)
    (loss * scale).backward()
    return loss.detach(), logits.grad


@pytest.fixture
def rows_and_targets():
    generator = torch.Generator().manual_seed(0)
    vocab = 20000  # ~26 rows per 2 MiB block: 70 rows span three blocks, the last one short
    assert losses._row_blocks(torch.empty(70, vocab)) < 35
    logits = 4 * torch.randn(70, vocab, generator=generator)
    return logits, torch.randint(0, vocab, (70,), generator=generator)


def test_fp32_loss_and_gradient_match_torch_and_leave_the_logits_alone(rows_and_targets):
    logits, targets = rows_and_targets
    before = logits.clone()
    loss, grad = blockwise(logits, targets)
    expected_loss, expected_grad = reference(logits, targets)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, expected_loss, rtol=1e-5, atol=1e-3)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-5, atol=1e-7)
    assert torch.equal(logits, before)


def test_bf16_logits_give_the_fp32_loss_and_a_bf16_gradient(rows_and_targets):
    logits, targets = rows_and_targets
    logits = logits.bfloat16()
    loss, grad = blockwise(logits, targets)
    expected_loss, expected_grad = reference(logits, targets)  # the fp32 copy path
    assert loss.dtype == torch.float32 and grad.dtype == torch.bfloat16
    torch.testing.assert_close(loss, expected_loss, rtol=1e-5, atol=1e-3)
    torch.testing.assert_close(grad.float(), expected_grad.float(), rtol=1e-2, atol=1e-6)


def test_the_incoming_gradient_scales_the_result(rows_and_targets):
    logits, targets = rows_and_targets
    _, grad = blockwise(logits, targets, scale=1 / 70)
    _, unscaled = blockwise(logits, targets)
    torch.testing.assert_close(grad, unscaled / 70)
    assert grad.sum(dim=-1).abs().max() < 1e-6  # softmax − one-hot sums to zero per row


def test_no_rows_give_zero_loss_and_an_empty_gradient():
    loss, grad = blockwise(torch.randn(0, 50), torch.zeros(0, dtype=torch.long))
    assert loss.item() == 0.0 and grad.shape == (0, 50)
