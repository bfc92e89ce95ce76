"""The fixture the tests of the shared training path share: Hydra's config composed as a command composes it."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from bertlab.training.launch.config_tree import register_configs


@pytest.fixture
def compose_config():
    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_module("bertlab.conf", version_base="1.3"):
        yield lambda name, *overrides: compose(name, overrides=list(overrides), return_hydra_config=True)
