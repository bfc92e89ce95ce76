"""The `model` config group as a model: its BertConfig, and the checks a loaded checkpoint needs."""

from __future__ import annotations

from collections.abc import Collection

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from bertlab.checkpoint.dispatch import read_config
from bertlab.config import RUNTIME_SWITCHES, VARIANT_KEYS, BertConfig
from bertlab.errors import CheckpointError
from bertlab.presets import CHECKPOINT_KEYS
from bertlab.training.checks.values import overridden_keys

DROPOUT_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout")
# What the classifier reads: a masked-LM checkpoint carries no classifier, so fine-tuning builds it fresh and may
# choose it (BERT's pooler or ModernBERT's normed head; docs/variants.md).
CLASSIFIER_KEYS = ("classifier_pooling",)
# Keys of the model group that define the architecture: with `init_from` they come from the
# checkpoint's config.json, so an override of one of them cannot take effect.
ARCHITECTURE_KEYS = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size",
                     "position_embedding_type", "max_position_embeddings", "type_vocab_size", "hidden_act",
                     *(key for key in VARIANT_KEYS if key not in CLASSIFIER_KEYS))


def model_config(model_cfg: DictConfig, **values) -> BertConfig:
    """BertConfig from the `model` group (minus the keys of its checkpoint), plus values only known at run time."""
    fields = OmegaConf.to_container(model_cfg, resolve=True)
    for key in CHECKPOINT_KEYS:
        fields.pop(key, None)
    fields.update(values)
    return BertConfig.from_dict(fields)


def init_from_overrides(model_cfg: DictConfig, overridden: Collection[str] | None = None) -> dict:
    """What the `model` group changes in a checkpoint loaded with `init_from`: the run-time switches, and the
    dropout probabilities and classifier input the command line set (`overridden`: the keys it set, by default
    those of Hydra's running job). Its architecture keys come from the checkpoint (overriding one is refused
    by `init_from_keeps_architecture`)."""
    if overridden is None:
        overridden = overridden_keys(HydraConfig.get().overrides.task)
    chosen = [*RUNTIME_SWITCHES,
              *(key for key in (*DROPOUT_KEYS, *CLASSIFIER_KEYS) if f"model.{key}" in overridden)]
    return {key: model_cfg[key] for key in chosen if key in model_cfg}


def check_model(config: DictConfig) -> None:
    """The group's values make a model BertConfig accepts (the rules of its fields' annotations, divisibility,
    memory), before any data is prepared. With `init_from`, see `check_loaded_model`."""
    if not config.model.init_from:
        model_config(config.model, vocab_size=OmegaConf.select(config, "tokenizer.vocab_size", default=None) or 30522)


def check_loaded_model(config: DictConfig, overridden: Collection[str]) -> None:
    """With `init_from`, the checkpoint's config with the values the group changes in it, once the checkpoint
    is known to exist and fit."""
    if config.model.init_from:
        BertConfig.from_dict({**read_config(config.model.init_from).to_dict(),
                              **init_from_overrides(config.model, overridden)})


def init_from_keeps_architecture(config: DictConfig) -> str | None:
    """A model loaded with `init_from` keeps the architecture and vocabulary of its checkpoint: the command line
    cannot change them."""
    if not OmegaConf.select(config, "model.init_from"):
        return None
    conflicts = [key for key in overridden_keys(config.hydra.overrides.task)
                 if key == "model" or key == "tokenizer.vocab_size"
                 or (key.startswith("model.") and key.removeprefix("model.") in ARCHITECTURE_KEYS)]
    if conflicts:
        return (f"{conflicts[0]} cannot change a model loaded with model.init_from={config.model.init_from}: its "
                f"architecture and vocabulary come from that checkpoint's config.json; drop {conflicts[0]}, or set "
                f"model.init_from=null to train from scratch")
    return None


def check_vocabulary(tokenizer, config: BertConfig, tokenizer_source: str) -> None:
    """A tokenizer whose ids do not index the model's embedding rows would train on garbage."""
    if tokenizer.get_vocab_size() != config.vocab_size:
        raise CheckpointError(
            f"tokenizer ({tokenizer_source}) has {tokenizer.get_vocab_size()} tokens but the model's "
            f"embeddings have {config.vocab_size} rows; use the checkpoint's own tokenizer")
