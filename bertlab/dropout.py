"""Dropout with a cheaper random mask on CPU.

torch's CPU dropout draws its mask with `bernoulli_`, about 5 ns per element: 13–16% of a
BERT-Tiny training step. Drawing 64-bit integers (`random_`, over ten times faster per bit) and
reading each as four 16-bit uniforms gives the mask for a fraction of that. The only difference
from `F.dropout` is that the drop probability is rounded to a multiple of 2⁻¹⁶ (0.1 → 0.100006).
The draws come from torch's default generator, so seeding and gradient checkpointing's RNG
replay work as for `F.dropout`. Other devices keep `F.dropout` (fused into their kernels there).

The mask is kept as fp32 zeros and 1/(1 − p), not as booleans: torch's CPU kernels that
read a bool tensor (comparing into one, multiplying by one) are not vectorised and took 3–6× the
time of a float multiply. The product is the one `F.dropout`'s own backward computes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

_LEVELS = 1 << 16


def random_keep_mask(shape: torch.Size, p: float, device: torch.device) -> torch.Tensor:
    """An fp32 tensor of `shape`, each element 0 with probability round(p·2¹⁶)/2¹⁶, else 1."""
    count = shape.numel()
    bits = torch.empty((count + 3) // 4, dtype=torch.int64, device=device).random_(-(1 << 63), None)
    uniform16 = bits.view(torch.int16)[:count].view(shape)  # uniform over [-2¹⁵, 2¹⁵)
    return uniform16.float().ge_(round(p * _LEVELS) - _LEVELS // 2)


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    if not training or p == 0 or p == 1 or x.device.type != "cpu":
        return F.dropout(x, p, training)
    # The product in fp32 and rounded once, as F.dropout computes it for bf16 (a bf16 1/(1 − p) would be 0.15% off).
    return (x * random_keep_mask(x.shape, p, x.device).mul_(1 / (1 - p))).to(x.dtype)


class Dropout(nn.Dropout):
    """nn.Dropout through `dropout` above."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)
