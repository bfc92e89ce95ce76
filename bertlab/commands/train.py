"""`python -m bertlab train +recipe=mlm_tiny [overrides…]`: pretraining, by masked LM (+ NSP) or by a
teacher's sentence embeddings (`+recipe=embed_distill_tiny`, task=embedding_distill: a pretrained student learns
them before fine-tuning).

Writes into the run folder: config.yaml (resolved), metrics.csv, metrics.json, metrics.png,
lightning_checkpoints/ (for resuming) and hf_model/ (Hugging Face format with the tokenizer);
then points outputs/<name>/latest at the run.
"""

from __future__ import annotations

import logging
from pathlib import Path

from hydra.utils import get_class, instantiate
from omegaconf import DictConfig

from bertlab.config import BertConfig
from bertlab.hf_format import load_into
from bertlab.lit.embedding_distillation import EmbeddingDistillationModule
from bertlab.lit.pretraining import PretrainingModule
from bertlab.tokenizer import special_token_ids
from bertlab.training.app import launch
from bertlab.training.fit import fit
from bertlab.training.model_group import check_vocabulary, init_from_overrides, model_config

log = logging.getLogger("bertlab")


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
    if cfg.model.init_from:
        check_vocabulary(tokenizer, config, str(cfg.tokenizer.path))
        print(load_into(module.model, Path(cfg.model.init_from)))
    elif module.hparams.unigram_output_bias:  # a resumed run then loads its own weights over it
        module.init_output_bias(datamodule.token_counts())
    log.info("%s: %s parameters, vocabulary %d", type(module.model).__name__,
             f"{module.model.num_parameters:,}", config.vocab_size)
    return module


def embedding_distillation_module(cfg: DictConfig, datamodule) -> EmbeddingDistillationModule:
    """The student of `model.init_from` (required, see bertlab.training.preflight) with its weights."""
    config = checkpoint_config(cfg)
    module = instantiate(cfg.task, _partial_=True)(
        config, optimizer=instantiate(cfg.optimizer), scheduler=instantiate(cfg.scheduler))
    check_vocabulary(datamodule.tokenizer, config, str(cfg.data.tokenizer))
    print(load_into(module.model, Path(cfg.model.init_from)))
    return module


def checkpoint_config(cfg: DictConfig) -> BertConfig:
    """The config of the checkpoint `model.init_from`, with the run-time values the model group sets."""
    return BertConfig.from_dict({**BertConfig.from_json_file(cfg.model.init_from).to_dict(),
                                 **init_from_overrides(cfg.model)})


def train(cfg: DictConfig) -> None:
    def prepare():
        datamodule = instantiate(cfg.data, _convert_="all")  # plain lists in hparams: checkpoints load with weights_only
        if issubclass(get_class(cfg.task._target_), EmbeddingDistillationModule):
            module = embedding_distillation_module(cfg, datamodule)  # checks the teacher before the texts are read
            datamodule.setup("fit")
            return module, datamodule
        datamodule.setup("fit")
        return pretraining_module(cfg, datamodule), datamodule

    fit(cfg, prepare)


def main(argv: list[str], prog: str) -> None:
    launch("train", train, argv, prog)
