"""Token throughput and MFU of training (TokenThroughputMonitor), clocked only on the steps it logs, and
`flops_per_batch` (ModelFlopsPerBatch), which the monitor reads after every batch: the model FLOPs behind
train/device/flops_per_sec and, where the device's peak is known, train/device/mfu.

The model FLOPs are analytic counts (a multiply-add = 2 FLOPs) of BERT's matrix multiplications, for the MFU of
training runs and of the benchmark. Embeddings are lookups and elementwise work (LayerNorm, GELU, softmax) is left
out, as in the usual model-FLOPs utilisation convention; the backward pass costs twice the forward.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated, Any

import lightning as L
import torch
from lightning.fabric.utilities.throughput import Throughput, get_available_flops
from lightning.pytorch.trainer.states import RunningStage, TrainerFn
from lightning.pytorch.utilities import rank_zero_only

from bertlab.argument_checks import Positive, checks_arguments
from bertlab.config import BertConfig
from bertlab.value_rules import Interval

TRAINING_PER_FORWARD = 3  # a training step: the forward, and a backward of twice its FLOPs

# Datasheet dense bf16 tensor-core peaks (FLOP/s) by CUDA device name, first match wins: the denominator of
# MFU. Lightning's own table gives the with-sparsity figures, twice these. H200 SXM has H100 SXM's arithmetic.
DENSE_BF16_PEAK_FLOPS = {"H100 PCIe": 756e12, "H100 NVL": 835e12, "H200 NVL": 835e12, "H100": 989e12, "H200": 989e12}
WindowSize = Annotated[int, Interval("[2, inf)")]  # a rate is the difference of the window's first and last readings


def encoder_forward_flops(config: BertConfig, batch_size: int, length: int,
                          last_layer_rows: float | None = None) -> float:
    """Per layer: the Q, K, V and output projections and the two FFN matmuls, 2·B·L·(4H² + 2HI), plus
    attention scores and context, 2·2·B·L²·H (a gated FFN's first matmul is twice as wide: 3HI; local
    layers are counted as global). With `last_layer_rows` (sparse MLM prediction) the last
    layer's keys and values are still computed at every position, its queries, scores, output
    projection and FFN only at that many."""
    tokens = batch_size * length
    hidden, intermediate = config.hidden_size, config.intermediate_size
    ffn_matmuls = 3 if config.gated_ffn else 2

    def layer(query_rows: float) -> float:
        keys_values = 2 * tokens * 2 * hidden**2
        return keys_values + 2 * query_rows * (2 * hidden**2 + ffn_matmuls * hidden * intermediate + 2 * length * hidden)

    last = tokens if last_layer_rows is None else last_layer_rows
    return (config.num_hidden_layers - 1) * layer(tokens) + layer(last)


def mlm_head_forward_flops(config: BertConfig, predicted: float, scored_tokens: float | None = None) -> float:
    """The head's transform (H×H) and decoder (H×V) on `predicted` positions: every position for a
    stock model, only the masked ones for bertlab's sparse prediction. `scored_tokens`: the decoder
    scores that many tokens of the vocabulary (a sampled softmax's candidates) instead of all V."""
    hidden = config.hidden_size
    scored = config.vocab_size if scored_tokens is None else scored_tokens
    return 2 * predicted * hidden**2 + 2 * predicted * hidden * scored


def mlm_forward_flops(config: BertConfig, batch_size: int, length: int, predicted: float,
                      last_layer_rows: float | None = None, scored_tokens: float | None = None) -> float:
    """bertlab's sparse masked LM: the last layer runs at the `predicted` positions too, unless
    `last_layer_rows` says otherwise (with dynamic masking each row is filled up to the batch's most
    masked tokens in a row; those filling rows are not model FLOPs, as padding is not); the decoder
    over `scored_tokens` of the vocabulary (see mlm_head_forward_flops)."""
    rows = predicted if last_layer_rows is None else last_layer_rows
    return (encoder_forward_flops(config, batch_size, length, rows)
            + mlm_head_forward_flops(config, predicted, scored_tokens))


def mlm_training_flops(config: BertConfig, batch_size: int, length: int, predicted: float,
                       last_layer_rows: float | None = None) -> float:
    """One MLM training step: 3 × (encoder + head) forward."""
    return TRAINING_PER_FORWARD * mlm_forward_flops(config, batch_size, length, predicted, last_layer_rows)


def classification_forward_flops(config: BertConfig, batch_size: int, length: int) -> float:
    """The encoder, its last layer at each sequence's [CLS] only, then the pooler (H×H) and the classifier
    (H×labels) there."""
    hidden = config.hidden_size
    return (encoder_forward_flops(config, batch_size, length, last_layer_rows=batch_size)
            + 2 * batch_size * hidden * (hidden + config.num_labels))


def expected_masked_positions(batch_size: int, maskable_per_row: int, mlm_probability: float = 0.15) -> float:
    return batch_size * maskable_per_row * mlm_probability


def dense_bf16_peak_flops(device_name: str) -> float | None:
    """The datasheet's dense bf16 peak of a CUDA device (torch.cuda.get_device_name), None if not listed."""
    return next((peak for name, peak in DENSE_BF16_PEAK_FLOPS.items() if name in device_name), None)


class ModelFlopsPerBatch:
    """LightningModule mixin: the model FLOPs (above) of the last batch a step saw — forward and
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


def compute_dtype(precision: str) -> torch.dtype:
    """The dtype the matmuls of a run at Lightning's `trainer.precision` compute in, as Lightning's own
    ThroughputMonitor reads it from the precision plugin: the column of its table of GPU peaks."""
    if precision.startswith("transformer-engine"):
        return torch.int8
    if precision.startswith("bf16"):
        return torch.bfloat16
    if precision.startswith("16"):
        return torch.float16
    return torch.float64 if precision.startswith("64") else torch.float32


@dataclass
class StageClock:
    """One stage's counts since its start, which its Throughput sees only when the clock is read."""

    throughput: Throughput
    start: float = 0.0  # time.perf_counter() at the start, moved past the validations for training
    elapsed: float = 0.0  # seconds from `start` to the last reading
    batches: int = 0
    samples: int = 0
    tokens: int = 0
    unclocked_batches: int = 0
    unclocked_flops: float = 0.0

    def restart(self) -> None:
        self.throughput.reset()
        self.elapsed, self.batches, self.samples, self.tokens = 0.0, 0, 0, 0
        self.unclocked_batches, self.unclocked_flops = 0, 0.0
        self.start = time.perf_counter()

    def count(self, batch: dict[str, torch.Tensor], flops: float | None) -> None:
        self.batches += 1
        self.samples += batch["input_ids"].shape[0]
        self.tokens += batch["input_ids"].numel()  # padding included: counting real tokens would sync the device
        self.unclocked_batches += 1
        self.unclocked_flops += flops or 0.0  # None before the first batch is counted

    def read(self, device: torch.device) -> None:
        """Records the counts so far against the time the device has taken for them."""
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        self.elapsed = time.perf_counter() - self.start
        self.throughput.update(time=self.elapsed, batches=self.batches, samples=self.samples, lengths=self.tokens,
                               flops=self.unclocked_flops)
        self.unclocked_batches, self.unclocked_flops = 0, 0.0


@checks_arguments
class TokenThroughputMonitor(L.Callback):
    """Lightning's Throughput for bertlab's dict batches during fit: logs train/device/samples_per_sec
    (sequences), train/device/items_per_sec (tokens, padding included), train/device/flops_per_sec
    (the module's `flops_per_batch`, ModelFlopsPerBatch), train/device/mfu, those FLOP/s over
    the device's peak, and the totals train/time, train/batches, train/samples, train/lengths; validate/…
    the same for the validations. The peak: `peak_flops` (FLOP/s of one device), else the datasheet's dense
    bf16 peak for a bf16 run on a GPU DENSE_BF16_PEAK_FLOPS lists, else Lightning's table of GPUs for the
    training precision (no peak on CPU: no MFU).

    Lightning's ThroughputMonitor reads the clock after every batch, and on a GPU that is a device sync: the
    host stops queueing the next step's kernels until the device has finished this one, and the device idles
    while it launches them. This one counts every training batch but reads the clock only on the steps it logs
    (every trainer.log_every_n_steps optimizer steps, and when the trainer stops) and before a validation, so
    `window_size` counts logged steps. A validation's time is left out of training's.
    """

    def __init__(self, window_size: WindowSize = 100, peak_flops: Positive | None = None):
        self.window_size = window_size
        self.peak_flops = peak_flops
        self.clocks: dict[RunningStage, StageClock] = {}
        self.steps_seen = 0  # trainer.global_step at the last training batch: a new one ends an accumulation

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if stage != TrainerFn.FITTING:
            return
        device = trainer.strategy.root_device
        peak = self.peak_flops
        if peak is None and device.type == "cuda" and "bf16" in str(trainer.precision):
            peak = dense_bf16_peak_flops(torch.cuda.get_device_name(device))
        if peak is None:
            peak = get_available_flops(device, compute_dtype(str(trainer.precision)))
        self.clocks = {stage: StageClock(Throughput(available_flops=peak, world_size=trainer.world_size,
                                                    window_size=self.window_size))
                       for stage in (RunningStage.TRAINING, RunningStage.VALIDATING)}

    @rank_zero_only
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.clocks[RunningStage.TRAINING].restart()
        self.steps_seen = trainer.global_step

    @rank_zero_only
    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        clock = self.clocks[RunningStage.TRAINING]
        clock.count(batch, pl_module.flops_per_batch)
        if trainer.global_step == self.steps_seen:  # gradients still accumulating: no optimizer step yet
            return
        self.steps_seen = trainer.global_step
        if logs(trainer, trainer.global_step):
            clock.read(trainer.strategy.root_device)
            # at the step Lightning logs this batch's own metrics at, with the epoch, as it logs a callback's
            publish(trainer, RunningStage.TRAINING, clock.throughput.compute(), trainer.global_step - 1,
                    epoch=trainer.current_epoch)

    @rank_zero_only
    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not timed(trainer):
            return
        # The training batches since the last logged step end before the validation's time is set aside.
        if (training := self.clocks[RunningStage.TRAINING]).unclocked_batches:
            training.read(trainer.strategy.root_device)
        self.clocks[RunningStage.VALIDATING].restart()

    @rank_zero_only
    def on_validation_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                                batch_idx: int, dataloader_idx: int = 0) -> None:
        if not timed(trainer):
            return
        clock = self.clocks[RunningStage.VALIDATING]
        clock.count(batch, pl_module.flops_per_batch)
        clock.read(trainer.strategy.root_device)
        if logs(trainer, clock.batches):
            # at the count of the fit's validation batches so far, which a resumed fit restores
            step = trainer.fit_loop.epoch_loop.val_loop.batch_progress.total.ready
            publish(trainer, RunningStage.VALIDATING, clock.throughput.compute(), step)

    @rank_zero_only
    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not timed(trainer):
            return
        # Training's clock goes on from where its last reading left it, as if the validation took no time.
        training, validation = self.clocks[RunningStage.TRAINING], self.clocks[RunningStage.VALIDATING]
        training.start = validation.start + validation.elapsed - training.elapsed


def timed(trainer: L.Trainer) -> bool:
    """Whether a validation is one this monitor times: one of fit's, after the sanity check."""
    return trainer.state.fn == TrainerFn.FITTING and not trainer.sanity_checking


def logs(trainer: L.Trainer, count: int) -> bool:
    """Whether Lightning logs at the `count`th step of training (or batch of a validation)."""
    return trainer.log_every_n_steps > 0 and (count % trainer.log_every_n_steps == 0 or trainer.should_stop)


def publish(trainer: L.Trainer, stage: RunningStage, metrics: dict[str, float], step: int, **extra: Any) -> None:
    """Hands `metrics`, named under the stage (train/…, validate/…), to every logger of the trainer."""
    named = {f"{stage.value}/{name}": value for name, value in metrics.items()} | extra
    for logger in trainer.loggers:
        logger.log_metrics(named, step=step)
        logger.save()
