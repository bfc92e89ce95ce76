"""`FineTuningModule`: what every fine-tuning task shares — its model built from a config or given loaded,
parameters frozen by name, the optimizer with a layerwise learning-rate decay, the training step on the batch's
targets. The sentence (bertlab.lit.classification), token (bertlab.lit.token_classification) and span
(bertlab.lit.question_answering) tasks add their validation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Annotated, Any, Callable

import torch

from bertlab.argument_checks import checks_arguments
from bertlab.config import BertConfig
from bertlab.errors import ConfigError
from bertlab.lit.optim import ClipsWithFusedOptimizers, configure_optimization
from bertlab.lit.run_artifacts import RecordsTask
from bertlab.lit.throughput import ModelFlopsPerBatch, encoder_forward_flops
from bertlab.model import BertForSequenceClassification
from bertlab.value_rules import Interval

LayerwiseDecay = Annotated[float, Interval("(0, 1]")]  # a layer's learning rate over the one above's


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


def per_piece_forward_flops(model: torch.nn.Module, batch_size: int, length: int) -> float:
    """A forward pass's FLOPs for a head on every piece (a token classifier's, a span head's): the encoder,
    ModernBERT's dense head where the model has one, and the output layer."""
    config = model.config
    hidden, positions = config.hidden_size, batch_size * length
    head = 0 if model.head is None else 2 * positions * hidden * hidden
    return encoder_forward_flops(config, batch_size, length) + head + 2 * positions * hidden * config.num_labels


def built_or_given(arguments: Mapping[str, Any]) -> str | None:
    """A module's model is built from a model config or given loaded."""
    if arguments["config"] is None and arguments["model"] is None:
        return "a fine-tuning module needs a model config (config) or a loaded model (model); got neither"
    return None


@checks_arguments(between=(built_or_given,))
class FineTuningModule(ModelFlopsPerBatch, ClipsWithFusedOptimizers, RecordsTask):
    """`config` (BertConfig or its dict) builds a freshly initialised `model_class`; a command that loads a
    pretrained checkpoint passes it as `model` instead (its config is then the one stored).
    `optimizer` and `scheduler` are Hydra partials (see bertlab.lit.optim); `layerwise_lr_decay`
    scales each encoder layer's learning rate down from the head; `freeze` names parameters (glob
    patterns such as `bert.embeddings.word_embeddings.*`) that keep their pretrained values. A task's module
    takes these (`*args, **kwargs`, passed on) and its own options, which it saves with `keep_options`."""

    model_class: type = BertForSequenceClassification  # what bertlab.training.run.modules builds for the task
    targets: tuple[str, ...] = ("labels",)  # the batch's keys the model's loss reads

    def __init__(self, config: BertConfig | Mapping[str, Any] | None = None,
                 optimizer: Callable[..., torch.optim.Optimizer] | None = None,
                 scheduler: Callable[..., torch.optim.lr_scheduler.LRScheduler] | None = None,
                 layerwise_lr_decay: LayerwiseDecay | None = None,
                 model: torch.nn.Module | None = None, compile: bool = False, freeze: Sequence[str] = ()):
        super().__init__()
        if model is None:
            model = self.model_class(config if isinstance(config, BertConfig) else BertConfig.from_dict(dict(config)))
        self.check_model(model)
        # Named, not collected from the constructors' frames: a subclass's `config` argument would hide the dict.
        self.save_hyperparameters({"config": model.config.to_dict(),  # checkpoints need no bertlab class
                                   "layerwise_lr_decay": layerwise_lr_decay, "compile": compile,
                                   "freeze": list(freeze)})
        self.optimizer_factory = optimizer
        self.scheduler_factory = scheduler
        self.model = model
        freeze_parameters(model, freeze)
        if compile:
            self.model.compile()

    def keep_options(self, **options: Any) -> None:
        """Saves a task's own constructor options in the checkpoint's hyperparameters beside the shared ones."""
        self.save_hyperparameters({**self.hparams, **options})

    def check_model(self, model: torch.nn.Module) -> None:
        """Refuses, in one line, a model the task cannot fine-tune."""

    def _forward(self, batch: dict[str, torch.Tensor], **targets: Any):
        self.count_batch(batch)
        return self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                          token_type_ids=batch.get("token_type_ids"), **targets)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = self._forward(batch, **{key: batch[key] for key in self.targets}).loss
        self.log("train/loss", loss, prog_bar=True, batch_size=batch["input_ids"].shape[0])
        return loss

    def configure_optimizers(self) -> dict:
        return configure_optimization(self, self.optimizer_factory, self.scheduler_factory,
                                      self.hparams.layerwise_lr_decay)
