"""Which attention heads a fine-tuned classifier needs (Michel, Levy and Neubig 2019, "Are Sixteen
Heads Really Better than One?"): a head's importance is |∂loss/∂ξ_h|, the gradient of the loss with
respect to a gate ξ_h = 1 on the head's attention, summed over a labelled split, each layer's scores
divided by their L2 norm. The pruning curve masks the least important heads first and measures the
metric again at each step."""

from __future__ import annotations

from pathlib import Path

import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from bertlab.atomic_files import write_atomically
from bertlab.inference import LabelledSplit, length_sorted_batches, split_metrics
from bertlab.metrics import best_mode
from bertlab.model import BertForSequenceClassification


def head_importance(model: BertForSequenceClassification, data: LabelledSplit, *, batch_size: int = 32) -> torch.Tensor:
    """[layers, heads] importance of every head, each layer's row of unit L2 norm."""
    config = model.config
    gate = torch.ones(config.num_hidden_layers, config.num_attention_heads, requires_grad=True)
    importance = torch.zeros_like(gate)
    trainable = [parameter for parameter in model.parameters() if parameter.requires_grad]
    model.eval()
    model.requires_grad_(False)  # only the gate's gradient is wanted
    try:
        for batch in length_sorted_batches(data.rows, data.lengths, pad_token_id=data.pad_token_id,
                                           batch_size=batch_size):
            loss = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"],
                         labels=batch["labels"], head_mask=gate).loss
            (gradient,) = torch.autograd.grad(loss, gate)
            importance += gradient.abs()
    finally:
        for parameter in trainable:
            parameter.requires_grad_(True)
    return importance / importance.norm(dim=-1, keepdim=True).clamp_min(1e-20)


def least_important_first(importance: torch.Tensor) -> list[tuple[int, int]]:
    """(layer, head) pairs, least important first."""
    heads = importance.shape[1]
    return [(int(index) // heads, int(index) % heads) for index in importance.flatten().argsort(stable=True)]


def head_mask_without(heads: list[tuple[int, int]], shape: torch.Size) -> torch.Tensor:
    """A [layers, heads] 0/1 mask that switches `heads` off."""
    mask = torch.ones(shape)
    for layer, head in heads:
        mask[layer, head] = 0.0
    return mask


def pruning_curve(model: BertForSequenceClassification, data: LabelledSplit, order: list[tuple[int, int]], *,
                  step: int = 1, batch_size: int = 256) -> list[dict[str, float]]:
    """The split's metrics with the first k heads of `order` masked, for k = 0, step, 2·step, …, all."""
    counts = sorted({*range(0, len(order), step), len(order)})
    shape = torch.Size((model.config.num_hidden_layers, model.config.num_attention_heads))
    rows = []
    for count in counts:
        metrics = split_metrics(model, data, batch_size=batch_size, head_mask=head_mask_without(order[:count], shape))
        rows.append({"heads_pruned": count, "heads_left": len(order) - count, **metrics})
    return rows


def most_pruned_within(curve: list[dict[str, float]], metric: str, max_drop: float) -> dict[str, float]:
    """The point of `curve` with the most heads pruned whose `metric` is less than `max_drop` points (×100)
    worse than the full model's (its first point, always kept): higher for a loss or an error, lower for the rest."""
    full = curve[0][metric]
    worse = (lambda value: value - full) if best_mode(metric) == "min" else (lambda value: full - value)
    within = [row for row in curve[1:] if worse(row[metric]) * 100 < max_drop]
    return max([curve[0], *within], key=lambda row: row["heads_pruned"])


def heads_to_prune(order: list[tuple[int, int]], count: int) -> dict[int, list[int]]:
    """The first `count` heads of `order` as `prune_heads` takes them: {layer: [heads]}."""
    pruned: dict[int, list[int]] = {}
    for layer, head in order[:count]:
        pruned.setdefault(layer, []).append(head)
    return {layer: sorted(heads) for layer, heads in sorted(pruned.items())}


def plot_heads(importance: torch.Tensor, curve: list[dict[str, float]], metric: str, max_drop: float, path: Path) -> None:
    """Left: the importance of each head (layers × heads). Right: the metric against heads pruned,
    least important first, with the full model's value less `max_drop` points."""
    layers, heads = importance.shape
    figure = Figure(figsize=(6 + 0.45 * heads, max(4.0, 0.5 * layers + 2)), layout="constrained")
    FigureCanvasAgg(figure)
    left, right = figure.subplots(1, 2, width_ratios=[max(heads, 4), 8])
    image = left.imshow(importance, cmap="magma", aspect="auto")
    for layer in range(layers):
        for head in range(heads):
            value = float(importance[layer, head])
            left.text(head, layer, f"{value:.2f}", ha="center", va="center", fontsize=6,
                      color="black" if value > 0.6 * float(importance.max()) else "white")
    left.set_xticks(range(heads))
    left.set_yticks(range(layers))
    left.set_xlabel("head")
    left.set_ylabel("layer")
    left.set_title("head importance (per-layer L2-normalised)")
    figure.colorbar(image, ax=left, shrink=0.8)
    pruned = [row["heads_pruned"] for row in curve]
    values = [100 * row[metric] for row in curve]
    right.plot(pruned, values, marker="o", markersize=3)
    right.axhline(values[0] - max_drop, color="grey", linestyle="--", label=f"full model − {max_drop:g} point(s)")
    right.set_xlabel("heads pruned (least important first)")
    right.set_ylabel(f"{metric} ×100")
    right.set_title(f"{metric} against heads pruned ({layers * heads} heads)")
    right.grid(alpha=0.3)
    right.legend(loc="lower left")
    write_atomically(path, lambda temp: figure.savefig(temp, format="png", dpi=110))
