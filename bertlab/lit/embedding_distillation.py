"""`EmbeddingDistillationModule`: general distillation of a teacher's sentence embeddings into a
pretrained student BertModel, a stage between pretraining and fine-tuning (`train task=embedding_distill`).

    loss = MSE(W · student pooler output, √d · teacher embedding)

The teacher's embedding (bertlab.teacher.embeddings) is L2-normalised, so √d (d its width) gives the
target unit variance per dimension. W, a learned projection to the teacher's width, trains with the
student and is saved in the Lightning checkpoints, not in the export: the run exports the student as a
plain BertModel with its pooler, which a classifier fine-tuned from it takes over. The teacher's
embeddings of every training and validation text are computed once, before training, in `setup`, and
looked up by each row's `index`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Annotated, Any

import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics import MeanMetric

from bertlab.argument_checks import Count, checks_arguments
from bertlab.config import BertConfig
from bertlab.data.sentences import SentenceDataModule
from bertlab.lit.optim import ClipsWithFusedOptimizers, configure_optimization, set_dropout
from bertlab.lit.run_artifacts import RecordsTask
from bertlab.lit.task_data import task_data
from bertlab.lit.throughput import ModelFlopsPerBatch, encoder_forward_flops
from bertlab.model import BertModel
from bertlab.teacher import embeddings as embedding_teacher
from bertlab.teacher.inference import autocast_dtype
from bertlab.value_rules import Dropout, OneOf

TEACHER_PRECISIONS = OneOf("32-true", "bf16-mixed", "16-mixed")  # or null: the run's


@checks_arguments
class EmbeddingDistillationModule(ModelFlopsPerBatch, ClipsWithFusedOptimizers, RecordsTask):
    """`config`: the student's BertConfig (or its dict, as stored in checkpoints); the command loads its
    weights. `teacher`: a BertModel folder; `teacher_precision`: the Lightning precision the teacher runs
    in (null: the run's); `teacher_batch_size`: its batch size; `cache_dir`: where its embeddings are
    cached (null: the datasets cache + /bertlab). `optimizer` and `scheduler` are Hydra partials (see
    bertlab.lit.optim). `dropout` (a probability) replaces the student's dropout for this run; the
    exported config keeps the student's values, which fine-tuning then uses."""

    # Its model is a pretrained student, `model.init_from`'s: bertlab.training.run.modules builds the module from
    # that checkpoint, and before the data, so that its teacher is checked before the texts are read.
    pretrained_student = True

    def __init__(self, config: BertConfig | Mapping[str, Any], teacher: str | None = None,
                 optimizer: Callable[..., torch.optim.Optimizer] | None = None,
                 scheduler: Callable[..., torch.optim.lr_scheduler.LRScheduler] | None = None,
                 dropout: Dropout | None = 0.0, teacher_precision: Annotated[str, TEACHER_PRECISIONS] | None = None,
                 teacher_batch_size: Count = 256, cache_dir: str | None = None):
        super().__init__()
        model_config = config if isinstance(config, BertConfig) else BertConfig.from_dict(dict(config))
        teacher_width = embedding_teacher.teacher_config(teacher).hidden_size
        config = model_config.to_dict()  # saved as a plain dict: checkpoints need no bertlab class
        self.save_hyperparameters(ignore=["optimizer", "scheduler"])
        self.optimizer_factory = optimizer
        self.scheduler_factory = scheduler
        self.model = BertModel(model_config)
        if dropout is not None:
            set_dropout(self.model, dropout)
        self.projection = nn.Linear(model_config.hidden_size, teacher_width)
        self.target_scale = math.sqrt(teacher_width)
        self.register_buffer("train_targets", None, persistent=False)  # [training rows, teacher width]
        self.register_buffer("validation_targets", None, persistent=False)
        self.val_loss = MeanMetric()
        self.val_cosine = MeanMetric()

    def setup(self, stage: str) -> None:
        """Before fitting (Lightning calls it after the datamodule's `setup`): the teacher's embeddings of
        the training and validation texts."""
        if stage != "fit" or self.train_targets is not None:
            return
        data = task_data(self, SentenceDataModule, "its texts", " (data=sentences)")
        train, validation = data.texts("train"), data.texts("validation")
        precision = self.hparams.teacher_precision or str(self.trainer.precision)
        embedded = embedding_teacher.teacher_embeddings(
            self.hparams.teacher, train + validation, max_seq_length=data.max_seq_length,
            batch_size=self.hparams.teacher_batch_size, device=self.trainer.strategy.root_device,
            dtype=autocast_dtype(precision), cache_dir=self.hparams.cache_dir)
        self.train_targets = embedded.embeddings[:len(train)]  # moved to the device with the module
        self.validation_targets = embedded.embeddings[len(train):]

    def forward_flops(self, batch_size: int, length: int) -> float:
        widths = self.model.config.hidden_size, self.projection.out_features
        return encoder_forward_flops(self.model.config, batch_size, length) + 2 * batch_size * widths[0] * sum(widths)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The student's pooled output, projected to the teacher's width: [B, teacher width] in float32."""
        self.count_batch(batch)
        pooled = self.model(batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids")).pooler_output
        return self.projection(pooled).float()

    def _loss(self, projected: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(projected, targets.float() * self.target_scale)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = self._loss(self(batch), self.train_targets[batch["index"]])
        self.log("train/loss", loss, prog_bar=True, batch_size=batch["index"].shape[0])
        return loss

    def on_validation_epoch_start(self) -> None:
        # Reset in the loop that updates them: states reset at the end of a trainer.validate run are
        # inference tensors, which a later fit's validation could not update in place.
        self.val_loss.reset()
        self.val_cosine.reset()

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        projected, targets = self(batch), self.validation_targets[batch["index"]].float()
        self.val_loss.update(self._loss(projected, targets), weight=len(targets))
        self.val_cosine.update(F.cosine_similarity(projected, targets, dim=-1))

    def on_validation_epoch_end(self) -> None:
        self.log_dict({"val/loss": self.val_loss.compute(), "val/cosine": self.val_cosine.compute()}, prog_bar=True)

    def configure_optimizers(self) -> dict:
        trained = nn.ModuleDict({"model": self.model, "projection": self.projection})
        return configure_optimization(self, self.optimizer_factory, self.scheduler_factory, trained=trained)
