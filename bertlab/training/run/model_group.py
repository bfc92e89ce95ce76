"""The `model` config group as a model: its BertConfig, and the checks a loaded checkpoint needs."""

from __future__ import annotations

from collections.abc import Collection

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from bertlab.checkpoint.dispatch import read_config
from bertlab.config import RUNTIME_SWITCHES, VARIANT_KEYS, BertConfig
from bertlab.errors import CheckpointError
from bertlab.presets import CHECKPOINT_KEYS
from bertlab.training.checks.keys import overridden_keys

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
    by bertlab.training.checks.combinations)."""
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
