"""`PretrainingModule`: masked-language-model pretraining, with next-sentence prediction as an option.

Masking happens inside the step, on the device, from a generator seeded by (seed, rank, step,
micro-batch): no masking state exists outside the checkpointed step counter, so a resumed run masks
exactly as the uninterrupted one would have.

Every validation also measures the plain text with one corruption for every run (`text/`, see
`bertlab.metrics.TEXT_MEASURE` and docs/pretraining_validation.md): 15% of its tokens, all [MASK], at
positions fixed by the text alone, scored by the model and by a unigram model of the training tokens.
Training may score the masked tokens with a sampled softmax instead (`softmax_samples`, see
`bertlab.losses.sampled_softmax_loss`); validation and `text/` keep the full softmax.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Callable

import numpy as np
import torch
from torch import nn
from torchmetrics import MeanMetric
from torchmetrics.classification import MulticlassAccuracy

from bertlab.argument_checks import Count, Probability, Shares, check_rules, checks_arguments
from bertlab.config import BertConfig
from bertlab.errors import ConfigError, DataError
from bertlab.lit.masking import (FIXED_MASK_PROBABILITY, fixed_mask, mask_tokens, masking_generator,
                                 predicted_per_batch, predictions_per_row)
from bertlab.lit.optim import ClipsWithFusedOptimizers, configure_optimization, set_dropout
from bertlab.lit.run_artifacts import RecordsTask
from bertlab.lit.throughput import ModelFlopsPerBatch, mlm_forward_flops
from bertlab.losses import IGNORE_INDEX, predicted_positions, predicted_states, sampled_softmax_loss
from bertlab.metrics import TEXT_MEASURE, TEXT_VALIDATION, VALIDATION, VALIDATION_SETS
from bertlab.model import BertForMaskedLM, BertForPreTraining
from bertlab.value_rules import Dropout, Interval, OneOf

TRAIN_STREAM, VALIDATION_STREAM = 0, 1
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def sampled_masked_lm_alone(arguments: Mapping[str, Any]) -> str | None:
    """The sampled softmax stands for the masked-LM loss in the training step, which then trains no next-sentence
    prediction."""
    if (samples := arguments["softmax_samples"]) is not None and arguments["nsp"]:
        return (f"task.softmax_samples={samples} with task.nsp=true: the sampled softmax trains masked LM alone; "
                f"set task.softmax_samples=null or task.nsp=false")
    return None


@checks_arguments(between=(Shares(("mask_replace_prob", "random_replace_prob"),
                                  "a chosen token is masked, replaced or kept"), sampled_masked_lm_alone))
class PretrainingModule(ModelFlopsPerBatch, ClipsWithFusedOptimizers, RecordsTask):
    """Trains `BertForPreTraining` (MLM + NSP) when `nsp`, else `BertForMaskedLM`.

    `config`: the model's BertConfig (or its dict, as stored in checkpoints). `optimizer` and
    `scheduler` are Hydra partials (see bertlab.lit.optim); `mask_token_id`, the masking
    probabilities and `special_token_ids` (never drawn as random replacements) feed
    `bertlab.lit.masking.mask_tokens`. `compile` compiles the model's forward
    with torch.compile (the parameter names, and so the checkpoints, stay the same), in torch.compile's
    `compile_mode` if given: "reduce-overhead" replays the compiled forward and backward as CUDA graphs
    on a GPU, where launching a step's few hundred kernels from Python would otherwise leave it idle.
    `unigram_output_bias` asks the command that builds a fresh model to call `init_output_bias`; the command
    gives every module the training token counts (`set_unigram`), against which `text/` is scored.
    `dropout` (a probability) replaces the model's dropout while pretraining; the checkpoint's
    config keeps the model's values, which fine-tuning then uses.
    `static_masking` masks an exact number of tokens per row and predicts a block of
    `predictions_per_row(length)` positions per row (see `mask_tokens` and `masked_lm`), so every
    tensor's shape follows the batch's shape alone: with `compile` and batches padded to one length
    (data.pad_to_max_length) the model compiles once, where a changing count of masked tokens would
    make it recompile.
    `softmax_samples` (N) trains the masked LM with a sampled softmax over the step's target tokens and N draws
    from the vocabulary (`bertlab.losses.sampled_softmax_loss`, which needs `set_unigram`'s counts; not with `nsp`): a
    cheaper step, and `train/loss` then that softmax's. None: the full softmax.
    """

    _scored_tokens: int | None = None  # the tokens the last sampled softmax scored (`forward_flops`)

    def __init__(self, config: BertConfig | Mapping[str, Any], mask_token_id: int,
                 optimizer: Callable[..., torch.optim.Optimizer] | None = None,
                 scheduler: Callable[..., torch.optim.lr_scheduler.LRScheduler] | None = None,
                 nsp: bool = False, mlm_probability: Annotated[float, Interval("(0, 1)")] = 0.15,
                 mask_replace_prob: Probability = 0.8, random_replace_prob: Probability = 0.1,
                 special_token_ids: Sequence[int] = (), seed: int = 0, compile: bool = False,
                 unigram_output_bias: bool = True, dropout: Dropout | None = None, static_masking: bool = False,
                 compile_mode: Annotated[str, OneOf(*COMPILE_MODES)] | None = None,
                 softmax_samples: Count | None = None):
        super().__init__()
        model_config = checked_model_config(config, mask_token_id)
        # Hyperparameters are saved as plain values: checkpoints and hparams.yaml need no bertlab class.
        config = model_config.to_dict()
        special_token_ids = [int(token) for token in special_token_ids]
        self.save_hyperparameters(ignore=["optimizer", "scheduler"])
        self.optimizer_factory = optimizer
        self.scheduler_factory = scheduler
        self.model = BertForPreTraining(model_config) if nsp else BertForMaskedLM(model_config)
        if dropout is not None:
            set_dropout(self.model, dropout)
        if compile:
            self.model.compile(mode=compile_mode)
        # Per validation set (see `validation_set`); torchmetrics' states are not saved in checkpoints.
        self.val_metrics = nn.ModuleDict({name: self._validation_metrics(model_config.vocab_size, nsp)
                                          for name in VALIDATION_SETS})
        self.text_metrics = nn.ModuleDict({
            "loss": MeanMetric(), "unigram_loss": MeanMetric(),
            "accuracy": MulticlassAccuracy(num_classes=model_config.vocab_size, average="micro", validate_args=False)})
        # log p(token) of the unigram model (`set_unigram`); rebuilt from the data, never saved in checkpoints.
        self.register_buffer("unigram_log_probs", None, persistent=False)

    @staticmethod
    def _validation_metrics(vocab_size: int, nsp: bool) -> nn.ModuleDict:
        metrics = {"loss": MeanMetric(),
                   "accuracy": MulticlassAccuracy(num_classes=vocab_size, average="micro", validate_args=False)}
        if nsp:
            metrics["nsp_accuracy"] = MulticlassAccuracy(num_classes=2, average="micro")
        return nn.ModuleDict(metrics)

    def init_output_bias(self, token_counts: np.ndarray) -> None:
        """The MLM decoder's bias at the training tokens' log frequencies (see `init_unigram_bias`)."""
        init_unigram_bias(self.model.cls.predictions.bias, token_counts, self.hparams.special_token_ids)

    def set_unigram(self, token_counts: np.ndarray) -> None:
        """The unigram model that `text/` is scored against: the training tokens' frequencies (`unigram_log_probs`)."""
        self.unigram_log_probs = unigram_log_probs(token_counts, self.hparams.special_token_ids).float().to(self.device)

    def forward_flops(self, batch_size: int, length: int) -> float:
        # NSP's pooler and classifier (B·H² against the encoder's B·L·H²) are left out. A training step with the
        # sampled softmax decodes over its candidates alone (the last step's count); validation over the vocabulary.
        predicted = predicted_per_batch(batch_size, length, self.hparams.mlm_probability, self.hparams.static_masking)
        sampled = self.training and self.hparams.softmax_samples is not None
        return mlm_forward_flops(self.model.config, batch_size, length, predicted,
                                 scored_tokens=self._scored_tokens if sampled else None)

    def _mask(self, batch: dict[str, torch.Tensor], generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        self.count_batch(batch)
        return mask_tokens(
            batch["input_ids"], batch["special_tokens_mask"], vocab_size=self.model.config.vocab_size,
            mask_token_id=self.hparams.mask_token_id, generator=generator,
            mlm_probability=self.hparams.mlm_probability, mask_replace_prob=self.hparams.mask_replace_prob,
            random_replace_prob=self.hparams.random_replace_prob, word_ids=batch.get("word_ids"),
            special_token_ids=self.hparams.special_token_ids, static=self.hparams.static_masking)

    def _masked_forward(self, batch: dict[str, torch.Tensor], generator: torch.Generator, return_logits: bool):
        input_ids, labels = self._mask(batch, generator)
        inputs = {"input_ids": input_ids, "attention_mask": batch.get("attention_mask"),
                  "token_type_ids": batch.get("token_type_ids"), "labels": labels, "return_logits": return_logits,
                  "predictions_per_row": self._predictions_per_row(labels.shape[1])}
        if self.hparams.nsp:
            if "next_sentence_label" not in batch:
                raise DataError("pretraining with nsp=true needs batches with next_sentence_label; "
                                "enable next-sentence pairs in the data config (data.nsp=true)")
            inputs["next_sentence_label"] = batch["next_sentence_label"]
        return self.model(**inputs), labels

    def _predictions_per_row(self, length: int) -> int | None:
        """The width of the model's static prediction block; None: it predicts the masked positions only."""
        if not self.hparams.static_masking:
            return None
        return predictions_per_row(length, self.hparams.mlm_probability)

    def _predicted_targets(self, labels: torch.Tensor, per_row: int | None) -> torch.Tensor:
        """The labels in the order of the model's predictions; with a static block, -100 at filler positions."""
        if per_row is None:
            return labels[labels != IGNORE_INDEX]
        return labels.gather(1, predicted_positions(labels, per_row)).flatten()

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        micro_batch = batch_idx % self.trainer.accumulate_grad_batches
        generator = masking_generator(self.hparams.seed, TRAIN_STREAM, self.global_rank, self.global_step,
                                      micro_batch, device=self.device)
        batch_size = batch["input_ids"].shape[0]
        if self.hparams.softmax_samples is not None:
            loss = self._sampled_mlm_loss(batch, generator)
        else:
            output, _ = self._masked_forward(batch, generator, return_logits=False)
            loss = output.loss
            if self.hparams.nsp:
                self.log_dict({"train/mlm_loss": output.mlm_loss.detach().clone(),
                               "train/nsp_loss": output.nsp_loss.detach().clone()}, batch_size=batch_size)
        # Copies: Lightning keeps logged values past the step, and a CUDA-graph replay (compile_mode
        # reduce-overhead) writes the next outputs into the same memory.
        self.log("train/loss", loss.detach().clone(), prog_bar=True, batch_size=batch_size)
        return loss

    def _sampled_mlm_loss(self, batch: dict[str, torch.Tensor], generator: torch.Generator) -> torch.Tensor:
        """The masked-LM loss with a sampled softmax: the encoder's last layer and the head's transform run at
        the masked positions alone (bertlab.losses.predicted_states, as masked_lm reads them); the sample comes
        from the masking's generator."""
        input_ids, labels = self._mask(batch, generator)
        positions = predicted_positions(labels)
        out = self.model.bert(input_ids, batch.get("attention_mask"), batch.get("token_type_ids"),
                              output_positions=positions)
        hidden, targets = predicted_states(out.last_hidden_state, labels, positions=positions)
        head = self.model.cls.predictions
        loss, self._scored_tokens = sampled_softmax_loss(
            head.transform(hidden), targets, head.decoder_weight, head.bias, self.unigram_log_probs,
            self.hparams.softmax_samples, generator)
        return loss

    def on_train_batch_start(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self._start_cuda_graph_step()

    def on_validation_batch_start(self, batch: dict[str, torch.Tensor], batch_idx: int,
                                  dataloader_idx: int = 0) -> None:
        self._start_cuda_graph_step()

    def _start_cuda_graph_step(self) -> None:
        if self.hparams.compile_mode == "reduce-overhead":
            # Each batch starts a new generation of the graphs' output buffers: the last batch's are done with.
            torch.compiler.cudagraph_mark_step_begin()

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        # The same masks at every evaluation, so validation numbers compare across the run.
        generator = masking_generator(self.hparams.seed, VALIDATION_STREAM, self.global_rank, dataloader_idx,
                                      batch_idx, device=self.device)
        output, labels = self._masked_forward(batch, generator, return_logits=True)
        targets = self._predicted_targets(labels, self._predictions_per_row(labels.shape[1]))
        scored = targets != IGNORE_INDEX
        name = validation_set(self.trainer, dataloader_idx)
        metrics = self.val_metrics[name]
        if self.hparams.nsp:
            logits, mlm_loss = output.prediction_logits, output.mlm_loss
            metrics["nsp_accuracy"].update(output.seq_relationship_logits.argmax(-1), batch["next_sentence_label"])
        else:
            logits, mlm_loss = output.logits, output.loss
        metrics["loss"].update(mlm_loss, weight=scored.sum())
        metrics["accuracy"].update(logits[scored].argmax(-1), targets[scored])
        if name == plain_text_set(self.trainer):
            self._measure_text(batch)

    def _measure_text(self, batch: dict[str, torch.Tensor]) -> None:
        """`text/`'s figures on a batch of plain text: the fixed corruption (`fixed_mask`), scored by the model
        and, at the same positions, by the unigram model."""
        input_ids, labels = fixed_mask(batch["input_ids"], batch["attention_mask"], batch["special_tokens_mask"],
                                       mask_token_id=self.hparams.mask_token_id,
                                       excluded_ids=self.hparams.special_token_ids)
        # The static prediction block of this corruption's rate keeps torch.compile's shapes fixed.
        per_row = predictions_per_row(labels.shape[1], FIXED_MASK_PROBABILITY) if self.hparams.static_masking else None
        self._start_cuda_graph_step()  # the validation forward's outputs are read already
        output = self.model(input_ids=input_ids, attention_mask=batch["attention_mask"],
                            token_type_ids=batch.get("token_type_ids"), labels=labels, predictions_per_row=per_row)
        logits, loss = (output.prediction_logits, output.mlm_loss) if self.hparams.nsp else (output.logits, output.loss)
        targets = self._predicted_targets(labels, per_row)
        scored = targets != IGNORE_INDEX
        self.text_metrics["loss"].update(loss, weight=scored.sum())
        self.text_metrics["accuracy"].update(logits[scored].argmax(-1), targets[scored])
        if self.unigram_log_probs is not None:
            self.text_metrics["unigram_loss"].update(-self.unigram_log_probs[targets[scored]])

    def on_validation_epoch_start(self) -> None:
        # Reset in the loop that updates them: states reset at the end of a trainer.validate run are
        # inference tensors, which a later fit's validation could not update in place.
        for metrics in [*self.val_metrics.values(), self.text_metrics]:
            for metric in metrics.values():
                metric.reset()

    def on_validation_epoch_end(self) -> None:
        logged = {}
        for name, metrics in self.val_metrics.items():
            if metrics["loss"].update_called:  # a set this validation read
                values = {key: metric.compute() for key, metric in metrics.items()}
                values["perplexity"] = values["loss"].exp()
                logged.update({f"{name}/{key}": value for key, value in values.items()})
        self.log_dict(logged, prog_bar=True)
        if self.text_metrics["loss"].update_called:
            self.log_dict(self._text_figures())

    def _text_figures(self) -> dict[str, torch.Tensor]:
        """`text/`: the model's loss, perplexity and accuracy; with the unigram model, its perplexity and
        the ratio of the two (lower is better)."""
        loss = self.text_metrics["loss"].compute()
        figures = {"loss": loss, "perplexity": loss.exp(), "accuracy": self.text_metrics["accuracy"].compute()}
        if self.text_metrics["unigram_loss"].update_called:
            unigram_loss = self.text_metrics["unigram_loss"].compute()
            figures.update(unigram_perplexity=unigram_loss.exp(), perplexity_ratio=(loss - unigram_loss).exp())
        return {f"{TEXT_MEASURE}/{key}": value for key, value in figures.items()}

    def configure_optimizers(self) -> dict:
        return configure_optimization(self, self.optimizer_factory, self.scheduler_factory)


def validation_set(trainer, dataloader_idx: int) -> str:
    """The validation set (a key of bertlab.metrics.VALIDATION_SETS, its metrics' prefix) that dataloader
    `dataloader_idx` reads: its key when the validation dataloaders are a dict (PretrainingDataModule's, when
    the training sequences are copied pairs), else `val`."""
    loaders = trainer.val_dataloaders
    return list(loaders)[dataloader_idx] if isinstance(loaders, Mapping) else VALIDATION


def plain_text_set(trainer) -> str:
    """The validation set that reads the held-out plain text: `val_text` beside a set built otherwise (copied
    pairs), else `val`."""
    return TEXT_VALIDATION if isinstance(trainer.val_dataloaders, Mapping) else VALIDATION


def checked_model_config(config: BertConfig | Mapping[str, Any], mask_token_id: int) -> BertConfig:
    """A pretraining module's BertConfig (checkpoints store it as a dict), once its mask token is known to fit."""
    model_config = config if isinstance(config, BertConfig) else BertConfig.from_dict(dict(config))
    size = model_config.vocab_size
    check_rules("mask_token_id", mask_token_id, [Interval(f"[0, {size})", whole=True,
                                                          says=f"a token of the vocabulary (ids 0 to {size - 1})")])
    return model_config


def init_unigram_bias(bias: torch.Tensor, token_counts: np.ndarray, special_token_ids: Sequence[int]) -> None:
    """Sets an MLM decoder's `bias` at the log frequency of each token in the training data.

    With the bias at zero, the model first spends thousands of steps learning the unigram
    distribution (Adam moves a bias by about lr per step, and log frequencies span ~15 nats),
    and only then starts to use the context. Add-one smoothing keeps unseen tokens finite;
    special tokens, never predicted, get the count of an unseen token.
    """
    if bias is None:
        raise ConfigError("task.unigram_output_bias sets the MLM decoder's bias, and model.decoder_bias=false leaves "
                          "it none; set task.unigram_output_bias=false or model.decoder_bias=true")
    if tuple(np.shape(token_counts)) != tuple(bias.shape):
        raise DataError(f"token counts have shape {tuple(np.shape(token_counts))}; expected {tuple(bias.shape)}")
    with torch.no_grad():
        bias.copy_(unigram_log_probs(token_counts, special_token_ids))


def unigram_log_probs(token_counts: np.ndarray, special_token_ids: Sequence[int]) -> torch.Tensor:
    """log p(token) of a unigram model of the training tokens, in float64: add-one smoothing keeps unseen
    tokens finite; special tokens, never predicted, get the count of an unseen token."""
    counts = torch.tensor(token_counts, dtype=torch.float64)
    counts[list(special_token_ids)] = 0
    return (counts + 1).log() - (counts + 1).sum().log()
