"""The `model` config group as a model: its BertConfig, and the checks a loaded checkpoint needs."""

from __future__ import annotations

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from bertlab.config import RUNTIME_SWITCHES, BertConfig
from bertlab.errors import CheckpointError
from bertlab.presets import CHECKPOINT_KEYS
from bertlab.training.preflight import overridden_keys

DROPOUT_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout")


def model_config(model_cfg: DictConfig, **values) -> BertConfig:
    """BertConfig from the `model` group (minus the keys of its checkpoint), plus values only known at run time."""
    fields = OmegaConf.to_container(model_cfg, resolve=True)
    for key in CHECKPOINT_KEYS:
        fields.pop(key, None)
    fields.update(values)
    return BertConfig.from_dict(fields)


def init_from_overrides(model_cfg: DictConfig) -> dict:
    """What the `model` group changes in a checkpoint loaded with `init_from`: the run-time switches,
    and the dropout probabilities the command line set. Its architecture keys come from the
    checkpoint (overriding one is refused by bertlab.training.preflight)."""
    overridden = overridden_keys(HydraConfig.get().overrides.task)
    chosen = [*RUNTIME_SWITCHES, *(key for key in DROPOUT_KEYS if f"model.{key}" in overridden)]
    return {key: model_cfg[key] for key in chosen if key in model_cfg}


def check_vocabulary(tokenizer, config: BertConfig, tokenizer_source: str) -> None:
    """A tokenizer whose ids do not index the model's embedding rows would train on garbage."""
    if tokenizer.get_vocab_size() != config.vocab_size:
        raise CheckpointError(
            f"tokenizer ({tokenizer_source}) has {tokenizer.get_vocab_size()} tokens but the model's "
            f"embeddings have {config.vocab_size} rows; use the checkpoint's own tokenizer")
