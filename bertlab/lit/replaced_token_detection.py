"""`ReplacedTokenDetectionModule`: ELECTRA's pretraining (Clark et al. 2020) of a BERT encoder.

A small generator, a masked LM that by default reads the discriminator's embeddings, fills the masked positions
with tokens sampled from its predictions; the discriminator, the BertModel the run exports, tells for
every token whether it was replaced:

    loss = generator's masked-LM loss + discriminator_weight · BCE(replaced?) over the real tokens

The discriminator learns from every token of a sequence, where a masked LM learns from the masked ones.
Masking and sampling draw from the same (seed, step)-seeded generator as `PretrainingModule`'s masking,
so a resumed run replaces exactly the tokens the uninterrupted one would have. The generator and the
discriminator's head are saved in the Lightning checkpoints, not in the export.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics import MeanMetric

from bertlab.config import BertConfig
from bertlab.errors import ConfigError
from bertlab.flops import encoder_forward_flops, expected_masked_positions, mlm_forward_flops
from bertlab.lit.masking import mask_tokens, masking_generator
from bertlab.lit.model_flops import ModelFlopsPerBatch
from bertlab.lit.optim import ClipsWithFusedOptimizers, configure_optimization
from bertlab.lit.pretraining import (TRAIN_STREAM, VALIDATION_STREAM, checked_model_config, init_unigram_bias,
                                     validation_set)
from bertlab.metrics import VALIDATION_SETS
from bertlab.model import ACTIVATIONS, IGNORE_INDEX, BertForMaskedLM, BertModel

VALIDATION_METRICS = ("loss", "mlm_loss", "rtd_loss", "rtd_accuracy", "replaced")  # of `_losses`, averaged


def replace_masked(input_ids: torch.Tensor, labels: torch.Tensor, generator_logits: torch.Tensor,
                   generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The discriminator's input and targets: `input_ids` with each labelled position (row-major, the
    order of the sparse head's `generator_logits`) replaced by a token sampled from those logits, and
    whether each token differs from the original (a sample that hits the original is not a replacement)."""
    # Inverse-CDF sampling, one uniform draw per position: torch.multinomial with a seeded CPU generator
    # spends a draw per vocabulary entry, 8x slower here and as slow as the rest of the step.
    cumulative = generator_logits.detach().float().softmax(dim=-1).cumsum(dim=-1)
    draws = torch.rand(cumulative.shape[0], 1, generator=generator, device=cumulative.device) * cumulative[:, -1:]
    sampled = torch.searchsorted(cumulative, draws).squeeze(-1).clamp(max=cumulative.shape[-1] - 1)
    corrupted = input_ids.masked_scatter(labels != IGNORE_INDEX, sampled.to(input_ids.dtype))
    return corrupted, corrupted != input_ids


class ReplacedTokenDetectionModule(ModelFlopsPerBatch, ClipsWithFusedOptimizers):
    """Trains `model`, a BertModel, as ELECTRA's discriminator, with a generator of `generator_layers`
    (null: half the discriminator's, at least one) of the same width, which with `share_embeddings`
    reads the discriminator's embeddings and ties its decoder to their word vectors (else it has its
    own). `config`, `mask_token_id`, the masking probabilities, `special_token_ids`, `seed`,
    `unigram_output_bias` (for the generator's decoder) and `dropout` are as for `PretrainingModule`.
    ELECTRA shows the generator [MASK] at every chosen token; BERT's 10% kept and 10% random tokens are
    the default here, as without them a 2-layer generator did not leave its unigram loss in 2,400 steps
    (docs/results.md). `discriminator_weight` is ELECTRA's λ (50)."""

    def __init__(self, config: BertConfig | Mapping[str, Any], mask_token_id: int,
                 optimizer: Callable[..., torch.optim.Optimizer] | None = None,
                 scheduler: Callable[..., torch.optim.lr_scheduler.LRScheduler] | None = None,
                 mlm_probability: float = 0.15, mask_replace_prob: float = 0.8, random_replace_prob: float = 0.1,
                 special_token_ids: Sequence[int] = (), seed: int = 0, generator_layers: int | None = None,
                 discriminator_weight: float = 50.0, share_embeddings: bool = True,
                 unigram_output_bias: bool = True, dropout: float | None = None):
        super().__init__()
        model_config = checked_model_config(config, mask_token_id, seed, dropout)
        if generator_layers is not None and generator_layers < 1:
            raise ConfigError(f"task.generator_layers must be a positive integer or null, got {generator_layers}")
        generator_layers = generator_layers or max(1, model_config.num_hidden_layers // 2)
        config = model_config.to_dict()  # saved as a plain dict: checkpoints need no bertlab class
        special_token_ids = [int(token) for token in special_token_ids]
        self.save_hyperparameters(ignore=["optimizer", "scheduler"])
        self.optimizer_factory = optimizer
        self.scheduler_factory = scheduler
        self.model = BertModel(model_config, add_pooling_layer=False)
        generator_config = dataclasses.replace(model_config, num_hidden_layers=generator_layers, pruned_heads={})
        self.generator = BertForMaskedLM(generator_config)
        if share_embeddings:
            self.generator.share_embeddings(self.model.embeddings)
        hidden = model_config.hidden_size
        self.discriminator_head = nn.Sequential(nn.Linear(hidden, hidden), ACTIVATIONS[model_config.hidden_act](),
                                                nn.Linear(hidden, 1))
        self.model.post_init(self.discriminator_head)
        if dropout is not None:
            self.model.set_dropout(dropout)
            self.generator.set_dropout(dropout)
        # Per validation set (bertlab.lit.pretraining.validation_set).
        self.val_metrics = nn.ModuleDict({name: nn.ModuleDict({key: MeanMetric() for key in VALIDATION_METRICS})
                                          for name in VALIDATION_SETS})

    def init_output_bias(self, token_counts: np.ndarray) -> None:
        """The generator's decoder bias at the training tokens' log frequencies (see `init_unigram_bias`)."""
        init_unigram_bias(self.generator.cls.predictions.bias, token_counts, self.hparams.special_token_ids)

    def forward_flops(self, batch_size: int, length: int) -> float:
        """The generator's masked LM on its expected masked positions, the discriminator's encoder and its
        head (H×H, then H×1) on every position."""
        predicted = expected_masked_positions(batch_size, length - 2, self.hparams.mlm_probability)
        hidden = self.model.config.hidden_size
        head = 2 * batch_size * length * hidden * (hidden + 1)
        return (mlm_forward_flops(self.generator.config, batch_size, length, predicted)
                + encoder_forward_flops(self.model.config, batch_size, length) + head)

    def _losses(self, batch: dict[str, torch.Tensor], generator: torch.Generator) -> dict[str, torch.Tensor]:
        self.count_batch(batch)
        input_ids, attention_mask = batch["input_ids"], batch.get("attention_mask")
        token_type_ids = batch.get("token_type_ids")
        masked_ids, labels = mask_tokens(
            input_ids, batch["special_tokens_mask"], vocab_size=self.model.config.vocab_size,
            mask_token_id=self.hparams.mask_token_id, generator=generator,
            mlm_probability=self.hparams.mlm_probability, mask_replace_prob=self.hparams.mask_replace_prob,
            random_replace_prob=self.hparams.random_replace_prob, word_ids=batch.get("word_ids"),
            special_token_ids=self.hparams.special_token_ids)
        generated = self.generator(masked_ids, attention_mask, token_type_ids, labels=labels)
        corrupted, replaced = replace_masked(input_ids, labels, generated.logits, generator)
        hidden = self.model(corrupted, attention_mask, token_type_ids).last_hidden_state
        scores = self.discriminator_head(hidden).squeeze(-1).float()
        if attention_mask is not None:  # the real tokens only
            scores, replaced = scores[attention_mask.bool()], replaced[attention_mask.bool()]
        targets = replaced.float()
        rtd_loss = F.binary_cross_entropy_with_logits(scores, targets)
        return {"loss": generated.loss + self.hparams.discriminator_weight * rtd_loss, "mlm_loss": generated.loss,
                "rtd_loss": rtd_loss, "rtd_accuracy": ((scores > 0) == replaced).float().mean(),
                "replaced": targets.mean()}

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        micro_batch = batch_idx % self.trainer.accumulate_grad_batches
        generator = masking_generator(self.hparams.seed, TRAIN_STREAM, self.global_rank, self.global_step,
                                      micro_batch, device=self.device)
        losses = self._losses(batch, generator)
        batch_size = batch["input_ids"].shape[0]
        self.log("train/loss", losses["loss"].detach(), prog_bar=True, batch_size=batch_size)
        self.log_dict({f"train/{name}": losses[name].detach() for name in ("mlm_loss", "rtd_loss", "replaced")},
                      batch_size=batch_size)
        return losses["loss"]

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        # The same masks and samples at every evaluation, so validation numbers compare across the run.
        generator = masking_generator(self.hparams.seed, VALIDATION_STREAM, self.global_rank, dataloader_idx,
                                      batch_idx, device=self.device)
        losses = self._losses(batch, generator)
        for name, metric in self.val_metrics[validation_set(self.trainer, dataloader_idx)].items():
            metric.update(losses[name])

    def on_validation_epoch_start(self) -> None:
        # Reset in the loop that updates them: states reset at the end of a trainer.validate run are
        # inference tensors, which a later fit's validation could not update in place.
        for metrics in self.val_metrics.values():
            for metric in metrics.values():
                metric.reset()

    def on_validation_epoch_end(self) -> None:
        logged = {}
        for name, metrics in self.val_metrics.items():
            if metrics["loss"].update_called:  # a set this validation read
                logged.update({f"{name}/{key}": metric.compute() for key, metric in metrics.items()})
                logged[f"{name}/perplexity"] = logged[f"{name}/mlm_loss"].exp()  # the generator's
        self.log_dict(logged, prog_bar=True)

    def configure_optimizers(self) -> dict:
        trained = nn.ModuleDict({"model": self.model, "generator": self.generator,
                                 "discriminator_head": self.discriminator_head})
        return configure_optimization(self, self.optimizer_factory, self.scheduler_factory, trained=trained)
