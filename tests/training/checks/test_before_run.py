"""The rules between keys (bertlab.training.checks.before_run): a model loaded with `init_from` keeps its checkpoint's
architecture, and takes the dropout, run-time switches and classifier input the command line sets."""

from __future__ import annotations

import pytest

from bertlab.errors import ConfigError
from bertlab.training.checks import before_run
from bertlab.training.checks.before_run import check_combinations
from bertlab.training.checks.keys import overridden_keys
from bertlab.training.run import model_group


@pytest.mark.parametrize("override, key", [("model.num_hidden_layers=4", "model.num_hidden_layers"),
                                           ("model=bert_mini", "model"),
                                           ("model.position_embedding_type=relative_key", "model.position_embedding_type")])
def test_init_from_refuses_architecture_overrides_naming_both_keys(compose_config, override, key):
    config = compose_config("fine_tune", "model.init_from=/some/checkpoint", override)
    with pytest.raises(ConfigError, match=f"^{key} cannot change a model loaded with model.init_from=/some/checkpoint"):
        check_combinations(config, [before_run.init_from_keeps_architecture])


def test_init_from_takes_dropout_and_run_time_switches(compose_config):
    config = compose_config("fine_tune", "model.init_from=/some/checkpoint", "model.hidden_dropout_prob=0.3",
                            "model.gradient_checkpointing=true")
    check_combinations(config, [before_run.init_from_keeps_architecture])


def test_init_from_takes_the_classifier_input_the_command_line_chooses(compose_config):
    config = compose_config("fine_tune", "model.init_from=/some/checkpoint", "model.classifier_pooling=cls")
    overridden = overridden_keys(config.hydra.overrides.task)
    check_combinations(config, [before_run.init_from_keeps_architecture])
    assert model_group.init_from_overrides(config.model, overridden)["classifier_pooling"] == "cls"
    assert "classifier_pooling" not in model_group.init_from_overrides(
        compose_config("fine_tune", "model.init_from=/some/checkpoint").model, set())
