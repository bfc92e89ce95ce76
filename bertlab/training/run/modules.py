"""The data module and LightningModule a run's config asks for (bertlab.training.run.fit.run_training builds
them): for `train`, masked-LM pretraining (`PretrainingModule`) or a teacher's sentence embeddings learnt by a
pretrained student (`EmbeddingDistillationModule`); for `fine-tune`, a sequence classifier from a bertlab or
Hugging Face checkpoint (`model.init_from`) or from scratch, or its distillation."""

from __future__ import annotations

import logging
from pathlib import Path

import lightning as L
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig

from bertlab.checkpoint.dispatch import load_into, read_config
from bertlab.config import BertConfig
from bertlab.lit.embedding_distillation import EmbeddingDistillationModule
from bertlab.lit.pretraining import PretrainingModule
from bertlab.model import BertForSequenceClassification
from bertlab.tokenizer import special_token_ids
from bertlab.training.run.model_group import check_vocabulary, init_from_overrides, model_config

log = logging.getLogger("bertlab")


def build(cfg: DictConfig) -> tuple[L.LightningModule, L.LightningDataModule]:
    """The LightningModule of `cfg.task` and the data module of `cfg.data`, set up for fit. A sentence-embedding
    student is built before its texts are read (its teacher is checked first), the other modules after the
    data (they read its labels or word counts)."""
    fine_tuning = cfg.command == "fine-tune"
    datamodule = instantiate(cfg.data, _convert_="all")  # plain lists in hparams: checkpoints load with weights_only
    if not fine_tuning and issubclass(get_class(cfg.task._target_), EmbeddingDistillationModule):
        module = embedding_distillation_module(cfg, datamodule)
        datamodule.setup("fit")
        return module, datamodule
    datamodule.setup("fit")
    return (classification_module if fine_tuning else pretraining_module)(cfg, datamodule), datamodule


def pretraining_module(cfg: DictConfig, datamodule) -> PretrainingModule:
    tokenizer = datamodule.tokenizer
    ids = special_token_ids(tokenizer)
    if cfg.model.init_from:  # continue pretraining: the checkpoint's architecture, its weights below
        config = checkpoint_config(cfg)
    else:
        config = model_config(cfg.model, vocab_size=tokenizer.get_vocab_size(), pad_token_id=ids["pad"])
    # _partial_: the config and the optimizer factories are objects, not config values.
    module = instantiate(cfg.task, _partial_=True)(
        config, mask_token_id=ids["mask"], special_token_ids=list(ids.values()), seed=cfg.seed,
        optimizer=instantiate(cfg.optimizer), scheduler=instantiate(cfg.scheduler))
    token_counts = datamodule.token_counts()
    module.set_unigram(token_counts)  # what the plain-text measure, text/, is scored against
    if cfg.model.init_from:
        check_vocabulary(tokenizer, config, str(cfg.tokenizer.path))
        print(load_into(module.model, Path(cfg.model.init_from)))
    elif module.hparams.unigram_output_bias:  # a resumed run then loads its own weights over it
        module.init_output_bias(token_counts)
    log.info("%s: %s parameters, vocabulary %d", type(module.model).__name__,
             f"{module.model.num_parameters:,}", config.vocab_size)
    return module


def embedding_distillation_module(cfg: DictConfig, datamodule) -> EmbeddingDistillationModule:
    """The student of `model.init_from` (required, see bertlab.training.checks) with its weights."""
    config = checkpoint_config(cfg)
    module = instantiate(cfg.task, _partial_=True)(
        config, optimizer=instantiate(cfg.optimizer), scheduler=instantiate(cfg.scheduler))
    check_vocabulary(datamodule.tokenizer, config, str(cfg.data.tokenizer))
    print(load_into(module.model, Path(cfg.model.init_from)))
    return module


def checkpoint_config(cfg: DictConfig) -> BertConfig:
    """The config of the checkpoint `model.init_from`, with the run-time values the model group sets."""
    return BertConfig.from_dict({**read_config(cfg.model.init_from).to_dict(),
                                 **init_from_overrides(cfg.model)})


def classification_module(cfg: DictConfig, datamodule) -> L.LightningModule:
    # A task's module names its model class (a token classifier's); a sequence classifier is the default.
    model_class = getattr(get_class(cfg.task._target_), "model_class", BertForSequenceClassification)
    model = build_classifier(cfg, datamodule.tokenizer, datamodule.label_names, model_class)
    return instantiate(cfg.task, _partial_=True, _convert_="all")(
        model=model, optimizer=instantiate(cfg.optimizer), scheduler=instantiate(cfg.scheduler))


def build_classifier(cfg: DictConfig, tokenizer, label_names: list[str],
                     model_class: type = BertForSequenceClassification) -> BertForSequenceClassification:
    labels = {"id2label": dict(enumerate(label_names)),
              "label2id": {name: index for index, name in enumerate(label_names)},
              "num_labels": len(label_names)}
    if cfg.model.init_from:
        # from_pretrained logs which weights are loaded and new, and returns eval mode, which Lightning's fit keeps
        model = model_class.from_pretrained(
            cfg.model.init_from, **labels, **init_from_overrides(cfg.model)).train()
    else:
        model = model_class(model_config(
            cfg.model, vocab_size=tokenizer.get_vocab_size(), pad_token_id=special_token_ids(tokenizer)["pad"],
            **labels))
    check_vocabulary(tokenizer, model.config, data_tokenizer(cfg))
    return model


def data_tokenizer(cfg: DictConfig) -> str:
    return str(cfg.data.get("tokenizer"))
