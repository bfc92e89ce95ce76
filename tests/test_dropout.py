"""bertlab.model's dropout against F.dropout: the same distribution, scaling, gradient and seeding."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from bertlab.model import Dropout, dropout, random_keep_mask


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_mask_drops_each_element_with_probability_p(p):
    torch.manual_seed(0)
    keep = random_keep_mask(torch.Size((1000, 1001)), p, torch.device("cpu"))  # not a multiple of 4
    assert keep.shape == (1000, 1001) and keep.dtype == torch.float32
    assert set(keep.unique().tolist()) == {0.0, 1.0}
    dropped = 1 - keep
    # Binomial standard error of the mean over 1e6 draws is ≤ 5e-4: a 5-sigma band.
    assert abs(dropped.mean().item() - p) < 2.5e-3
    per_lane = dropped.flatten()[:1_000_000].view(-1, 4).mean(dim=0)  # the four 16-bit pieces of each draw
    assert (per_lane - p).abs().max() < 5e-3


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kept_values_are_scaled_and_the_gradient_uses_the_same_mask(dtype):
    torch.manual_seed(0)
    x = (torch.rand(64, 128) + 1).to(dtype).requires_grad_()
    y = dropout(x, 0.25, training=True)
    kept = y != 0
    assert y.dtype == dtype
    torch.testing.assert_close(y[kept], (x[kept] / 0.75).to(dtype))
    y.backward(torch.full_like(y, 2.0))
    torch.testing.assert_close(x.grad, torch.where(kept, 2 / 0.75, 0.0).to(dtype))


def test_seeded_draws_repeat_and_differ_between_calls():
    x = torch.ones(4096)
    torch.manual_seed(3)
    first, second = dropout(x, 0.1, True), dropout(x, 0.1, True)
    torch.manual_seed(3)
    assert torch.equal(dropout(x, 0.1, True), first)
    assert not torch.equal(first, second)


def test_identity_in_eval_and_at_p_zero_and_zeros_at_p_one():
    x = torch.randn(10, 10)
    assert torch.equal(dropout(x, 0.3, training=False), x)
    assert torch.equal(dropout(x, 0.0, training=True), x)
    assert torch.equal(dropout(x, 1.0, training=True), torch.zeros_like(x))
    module = Dropout(0.3).eval()
    assert torch.equal(module(x), x)


def test_mean_and_variance_match_torch_dropout():
    torch.manual_seed(0)
    x = torch.randn(2000, 500)
    ours, theirs = dropout(x, 0.1, True), F.dropout(x, 0.1, True)
    assert abs(ours.mean() - theirs.mean()) < 5e-3
    assert abs(ours.var() / theirs.var() - 1) < 1e-2
