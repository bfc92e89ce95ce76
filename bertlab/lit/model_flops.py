"""`flops_per_batch`, which Lightning's ThroughputMonitor (bertlab.lit.throughput.TokenThroughputMonitor)
reads after every batch: the model FLOPs behind train/device/flops_per_sec and, where the device's
peak is known, train/device/mfu."""

from __future__ import annotations

import torch

from bertlab.flops import TRAINING_PER_FORWARD


class ModelFlopsPerBatch:
    """LightningModule mixin: the model FLOPs (bertlab.flops) of the last batch a step saw — forward and
    backward in training, the forward alone in validation and prediction. The module's forward calls
    `count_batch`, and the module gives the FLOPs of a forward with `forward_flops`."""

    _batch_shape: tuple[int, int] | None = None

    def count_batch(self, batch: dict[str, torch.Tensor]) -> None:
        self._batch_shape = tuple(batch["input_ids"].shape)

    def forward_flops(self, batch_size: int, length: int) -> float:
        raise NotImplementedError

    @property
    def flops_per_batch(self) -> float | None:
        if self._batch_shape is None:
            return None
        forward = self.forward_flops(*self._batch_shape)
        return TRAINING_PER_FORWARD * forward if self.training else forward
