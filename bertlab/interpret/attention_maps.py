"""The attention probabilities of one sentence (or pair) and their pictures: every layer and head as a
grid of maps labelled with the tokens, one head enlarged, and the attention from one token across
layers. Rows of a map are the attending token ("from"), columns the attended one ("to")."""

from __future__ import annotations

from pathlib import Path

import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from tokenizers import Tokenizer

from bertlab.atomic_files import write_atomically
from bertlab.model import BertModel

MAX_LABELS = 48  # more tokens than this on an axis: every n-th is labelled


@torch.inference_mode()
def sentence_attentions(model: BertModel, tokenizer: Tokenizer, text: str, text_pair: str | None = None,
                        ) -> tuple[list[str], list[torch.Tensor]]:
    """The tokens (special tokens included) and each layer's attention probabilities [heads, L, L]
    (layers pruned of some heads have fewer)."""
    model.eval()
    encoding = tokenizer.encode(text, text_pair)
    input_ids = torch.tensor([encoding.ids])
    token_type_ids = torch.tensor([encoding.type_ids])
    output = model(input_ids, token_type_ids=token_type_ids, output_attentions=True)
    return encoding.tokens, [layer[0].float() for layer in output.attentions]


def _new_figure(width: float, height: float) -> Figure:
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _label_axis(set_ticks, set_labels, tokens: list[str], size: float, rotation: int = 0) -> None:
    every = -(-len(tokens) // MAX_LABELS)
    positions = list(range(0, len(tokens), every))
    set_ticks(positions)
    set_labels([tokens[i] for i in positions], fontsize=size, rotation=rotation)


def _save(figure: Figure, path: Path) -> Path:
    write_atomically(path, lambda temp: figure.savefig(temp, format="png", dpi=110))
    return path


def plot_attention_grid(tokens: list[str], attentions: list[torch.Tensor], path: Path, title: str) -> Path:
    """Layers as rows, heads as columns, one map each on a shared 0–1 colour scale; the tokens label
    the left column's rows and the bottom row's columns."""
    layers, heads = len(attentions), max(layer.shape[0] for layer in attentions)
    cell = min(3.5, max(1.2, 14 / heads))
    label_size = max(3.5, min(9.0, 9 * cell * 12 / (len(tokens) * 3.5)))
    figure = _new_figure(cell * heads + 1.5, cell * layers + 1.2)
    figure.suptitle(title)
    grid = figure.subplots(layers, heads, squeeze=False)
    image = None
    for index, layer in enumerate(attentions):
        for head in range(heads):
            axes = grid[index][head]
            if head >= layer.shape[0]:  # pruned
                axes.axis("off")
                continue
            image = axes.imshow(layer[head], cmap="viridis", vmin=0.0, vmax=1.0)
            axes.set_xticks([])
            axes.set_yticks([])
            if index == 0:
                axes.set_title(f"head {head}", fontsize=9)
            if head == 0:
                axes.set_ylabel(f"layer {index}", fontsize=9)
                _label_axis(axes.set_yticks, axes.set_yticklabels, tokens, label_size)
            if index == layers - 1:
                _label_axis(axes.set_xticks, axes.set_xticklabels, tokens, label_size, rotation=90)
    figure.colorbar(image, ax=grid, shrink=0.6, label="attention probability")
    return _save(figure, path)


def plot_head(tokens: list[str], attentions: list[torch.Tensor], layer: int, head: int, path: Path) -> Path:
    """One head, enlarged: every token labelled on both axes."""
    size = max(5.0, min(16.0, 0.3 * len(tokens) + 2))
    figure = _new_figure(size + 1.5, size)
    axes = figure.add_subplot()
    image = axes.imshow(attentions[layer][head], cmap="viridis", vmin=0.0, vmax=1.0)
    label_size = max(4.0, min(10.0, 300 / len(tokens)))
    _label_axis(axes.set_yticks, axes.set_yticklabels, tokens, label_size)
    _label_axis(axes.set_xticks, axes.set_xticklabels, tokens, label_size, rotation=90)
    axes.set_ylabel("from (query token)")
    axes.set_xlabel("to (key token)")
    axes.set_title(f"layer {layer}, head {head}")
    figure.colorbar(image, ax=axes, shrink=0.8, label="attention probability")
    return _save(figure, path)


def token_attention(attentions: list[torch.Tensor], token: int) -> torch.Tensor:
    """[layers, L]: the attention from `token` to every token, averaged over each layer's heads."""
    return torch.stack([layer[:, token].mean(0) for layer in attentions])


def plot_token_attention(tokens: list[str], attentions: list[torch.Tensor], token: int, path: Path) -> Path:
    """Where one token looks, layer by layer (the mean over heads)."""
    values = token_attention(attentions, token)
    figure = _new_figure(max(6.0, min(18.0, 0.3 * len(tokens) + 3)), 0.45 * len(attentions) + 2)
    axes = figure.add_subplot()
    image = axes.imshow(values, cmap="viridis", vmin=0.0, vmax=float(values.max()), aspect="auto")
    _label_axis(axes.set_xticks, axes.set_xticklabels, tokens, max(4.0, min(10.0, 300 / len(tokens))), rotation=90)
    axes.set_yticks(range(len(attentions)))
    axes.set_yticklabels([f"layer {index}" for index in range(len(attentions))])
    axes.set_title(f"attention from {tokens[token]!r} (token {token}), mean over heads")
    figure.colorbar(image, ax=axes, label="attention probability")
    return _save(figure, path)
