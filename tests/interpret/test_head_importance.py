"""Head importance (bertlab.interpret.head_importance): importance is the gradient of the loss with respect to a
head gate (checked against transformers' head_mask), and the curve's points are the metrics of physically pruned
models (the command, `bertlab heads`: tests/commands/test_heads.py)."""

from __future__ import annotations

import copy

import pytest
import torch

from bertlab.inference import length_sorted_batches, load_classifier, load_labelled_split, split_metrics
from bertlab.interpret.head_importance import (head_importance, head_mask_without, heads_to_prune,
                                               least_important_first, most_pruned_within, pruning_curve)

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def split(classifier_dir, tiny_data_dir):
    model = load_classifier(str(classifier_dir))
    return model, load_labelled_split(str(classifier_dir), model, str(tiny_data_dir / "sst2"))


def test_importance_is_the_per_layer_normalised_gradient_of_transformers_head_mask(classifier_dir, split):
    model, data = split
    ours = head_importance(model, data, batch_size=16)
    reference = transformers.BertForSequenceClassification.from_pretrained(classifier_dir, attn_implementation="eager")
    reference.eval()
    total = torch.zeros(2, 4)
    for batch in length_sorted_batches(data.rows, data.lengths, pad_token_id=data.pad_token_id, batch_size=16):
        gate = torch.ones(2, 4, requires_grad=True)
        loss = reference(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                         token_type_ids=batch["token_type_ids"], labels=batch["labels"], head_mask=gate).loss
        loss.backward()
        total += gate.grad.abs()
    expected = total / total.norm(dim=-1, keepdim=True)
    torch.testing.assert_close(ours, expected, rtol=1e-4, atol=1e-6)
    assert all(parameter.requires_grad for parameter in model.parameters())


def test_each_point_of_the_curve_is_the_metric_of_the_physically_pruned_model(split):
    model, data = split
    order = least_important_first(head_importance(model, data))
    assert sorted(order) == [(layer, head) for layer in range(2) for head in range(4)]
    curve = pruning_curve(model, data, order, step=3)
    assert [row["heads_pruned"] for row in curve] == [0, 3, 6, 8]
    assert curve[0] == {"heads_pruned": 0, "heads_left": 8, **split_metrics(model, data)}
    for row in curve[1:]:
        pruned = copy.deepcopy(model)
        pruned.prune_heads(heads_to_prune(order, row["heads_pruned"]))
        direct = split_metrics(pruned, data)
        for key, value in direct.items():
            assert row[key] == pytest.approx(value, abs=1e-5), (row["heads_pruned"], key)


def test_heads_to_prune_groups_by_layer_and_the_mask_switches_those_heads_off():
    order = [(1, 3), (0, 2), (1, 0)]
    assert heads_to_prune(order, 3) == {0: [2], 1: [0, 3]}
    mask = head_mask_without(order[:2], torch.Size((2, 4)))
    assert mask.tolist() == [[1, 1, 0, 1], [1, 1, 1, 0]]


@pytest.mark.parametrize("metric, values, expected", [
    ("accuracy", (0.80, 0.795, 0.70, 0.50), 2),  # higher is better: 0.5 point lost at 2 heads, 10 at 4
    ("loss", (0.50, 0.505, 0.90, 2.00), 2),      # lower is better: the loss rising is the loss of points
    ("mse", (0.30, 0.20, 0.25, 0.40), 4),        # an error that falls as heads go is within any budget
    ("loss", (0.50, 0.60, 0.70, 0.80), 0),       # nothing within: the full model
])
def test_the_most_pruned_point_within_the_budget_reads_the_metrics_direction(metric, values, expected):
    curve = [{"heads_pruned": pruned, metric: value} for pruned, value in zip((0, 2, 4, 8), values)]
    assert most_pruned_within(curve, metric, max_drop=1.0)["heads_pruned"] == expected
