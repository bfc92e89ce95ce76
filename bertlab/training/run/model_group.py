"""The `model` config group: a composed group as a model (its BertConfig, and the checks a loaded checkpoint
needs), and its named sizes (bert_tiny, bert_mini, …, modernbert_base) as plain dicts, read from the package's
conf/model/<name>.yaml without composing Hydra, for code that builds models outside a run (the benchmark).

A size's file names the file it starts from in its Hydra defaults list (`defaults: [bert_base, _self_]`), and its
own values come last; bert_base starts from the model group's schema, whose defaults are BertConfig's, so the
fields no file sets are left to BertConfig.from_dict. No model file holds an interpolation.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Collection
from typing import Annotated

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from bertlab.argument_checks import checks_arguments
from bertlab.checkpoint.dispatch import read_config
from bertlab.config import RUNTIME_SWITCHES, VARIANT_KEYS, BertConfig
from bertlab.errors import CheckpointError
from bertlab.training.checks.keys import overridden_keys
from bertlab.value_rules import OneOf

CHECKPOINT_KEYS = ("init_from", "allow_reinitialised")  # the model group's keys that are not BertConfig's
DROPOUT_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout")
# What the classifier reads: a masked-LM checkpoint carries no classifier, so fine-tuning builds it fresh and may
# choose it (BERT's pooler or ModernBERT's normed head; docs/variants.md).
CLASSIFIER_KEYS = ("classifier_pooling",)
# Keys of the model group that define the architecture: with `init_from` they come from the
# checkpoint's config.json, so an override of one of them cannot take effect.
ARCHITECTURE_KEYS = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size",
                     "position_embedding_type", "max_position_embeddings", "type_vocab_size", "hidden_act",
                     *(key for key in VARIANT_KEYS if key not in CLASSIFIER_KEYS))


def model_config(model_group: DictConfig, **values) -> BertConfig:
    """BertConfig from the `model` group (minus the keys of its checkpoint), plus values only known at run time."""
    fields = OmegaConf.to_container(model_group, resolve=True)
    for key in CHECKPOINT_KEYS:
        fields.pop(key, None)
    fields.update(values)
    return BertConfig.from_dict(fields)


def init_from_overrides(model_group: DictConfig, overridden: Collection[str] | None = None) -> dict:
    """What the `model` group changes in a checkpoint loaded with `init_from`: the run-time switches, and the
    dropout probabilities and classifier input the command line set (`overridden`: the keys it set, by default
    those of Hydra's running job). Its architecture keys come from the checkpoint (overriding one is refused
    by bertlab.training.checks.before_run)."""
    if overridden is None:
        overridden = overridden_keys(HydraConfig.get().overrides.task)
    chosen = [*RUNTIME_SWITCHES,
              *(key for key in (*DROPOUT_KEYS, *CLASSIFIER_KEYS) if f"model.{key}" in overridden)]
    return {key: model_group[key] for key in chosen if key in model_group}


def check_model(model_group: DictConfig, vocab_size: int | None) -> None:
    """The group's values make a model BertConfig accepts (the rules of its fields' annotations, divisibility,
    memory), before any data is prepared; `vocab_size`: the tokenizer group's, if it names one. With `init_from`,
    see `check_loaded_model`."""
    if not model_group.init_from:
        model_config(model_group, vocab_size=vocab_size or 30522)


def check_loaded_model(model_group: DictConfig, overridden: Collection[str]) -> None:
    """With `init_from`, the checkpoint's config with the values the group changes in it, once the checkpoint
    is known to exist and fit."""
    if model_group.init_from:
        BertConfig.from_dict({**read_config(model_group.init_from).to_dict(),
                              **init_from_overrides(model_group, overridden)})


def check_vocabulary(tokenizer, config: BertConfig, tokenizer_source: str) -> None:
    """A tokenizer whose ids do not index the model's embedding rows would train on garbage."""
    if tokenizer.get_vocab_size() != config.vocab_size:
        raise CheckpointError(
            f"tokenizer ({tokenizer_source}) has {tokenizer.get_vocab_size()} tokens but the model's "
            f"embeddings have {config.vocab_size} rows; use the checkpoint's own tokenizer")


def model_folder():
    """conf/model, as the package ships it."""
    return importlib.resources.files("bertlab.conf").joinpath("model")


def preset_names() -> list[str]:
    return sorted(entry.name[:-5] for entry in model_folder().iterdir() if entry.name.endswith(".yaml"))


@checks_arguments
def model_preset(name: Annotated[str, OneOf(*preset_names())]) -> dict:
    """The BertConfig fields that conf/model/`name`.yaml and the files it starts from set."""
    path = model_folder().joinpath(f"{name}.yaml")
    fields = OmegaConf.to_container(OmegaConf.create(path.read_text(encoding="utf-8")), resolve=True)
    parents = [entry for entry in fields.pop("defaults", []) if entry != "_self_" and not entry.startswith("/")]
    values = {key: value for parent in parents for key, value in model_preset(parent).items()}
    values.update({key: value for key, value in fields.items() if key not in CHECKPOINT_KEYS})
    return values
