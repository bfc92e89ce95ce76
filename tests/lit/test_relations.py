"""MiniLM's relations and the hidden-state MSE (bertlab.lit.relations): the relation is the softmax of
scaled dot products per relation head, the KL is zero between equal relations, and padded positions
change nothing."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from bertlab.errors import ConfigError
from bertlab.lit.relations import check_relation_heads, masked_mse, relation_kl, relation_scores


def test_a_relation_is_the_softmax_of_each_heads_scaled_dot_products():
    states = torch.randn(1, 3, 4)
    keep = torch.tensor([[True, True, False]])
    scores = relation_scores(states, states, heads=2, keep=keep)
    second_head = states[0, :2, 2:]
    expected = (second_head @ second_head.T / math.sqrt(2)).softmax(-1)
    assert scores.shape == (1, 2, 3, 3)
    torch.testing.assert_close(scores[0, 1, :2].softmax(-1)[:, :2], expected)
    assert (scores.softmax(-1)[..., 2] == 0).all()  # the padded key weighs nothing in any row


def test_the_kl_is_zero_between_equal_relations_and_that_of_the_softmaxes_between_others():
    keep = torch.ones(2, 5, dtype=torch.bool)
    teacher = relation_scores(torch.randn(2, 5, 8), torch.randn(2, 5, 8), heads=4, keep=keep)
    assert relation_kl(teacher, teacher, keep).item() == pytest.approx(0.0, abs=1e-6)
    student = relation_scores(torch.randn(2, 5, 8), torch.randn(2, 5, 8), heads=4, keep=keep)
    expected = F.kl_div(student.log_softmax(-1), teacher.log_softmax(-1), log_target=True, reduction="none")
    torch.testing.assert_close(relation_kl(teacher, student, keep), expected.sum(-1).mean())


def test_padded_positions_change_neither_the_kl_nor_the_mse():
    torch.manual_seed(0)
    teacher, student = torch.randn(2, 6, 12), torch.randn(2, 6, 8)
    keep = torch.ones(2, 6, dtype=torch.bool)
    keep[1, 4:] = False  # row 1 has 4 real tokens

    def losses(teacher, student):
        kl = relation_kl(relation_scores(teacher, teacher, 4, keep), relation_scores(student, student, 4, keep),
                         keep)
        return kl, masked_mse(student, teacher[..., :8], keep)

    changed_teacher, changed_student = teacher.clone(), student.clone()
    changed_teacher[1, 4:], changed_student[1, 4:] = 100.0, -50.0
    for before, after in zip(losses(teacher, student), losses(changed_teacher, changed_student)):
        torch.testing.assert_close(before, after)
    # Each row, unpadded, weighs its real positions as in the padded batch: row 0 has 6, row 1 has 4.
    def row_kl(row: int, length: int):
        real = keep[row:row + 1, :length]
        return relation_kl(relation_scores(teacher[row:row + 1, :length], teacher[row:row + 1, :length], 4, real),
                           relation_scores(student[row:row + 1, :length], student[row:row + 1, :length], 4, real),
                           real)

    torch.testing.assert_close(losses(teacher, student)[0], (6 * row_kl(0, 6) + 4 * row_kl(1, 4)) / 10)


def test_relation_heads_must_divide_both_widths():
    check_relation_heads(8, 384, 128)
    with pytest.raises(ConfigError, match=r"task.relation_heads=12: must divide .* \(384, 128\)"):
        check_relation_heads(12, 384, 128)
