"""The small BertConfigs and models the tests build: one base size that a test module narrows with
`functools.partial(small_config, ...)` where its numbers differ, and weights moved off their init."""

from __future__ import annotations

import torch

from bertlab.config import BertConfig

SMALL = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
             max_position_embeddings=64)


def small_config(**overrides) -> BertConfig:
    return BertConfig(**{**SMALL, **overrides})


def perturbed(model: torch.nn.Module, *, seed: int, scale: float = 0.05) -> torch.nn.Module:
    """Moves every parameter off its init, so that zero biases and unit norms matter to the outputs too."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(scale * torch.randn(parameter.shape, generator=generator))
    return model
