"""Every recipe composes under the command it names, resolves, and builds its objects' classes."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_module
from hydra.core.hydra_config import HydraConfig
from hydra.utils import get_class, get_method
from omegaconf import OmegaConf, open_dict

from bertlab import hydra_app, run
from bertlab.cli import recipe_names

PRIMARY = {"train": "train", "fine-tune": "fine_tune"}


def compose_recipe(name: str, command: str, tmp_path, overrides=()):
    hydra_app.register_resolvers()
    hydra_app.register_recipes()
    with initialize_config_module("bertlab.conf", version_base="1.3"):
        cfg = compose(PRIMARY[command], overrides=[f"+recipe={name}", *overrides], return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(tmp_path)
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]  # the ${hydra:…} resolver reads the instance set above
    return cfg


def command_of(name: str) -> str:
    return "train" if name.startswith("mlm") else "fine-tune"


@pytest.mark.parametrize("name", recipe_names())
def test_recipe_composes_and_resolves(name, tmp_path, monkeypatch):
    monkeypatch.setenv("BERTLAB_DATA_DIR", str(tmp_path / "data"))
    cfg = compose_recipe(name, command_of(name), tmp_path)
    assert cfg.command == command_of(name) and cfg.name == name
    resolved = OmegaConf.to_container(cfg, resolve=True)
    assert resolved["paths"]["run_dir"] == str(tmp_path)
    assert resolved["data"]["source"].startswith(str(tmp_path / "data"))
    for group in ("data", "task", "trainer"):
        get_class(cfg[group]._target_)
    get_class(cfg.optimizer._target_)
    get_method(cfg.scheduler._target_)
    run.model_config(cfg.model, vocab_size=100)


def test_recipe_names_its_command():
    assert {"mlm_tiny", "mlm_nsp_tiny", "mlm_base_gpu", "sst2", "sst2_minilm", "sst2_scratch"} <= set(recipe_names())


def test_overrides_reach_the_config(tmp_path):
    cfg = compose_recipe("mlm_tiny", "train", tmp_path,
                         ["model.num_hidden_layers=4", "trainer.max_steps=200", "seed=7"])
    assert (cfg.model.num_hidden_layers, cfg.trainer.max_steps, cfg.seed, cfg.data.seed) == (4, 200, 7, 7)


def test_hub_id_without_local_data(tmp_path, monkeypatch):
    monkeypatch.delenv("BERTLAB_DATA_DIR", raising=False)
    cfg = compose_recipe("sst2", "fine-tune", tmp_path)
    assert cfg.data.source == "stanfordnlp/sst2"
