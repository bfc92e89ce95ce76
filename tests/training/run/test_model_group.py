"""The model group (bertlab.training.run.model_group): its named sizes read from conf/model, and a composed group as
a BertConfig."""

from __future__ import annotations

import re

import pytest
from omegaconf import OmegaConf

from bertlab.errors import ConfigError
from bertlab.training.run.model_group import model_config, model_preset, preset_names


def test_model_preset_is_the_model_group_file():
    preset = model_preset("bert_mini")
    assert (preset["num_hidden_layers"], preset["hidden_size"], preset["num_attention_heads"],
            preset["intermediate_size"]) == (4, 256, 4, 1024)
    assert "init_from" not in preset
    with pytest.raises(ConfigError, match="^" + re.escape("model_preset(name='bert_huge'): must be one of "
                                                          f"{', '.join(preset_names())}") + "$"):
        model_preset("bert_huge")


def test_model_config_drops_init_from_and_takes_run_time_values():
    config = model_config(OmegaConf.create({"init_from": None, "hidden_size": 64, "num_attention_heads": 2}),
                          vocab_size=99, pad_token_id=3)
    assert (config.hidden_size, config.vocab_size, config.pad_token_id) == (64, 99, 3)
