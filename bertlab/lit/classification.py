"""`ClassificationModule`: fine-tunes `BertForSequenceClassification` for single-label
classification (num_labels >= 2) or regression (num_labels == 1)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Annotated, Any, Callable

import torch
from torchmetrics import MeanSquaredError, MetricCollection, PearsonCorrCoef, SpearmanCorrCoef
from torchmetrics.classification import (BinaryF1Score, MulticlassAccuracy, MulticlassF1Score,
                                         MulticlassMatthewsCorrCoef)

from bertlab.config import BertConfig
from bertlab.errors import ConfigError
from bertlab.flops import classification_forward_flops
from bertlab.lit.model_flops import ModelFlopsPerBatch
from bertlab.lit.optim import ClipsWithFusedOptimizers, configure_optimization
from bertlab.lit.saved_task import RecordsTask
from bertlab.model import BertForSequenceClassification
from bertlab.value_rules import Interval, checks_arguments

LayerwiseDecay = Annotated[float, Interval("(0, 1]")]  # a layer's learning rate over the one above's


def validation_metrics(config: BertConfig) -> MetricCollection:
    """The metrics of a validation: Pearson/Spearman/MSE for regression, else accuracy/F1/MCC."""
    if config.num_labels == 1:
        metrics = {"pearson": PearsonCorrCoef(), "spearman": SpearmanCorrCoef(), "mse": MeanSquaredError()}
    else:
        f1 = BinaryF1Score() if config.num_labels == 2 else MulticlassF1Score(config.num_labels, average="macro")
        metrics = {"accuracy": MulticlassAccuracy(config.num_labels, average="micro"), "f1": f1,
                   "mcc": MulticlassMatthewsCorrCoef(config.num_labels)}
    return MetricCollection(metrics, prefix="val/")


def freeze_parameters(model: torch.nn.Module, patterns: Sequence[str]) -> None:
    """Stops training the parameters whose names match any of the glob `patterns`."""
    names = [name for name, _ in model.named_parameters()]
    for pattern in patterns:
        if not any(fnmatchcase(name, pattern) for name in names):
            raise ConfigError(f"task.freeze: {pattern!r} matches no parameter of the model; names look like "
                              f"{names[0]!r} or {names[-1]!r}")
    for name, parameter in model.named_parameters():
        if any(fnmatchcase(name, pattern) for pattern in patterns):
            parameter.requires_grad_(False)


@checks_arguments
class ClassificationModule(ModelFlopsPerBatch, ClipsWithFusedOptimizers, RecordsTask):
    """`config` (BertConfig or its dict) builds a freshly initialised model; a command that loads a
    pretrained checkpoint passes it as `model` instead (its config is then the one stored).
    `optimizer` and `scheduler` are Hydra partials (see bertlab.lit.optim); `layerwise_lr_decay`
    scales each encoder layer's learning rate down from the head; `freeze` names parameters (glob
    patterns such as `bert.embeddings.word_embeddings.*`) that keep their pretrained values."""

    def __init__(self, config: BertConfig | Mapping[str, Any] | None = None,
                 optimizer: Callable[..., torch.optim.Optimizer] | None = None,
                 scheduler: Callable[..., torch.optim.lr_scheduler.LRScheduler] | None = None,
                 layerwise_lr_decay: LayerwiseDecay | None = None,
                 model: BertForSequenceClassification | None = None, compile: bool = False, freeze: Sequence[str] = ()):
        super().__init__()
        if model is None:
            if config is None:
                raise ConfigError("ClassificationModule needs a model config or a loaded model; got neither")
            model = BertForSequenceClassification(
                config if isinstance(config, BertConfig) else BertConfig.from_dict(dict(config)))
        if model.config.problem_type not in (None, "regression", "single_label_classification") or (
                model.config.problem_type == "regression" and model.config.num_labels != 1):
            raise ConfigError(f"model config: problem_type {model.config.problem_type!r} with num_labels "
                              f"{model.config.num_labels} is not supported; fine-tuning handles single-label "
                              f"classification (num_labels >= 2) and regression (num_labels == 1)")
        config = model.config.to_dict()  # saved as a plain dict: checkpoints need no bertlab class
        self.save_hyperparameters(ignore=["optimizer", "scheduler", "model"])
        self.optimizer_factory = optimizer
        self.scheduler_factory = scheduler
        self.model = model
        freeze_parameters(model, freeze)
        if compile:
            self.model.compile()
        self.regression = model.config.num_labels == 1
        self.val_metrics = validation_metrics(model.config)
        # A second validation loader (a data module's validation split beside its selection split) logs as dev/….
        self.dev_metrics = self.val_metrics.clone(prefix="dev/")

    def forward_flops(self, batch_size: int, length: int) -> float:
        return classification_forward_flops(self.model.config, batch_size, length)

    def _forward(self, batch: dict[str, torch.Tensor], labels: torch.Tensor | None = None,
                 output_hidden_states: bool = False):
        self.count_batch(batch)
        return self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                          token_type_ids=batch.get("token_type_ids"), labels=labels,
                          output_hidden_states=output_hidden_states)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = self._forward(batch, batch["labels"]).loss
        self.log("train/loss", loss, prog_bar=True, batch_size=batch["labels"].shape[0])
        return loss

    def on_validation_epoch_start(self) -> None:
        # Lightning resets logged metrics at epoch end, under trainer.validate's inference mode too,
        # which leaves inference tensors a later fit's validation could not update in place.
        self.val_metrics.reset()
        self.dev_metrics.reset()

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        labels = batch["labels"]
        output = self._forward(batch, labels)
        logits = output.logits.float()
        predictions = logits.squeeze(-1) if self.regression else logits.argmax(-1)
        metrics, prefix = (self.val_metrics, "val/") if dataloader_idx == 0 else (self.dev_metrics, "dev/")
        metrics.update(predictions, labels)
        self.log(f"{prefix}loss", output.loss, prog_bar=dataloader_idx == 0, batch_size=labels.shape[0],
                 add_dataloader_idx=False)
        self.log_dict(metrics, add_dataloader_idx=False)

    def predict_step(self, batch: dict[str, torch.Tensor], batch_idx: int, dataloader_idx: int = 0) -> dict:
        """Probabilities per class (or the regression value), with the batch's `index` when it has one
        so predictions can be put back in dataset order."""
        logits = self._forward(batch).logits.float()
        result = {"predictions": logits.squeeze(-1)} if self.regression else {"probabilities": logits.softmax(-1)}
        if "index" in batch:
            result["index"] = batch["index"]
        return result

    def configure_optimizers(self) -> dict:
        return configure_optimization(self, self.optimizer_factory, self.scheduler_factory,
                                      self.hparams.layerwise_lr_decay)
