"""`DistillationModule`: fine-tuning a student classifier on a teacher classifier's outputs as well as
on the labels (`task=distill task.teacher=<classifier folder>`).

    loss = α · T² · KL(teacher ‖ student, both softened by T) + (1 − α) · cross-entropy(labels)
           + hidden_weight · MSE(W · student [CLS], teacher [CLS]), over the layer pairs of `layer_map`

For regression both terms are mean squared errors, to the teacher's value and to the label. The
hidden-state term matches sentence-level [CLS] states, which need no shared tokenizer; W, a learned
projection to the teacher's width when the widths differ, trains with the student and is saved in the
Lightning checkpoints, not in the exported model, which stays a plain BertForSequenceClassification.

The teacher's outputs (bertlab.teacher.outputs) are computed once, before training, in `setup`, and looked
up by each row's `index`. A training row without a gold label (UNLABELLED, NaN for regression: a
transfer example the teacher alone labels) adds only to the teacher's terms. With α = 0 and no hidden
term the module trains exactly as ClassificationModule: the same data order, initialisation, random
draws and loss.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from bertlab.argument_checks import NonNegative, Positive, Probability, checks_arguments
from bertlab.config import BertConfig
from bertlab.data.classification import ClassificationDataModule, labelled_rows
from bertlab.data.encoding import column_values
from bertlab.lit.classification import ClassificationModule, validation_metrics
from bertlab.lit.fine_tuning import LayerwiseDecay
from bertlab.lit.optim import configure_optimization, set_dropout
from bertlab.lit.task_data import task_data
from bertlab.model import BertForSequenceClassification
from bertlab.teacher import folders as teacher_folders
from bertlab.teacher.inference import autocast_dtype
from bertlab.teacher.outputs import teacher_outputs, write_report
from bertlab.value_rules import Dropout

log = logging.getLogger("bertlab")


def soft_target_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """KL(teacher ‖ student) between the class distributions softened by `temperature`, averaged over
    rows and scaled by T², which keeps its gradients' size as T changes (Hinton et al., 2015)."""
    student = F.log_softmax(student_logits.float() / temperature, dim=-1)
    teacher = F.log_softmax(teacher_logits.float() / temperature, dim=-1)
    return F.kl_div(student, teacher, reduction="batchmean", log_target=True) * temperature**2


def labelled_rows_loss(logits: torch.Tensor, labels: torch.Tensor, regression: bool) -> torch.Tensor:
    """Cross-entropy (MSE for regression) averaged over the rows with a gold label; 0 when none has one."""
    labelled = labelled_rows(labels)
    if regression:
        per_row = F.mse_loss(logits.float().squeeze(-1), labels.nan_to_num(), reduction="none")
    else:
        per_row = F.cross_entropy(logits.float(), labels.clamp(min=0), reduction="none")
    return (per_row * labelled).sum() / labelled.sum().clamp(min=1)


def layers_of_both(arguments: Mapping[str, Any]) -> str | None:
    """Each pair of a layer map names a layer of the student and then one of the teacher, counted from 1."""
    for pair in arguments["layer_map"] or ():
        if len(pair) != 2:
            return f"task.layer_map: {list(pair)} is not a [student layer, teacher layer] pair"
        for who, layer in zip(("student", "teacher"), pair):
            if not 1 <= layer <= (layers := arguments[f"{who}_layers"]):
                return f"task.layer_map: {list(pair)} names {who} layer {layer}, but the {who} has layers 1-{layers}"
    return None


@checks_arguments(between=(layers_of_both,))
def layer_pairs(layer_map: Sequence[Sequence[int]] | None, student_layers: int,
                teacher_layers: int) -> list[tuple[int, int]]:
    """(student layer, teacher layer) pairs, counted from 1; by default every student layer i of n with
    the teacher's layer i·m/n (rounded), as TinyBERT's uniform mapping."""
    if layer_map is None:
        return [(i, math.floor(i * teacher_layers / student_layers + 0.5)) for i in range(1, student_layers + 1)]
    return [(int(student), int(teacher)) for student, teacher in layer_map]


def unmatched_layer_map(arguments: Mapping[str, Any]) -> str | None:
    """A layer map pairs the hidden states that only the hidden-state term compares."""
    if arguments["layer_map"] is not None and arguments["hidden_weight"] == 0:
        return ("task.layer_map is set but task.hidden_weight is 0, so no hidden state is matched; "
                "set task.hidden_weight > 0, or drop task.layer_map")
    return None


@checks_arguments(between=(unmatched_layer_map,))
class DistillationModule(ClassificationModule):
    """ClassificationModule's arguments, and: `teacher`, a classifier folder with the student's labels;
    `alpha`, the weight of the teacher's term; `temperature`; `hidden_weight`, the weight of the [CLS]
    hidden-state term (0: off); `layer_map`, its [student layer, teacher layer] pairs (null: uniform);
    `cache_dir`, where the teacher's outputs are cached (null: the datasets cache + /bertlab); `dropout`
    (a probability), the student's dropout for this run in place of its config's, which the export keeps."""

    def __init__(self, config: BertConfig | Mapping[str, Any] | None = None,
                 optimizer: Callable[..., torch.optim.Optimizer] | None = None,
                 scheduler: Callable[..., torch.optim.lr_scheduler.LRScheduler] | None = None,
                 layerwise_lr_decay: LayerwiseDecay | None = None,
                 model: BertForSequenceClassification | None = None, compile: bool = False, freeze: Sequence[str] = (),
                 teacher: str | None = None, alpha: Probability = 0.9, temperature: Positive = 2.0,
                 hidden_weight: NonNegative = 0.0, layer_map: list[list[int]] | None = None,
                 cache_dir: str | None = None, dropout: Dropout | None = None):
        super().__init__(config=config, optimizer=optimizer, scheduler=scheduler,
                         layerwise_lr_decay=layerwise_lr_decay, model=model, compile=compile, freeze=freeze)
        # Lightning collects the arguments of every __init__ up the class tree: this frame's `config`
        # argument would hide the plain dict the parent saved.
        config = self.model.config.to_dict()
        self.save_hyperparameters(ignore=["optimizer", "scheduler", "model"])
        if dropout is not None:
            set_dropout(self.model, dropout)
        teacher_config = teacher_folders.teacher_config(teacher)
        teacher_folders.check_labels(teacher, teacher_config, self.model.config)
        self.teacher = teacher
        self.alpha, self.temperature, self.hidden_weight = alpha, temperature, hidden_weight
        self.cache_dir = cache_dir
        self.layer_pairs = [] if hidden_weight == 0 else layer_pairs(
            layer_map, self.model.config.num_hidden_layers, teacher_config.num_hidden_layers)
        widths = (self.model.config.hidden_size, teacher_config.hidden_size)
        # Made only when it is needed: building it draws from the random generator.
        self.hidden_projection = nn.Linear(*widths) if self.layer_pairs and widths[0] != widths[1] else None
        self.register_buffer("teacher_logits", None, persistent=False)  # [training rows, num_labels]
        self.register_buffer("teacher_hidden", None, persistent=False)  # [training rows, layer pairs, width]
        self.every_row_labelled = True

    def setup(self, stage: str) -> None:
        """Before fitting (Lightning calls it after the datamodule's `setup`): the teacher's outputs on
        the training and validation texts, and teacher.json in the run folder."""
        if stage != "fit" or self.teacher_logits is not None:
            return
        data = task_data(self, ClassificationDataModule, "the training texts")
        outputs = teacher_outputs(
            self.teacher, data.texts(data.train_split), data.texts(data.validation_split),
            layers=[teacher_layer for _, teacher_layer in self.layer_pairs], max_seq_length=data.max_seq_length,
            batch_size=data.eval_batch_size, device=self.trainer.strategy.root_device,
            dtype=autocast_dtype(str(self.trainer.precision)),
            cache_dir=self.cache_dir)
        self.teacher_logits, self.teacher_hidden = outputs.train_logits, outputs.train_hidden
        training_labels = torch.as_tensor(column_values(data.datasets[data.train_split], "labels"))
        self.every_row_labelled = bool(labelled_rows(training_labels).all())
        validation = self._teacher_validation(outputs.validation_logits,
                                              column_values(data.datasets[data.validation_split], "labels"))
        log.info("Teacher %s on the validation split: %s", self.teacher,
                 ", ".join(f"{name} {value:.4f}" for name, value in validation.items()))
        if self.trainer.is_global_zero:
            write_report(Path(self.trainer.default_root_dir), self.teacher, outputs, validation)

    def _teacher_validation(self, logits: torch.Tensor, labels: np.ndarray) -> dict[str, float]:
        predictions = logits.squeeze(-1) if self.regression else logits.argmax(-1)
        metrics = validation_metrics(self.model.config)(predictions, torch.as_tensor(labels))
        return {name.removeprefix("val/"): float(value) for name, value in metrics.items()}

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        labels, rows = batch["labels"], batch["index"]
        output = self._forward(batch, labels=labels if self.every_row_labelled else None,
                               output_hidden_states=bool(self.layer_pairs))
        terms = {}  # name: (weight, unweighted loss)
        if self.alpha < 1:
            label_loss = output.loss if self.every_row_labelled else \
                labelled_rows_loss(output.logits, labels, self.regression)
            terms["label_loss"] = (1 - self.alpha, label_loss)
        if self.alpha > 0:
            terms["teacher_loss"] = (self.alpha, self._teacher_loss(output.logits, rows))
        if self.layer_pairs:
            terms["hidden_loss"] = (self.hidden_weight, self._hidden_loss(output.hidden_states, rows))
        loss = sum(weight * value for weight, value in terms.values())
        self.log("train/loss", loss, prog_bar=True, batch_size=labels.shape[0])
        if len(terms) > 1:
            self.log_dict({f"train/{name}": value for name, (_, value) in terms.items()}, batch_size=labels.shape[0])
        return loss

    def _teacher_loss(self, logits: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        teacher_logits = self.teacher_logits[rows]
        if self.regression:
            return F.mse_loss(logits.float(), teacher_logits)
        return soft_target_loss(logits, teacher_logits, self.temperature)

    def _hidden_loss(self, hidden_states: tuple[torch.Tensor, ...], rows: torch.Tensor) -> torch.Tensor:
        student = torch.stack([hidden_states[layer][:, 0] for layer, _ in self.layer_pairs], dim=1)
        if self.hidden_projection is not None:
            student = self.hidden_projection(student)
        return F.mse_loss(student.float(), self.teacher_hidden[rows].float())

    def configure_optimizers(self) -> dict:
        trained = self.model if self.hidden_projection is None else nn.ModuleDict(
            {"model": self.model, "hidden_projection": self.hidden_projection})
        return configure_optimization(self, self.optimizer_factory, self.scheduler_factory,
                                      self.hparams.layerwise_lr_decay, trained)
