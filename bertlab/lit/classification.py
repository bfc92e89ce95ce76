"""`ClassificationModule`: fine-tunes `BertForSequenceClassification` for single-label
classification (num_labels >= 2) or regression (num_labels == 1)."""

from __future__ import annotations

from typing import Any

import torch
from torchmetrics import MeanSquaredError, MetricCollection, PearsonCorrCoef, SpearmanCorrCoef
from torchmetrics.classification import (BinaryF1Score, MulticlassAccuracy, MulticlassF1Score,
                                         MulticlassMatthewsCorrCoef)

from bertlab.config import BertConfig
from bertlab.errors import ConfigError
from bertlab.lit.fine_tuning import FineTuningModule
from bertlab.lit.throughput import classification_forward_flops
from bertlab.model import BertForSequenceClassification


def validation_metrics(config: BertConfig) -> MetricCollection:
    """The metrics of a validation: Pearson/Spearman/MSE for regression, else accuracy/F1/MCC."""
    if config.num_labels == 1:
        metrics = {"pearson": PearsonCorrCoef(), "spearman": SpearmanCorrCoef(), "mse": MeanSquaredError()}
    else:
        f1 = BinaryF1Score() if config.num_labels == 2 else MulticlassF1Score(config.num_labels, average="macro")
        metrics = {"accuracy": MulticlassAccuracy(config.num_labels, average="micro"), "f1": f1,
                   "mcc": MulticlassMatthewsCorrCoef(config.num_labels)}
    return MetricCollection(metrics, prefix="val/")


class ClassificationModule(FineTuningModule):
    """A label (or a score) per sentence or pair: FineTuningModule's arguments; the model's problem_type is
    single-label classification (num_labels >= 2) or regression (num_labels == 1)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.regression = self.model.config.num_labels == 1
        self.val_metrics = validation_metrics(self.model.config)
        # A second validation loader (a data module's validation split beside its selection split) logs as dev/….
        self.dev_metrics = self.val_metrics.clone(prefix="dev/")

    def check_model(self, model: BertForSequenceClassification) -> None:
        if model.config.problem_type not in (None, "regression", "single_label_classification") or (
                model.config.problem_type == "regression" and model.config.num_labels != 1):
            raise ConfigError(f"model config: problem_type {model.config.problem_type!r} with num_labels "
                              f"{model.config.num_labels} is not supported; fine-tuning handles single-label "
                              f"classification (num_labels >= 2) and regression (num_labels == 1)")

    def forward_flops(self, batch_size: int, length: int) -> float:
        return classification_forward_flops(self.model.config, batch_size, length)

    def on_validation_epoch_start(self) -> None:
        # Lightning resets logged metrics at epoch end, under trainer.validate's inference mode too,
        # which leaves inference tensors a later fit's validation could not update in place.
        self.val_metrics.reset()
        self.dev_metrics.reset()

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        labels = batch["labels"]
        output = self._forward(batch, labels=labels)
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
