"""The data module and LightningModule a run's config asks for (bertlab.training.run.fit.run_training builds
them): for `train`, masked-LM pretraining (`PretrainingModule`) or a teacher's sentence embeddings learnt by a
pretrained student (`EmbeddingDistillationModule`); for `fine-tune`, a sequence classifier from a bertlab or
Hugging Face checkpoint (`model.init_from`) or from scratch, or its distillation.

The task's class is the one `task._target_` names, and only it is imported (Hydra's `get_class`); how it is built
is read from the class itself (`pretrained_student`, `model_class`), so a run imports no other task's module."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import lightning as L
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig

from bertlab.checkpoint.dispatch import load_into, read_config
from bertlab.config import BertConfig
from bertlab.model import BertForSequenceClassification
from bertlab.tokenizer import special_token_ids
from bertlab.training.run.model_group import check_vocabulary, init_from_overrides, model_config

log = logging.getLogger("bertlab")


@dataclass(frozen=True)
class ModuleGroups:
    """What building a run's data and LightningModule reads of its config."""
    command: str                    # train or fine-tune
    data: DictConfig
    task: DictConfig
    model: DictConfig
    optimizer: DictConfig | None
    scheduler: DictConfig | None
    tokenizer: DictConfig | None    # train's tokenizer group, which names the vocabulary of a model's init_from
    seed: int


def build(groups: ModuleGroups) -> tuple[L.LightningModule, L.LightningDataModule]:
    """The LightningModule of `groups.task` and the data module of `groups.data`, set up for fit. A task class with
    `pretrained_student` (the sentence-embedding distillation's) is built before its texts are read (its teacher
    is checked first), the other modules after the data (they read its labels or word counts)."""
    fine_tuning = groups.command == "fine-tune"
    datamodule = instantiate(groups.data, _convert_="all")  # plain lists in hparams: checkpoints load with weights_only
    if not fine_tuning and getattr(get_class(groups.task._target_), "pretrained_student", False):
        module = embedding_distillation_module(groups, datamodule)
        datamodule.setup("fit")
        return module, datamodule
    datamodule.setup("fit")
    return (classification_module if fine_tuning else pretraining_module)(groups, datamodule), datamodule


def pretraining_module(groups: ModuleGroups, datamodule) -> L.LightningModule:
    """A masked-LM task's module (bertlab.lit.pretraining.PretrainingModule or a subclass) for the tokenizer of
    `datamodule`: a fresh model of the `model` group, or `model.init_from`'s to continue pretraining."""
    tokenizer = datamodule.tokenizer
    ids = special_token_ids(tokenizer)
    if groups.model.init_from:  # continue pretraining: the checkpoint's architecture, its weights below
        config = checkpoint_config(groups.model)
    else:
        config = model_config(groups.model, vocab_size=tokenizer.get_vocab_size(), pad_token_id=ids["pad"])
    # _partial_: the config and the optimizer factories are objects, not config values.
    module = instantiate(groups.task, _partial_=True)(
        config, mask_token_id=ids["mask"], special_token_ids=list(ids.values()), seed=groups.seed,
        optimizer=instantiate(groups.optimizer), scheduler=instantiate(groups.scheduler))
    token_counts = datamodule.token_counts()
    module.set_unigram(token_counts)  # what the plain-text measure, text/, is scored against
    if groups.model.init_from:
        check_vocabulary(tokenizer, config, str(groups.tokenizer.path))
        print(load_into(module.model, Path(groups.model.init_from)))
    elif module.hparams.unigram_output_bias:  # a resumed run then loads its own weights over it
        module.init_output_bias(token_counts)
    log.info("%s: %s parameters, vocabulary %d", type(module.model).__name__,
             f"{module.model.num_parameters:,}", config.vocab_size)
    return module


def embedding_distillation_module(groups: ModuleGroups, datamodule) -> L.LightningModule:
    """A task's module that trains a pretrained student (bertlab.lit.embedding_distillation): the student of
    `model.init_from` (required, see bertlab.training.checks) with its weights."""
    config = checkpoint_config(groups.model)
    module = instantiate(groups.task, _partial_=True)(
        config, optimizer=instantiate(groups.optimizer), scheduler=instantiate(groups.scheduler))
    check_vocabulary(datamodule.tokenizer, config, str(groups.data.tokenizer))
    print(load_into(module.model, Path(groups.model.init_from)))
    return module


def checkpoint_config(model_group: DictConfig) -> BertConfig:
    """The config of the checkpoint `model.init_from`, with the run-time values the model group sets."""
    return BertConfig.from_dict({**read_config(model_group.init_from).to_dict(), **init_from_overrides(model_group)})


def classification_module(groups: ModuleGroups, datamodule) -> L.LightningModule:
    # A task's module names its model class (a token classifier's); a sequence classifier is the default.
    model_class = getattr(get_class(groups.task._target_), "model_class", BertForSequenceClassification)
    model = build_classifier(groups.model, datamodule.tokenizer, str(groups.data.get("tokenizer")),
                             datamodule.label_names, model_class)
    return instantiate(groups.task, _partial_=True, _convert_="all")(
        model=model, optimizer=instantiate(groups.optimizer), scheduler=instantiate(groups.scheduler))


def build_classifier(model_group: DictConfig, tokenizer, tokenizer_source: str, label_names: list[str],
                     model_class: type = BertForSequenceClassification) -> BertForSequenceClassification:
    """The classifier of the `model` group for `label_names`, its vocabulary checked against `tokenizer` (read
    from `tokenizer_source`)."""
    labels = {"id2label": dict(enumerate(label_names)),
              "label2id": {name: index for index, name in enumerate(label_names)},
              "num_labels": len(label_names)}
    if model_group.init_from:
        # from_pretrained logs which weights are loaded and new, and returns eval mode, which Lightning's fit keeps
        model = model_class.from_pretrained(model_group.init_from, **labels, **init_from_overrides(model_group)).train()
    else:
        model = model_class(model_config(
            model_group, vocab_size=tokenizer.get_vocab_size(), pad_token_id=special_token_ids(tokenizer)["pad"],
            **labels))
    check_vocabulary(tokenizer, model.config, tokenizer_source)
    return model
