"""`cross_entropy_sum` against torch's cross-entropy, and `linear_cross_entropy_sum` against
`cross_entropy_sum` over F.linear's logits: the same loss and gradients, in fp32 and bf16."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from bertlab import losses
from bertlab.losses import cross_entropy_sum, linear_cross_entropy_sum


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


def test_rows_with_a_negative_target_add_no_loss_and_get_no_gradient(rows_and_targets):
    logits, targets = rows_and_targets
    targets[::3] = -100
    scored = targets >= 0
    loss, grad = blockwise(logits, targets)
    expected_loss, expected_grad = reference(logits[scored], targets[scored])
    torch.testing.assert_close(loss, expected_loss)
    torch.testing.assert_close(grad[scored], expected_grad)
    assert not grad[~scored].any()


@pytest.fixture
def linear_head(monkeypatch):
    """A decoder whose vocabulary spans three chunks, the last one short, with repeated targets."""
    monkeypatch.setattr(losses, "_CHUNK_BYTES", 4 * 256 * 2048)  # 2,048 columns for up to 256 rows
    vocab, rows, hidden = 5000, 40, 24
    assert 2 * losses._vocab_chunk(rows) < vocab < 3 * losses._vocab_chunk(rows)
    generator = torch.Generator().manual_seed(0)
    tensors = (torch.randn(rows, hidden, generator=generator), torch.randn(vocab, hidden, generator=generator) / 2,
               torch.randn(vocab, generator=generator))
    targets = torch.randint(0, vocab, (rows,), generator=generator)
    targets[1] = targets[0]
    return tensors, targets


def loss_and_gradients(loss_fn, tensors, targets, autocast: bool):
    tensors = [tensor.detach().requires_grad_() for tensor in tensors]
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        loss = loss_fn(*tensors, targets) / 7
    loss.backward()
    return loss.detach(), *(tensor.grad for tensor in tensors)


def over_linear_logits(hidden, weight, bias, targets):
    return cross_entropy_sum(F.linear(hidden, weight, bias), targets)


# bf16: the reference sums its bias gradient from bf16 logit gradients; the two differ by up to 1% of its largest value
@pytest.mark.parametrize(("autocast", "tolerance"), [(False, 1e-5), (True, 2e-2)], ids=["fp32", "bf16-autocast"])
def test_linear_cross_entropy_matches_the_loss_over_materialised_logits(linear_head, autocast, tolerance):
    tensors, targets = linear_head
    targets[::5] = -100
    fused = loss_and_gradients(linear_cross_entropy_sum, tensors, targets, autocast)
    expected = loss_and_gradients(over_linear_logits, tensors, targets, autocast)
    for name, value, reference_value in zip(("loss", "hidden", "weight", "bias"), fused, expected):
        assert value.dtype == reference_value.dtype == torch.float32, name
        scale = reference_value.abs().max()
        torch.testing.assert_close(value / scale, reference_value / scale, rtol=0, atol=tolerance, msg=name)


def test_linear_cross_entropy_of_no_rows_is_zero(linear_head):
    (hidden, weight, bias), _ = linear_head
    loss, grad_hidden, grad_weight, grad_bias = loss_and_gradients(
        linear_cross_entropy_sum, (hidden[:0], weight, bias), torch.zeros(0, dtype=torch.long), autocast=False)
    assert loss.item() == 0.0 and grad_hidden.shape == (0, 24)
    assert not grad_weight.any() and not grad_bias.any()


def test_linear_cross_entropy_rows_with_a_negative_target_add_no_loss_and_get_no_gradient(linear_head):
    (hidden, weight, bias), targets = linear_head
    targets[::3] = -100
    scored = targets >= 0
    loss, grad_hidden, grad_weight, grad_bias = loss_and_gradients(
        linear_cross_entropy_sum, (hidden, weight, bias), targets, autocast=False)
    expected = loss_and_gradients(linear_cross_entropy_sum, (hidden[scored], weight, bias), targets[scored],
                                  autocast=False)
    torch.testing.assert_close(loss, expected[0])
    torch.testing.assert_close(grad_hidden[scored], expected[1])
    assert not grad_hidden[~scored].any()
    torch.testing.assert_close(grad_weight, expected[2])
    torch.testing.assert_close(grad_bias, expected[3])


def test_linear_cross_entropy_without_gradients_gives_the_same_loss_and_computes_none(linear_head, monkeypatch):
    tensors, targets = linear_head
    with_gradients = loss_and_gradients(linear_cross_entropy_sum, tensors, targets, autocast=False)[0]
    monkeypatch.setattr(losses, "_gradients", None)  # calling it would raise
    with torch.no_grad():
        loss = linear_cross_entropy_sum(*(tensor.requires_grad_() for tensor in tensors), targets) / 7
    torch.testing.assert_close(loss, with_gradients)


def test_linear_cross_entropy_takes_many_rows_in_groups_with_the_same_result(linear_head, monkeypatch):
    tensors, targets = linear_head
    targets[::3] = -100
    whole = loss_and_gradients(linear_cross_entropy_sum, tensors, targets, autocast=False)
    group_rows = []
    apply = losses._LinearCrossEntropySum.apply
    monkeypatch.setattr(losses._LinearCrossEntropySum, "apply",
                        staticmethod(lambda hidden, *rest: group_rows.append(len(hidden)) or apply(hidden, *rest)))
    monkeypatch.setattr(losses, "_GROUP_BYTES", 4 * 5000 * 16)  # 16 rows of probabilities
    grouped = loss_and_gradients(linear_cross_entropy_sum, tensors, targets, autocast=False)
    assert group_rows == [16, 16, 8]
    for name, value, expected in zip(("loss", "hidden", "weight", "bias"), grouped, whole):
        torch.testing.assert_close(value, expected, msg=name)


@pytest.mark.parametrize("autocast", (False, True), ids=["fp32", "bf16-autocast"])
def test_linear_cross_entropy_with_logits_gives_f_linears_logits_without_a_graph_and_the_same_loss(
        linear_head, monkeypatch, autocast):
    tensors, targets = linear_head
    targets[::4] = -100
    monkeypatch.setattr(losses, "_GROUP_BYTES", 4 * 5000 * 16)  # in groups, each writing its rows' logits
    hidden, weight, bias = (tensor.detach().requires_grad_() for tensor in tensors)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        loss, logits = linear_cross_entropy_sum(hidden, weight, bias, targets, with_logits=True)
        expected_logits = F.linear(hidden, weight, bias)
        loss_alone = linear_cross_entropy_sum(hidden, weight, bias, targets)
    assert logits.dtype == expected_logits.dtype == (torch.bfloat16 if autocast else torch.float32)
    assert not logits.requires_grad and loss.requires_grad
    tolerance = {"rtol": 2e-2, "atol": 5e-2} if autocast else {"rtol": 0, "atol": 1e-5}  # bf16: a rounding or two
    torch.testing.assert_close(logits.float(), expected_logits.float(), **tolerance)
    assert torch.equal(loss, loss_alone)
