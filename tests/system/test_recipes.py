"""Every recipe composes under the command it names, resolves, and every `_target_` in it (Hydra's
callbacks included) names an importable class or function."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_module
from hydra.core.hydra_config import HydraConfig
from hydra.utils import get_object
from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict

from bertlab.errors import ConfigError
from bertlab.recipe_files import recipe_names
from bertlab.training.checks.keys import ConfigKeys
from bertlab.training.launch.config_tree import register_configs
from bertlab.training.run.model_group import model_config

PRIMARY = {"train": "train", "fine-tune": "fine_tune"}


def compose_recipe(name: str, command: str, tmp_path, overrides=(), keep_hydra: bool = False):
    register_configs()
    with initialize_config_module("bertlab.conf", version_base="1.3"):
        cfg = compose(PRIMARY[command], overrides=[f"+recipe={name}", *overrides], return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(tmp_path)
    HydraConfig.instance().set_config(cfg)
    if not keep_hydra:
        with open_dict(cfg):
            del cfg["hydra"]  # the ${hydra:…} resolver reads the instance set above
    return cfg


def targets(node) -> list[str]:
    """Every `_target_` string below `node`."""
    if isinstance(node, (DictConfig, ListConfig)) and node._is_none():
        return []
    if isinstance(node, DictConfig):
        found = [node._target_] if isinstance(node.get("_target_"), str) else []
        return found + [target for key in node for target in targets(node._get_node(key))]
    if isinstance(node, ListConfig):
        return [target for index in range(len(node)) for target in targets(node._get_node(index))]
    return []


def command_of(name: str) -> str:
    return "train" if name.startswith(("mlm", "embed_distill")) else "fine-tune"


@pytest.mark.parametrize("name", recipe_names())
def test_recipe_composes_and_resolves(name, tmp_path, monkeypatch):
    monkeypatch.setenv("BERTLAB_DATA_DIR", str(tmp_path / "data"))
    for local_copy in ("corpus", "corpus_large", "sst2", "glue/mrpc", "conll2003", "squad"):
        (tmp_path / "data" / local_copy).mkdir(parents=True, exist_ok=True)
    cfg = compose_recipe(name, command_of(name), tmp_path)
    assert cfg.command == command_of(name) and cfg.name == name
    resolved = OmegaConf.to_container(cfg, resolve=True)
    assert resolved["paths"]["run_dir"] == str(tmp_path)
    assert resolved["data"]["source"].startswith(str(tmp_path / "data"))
    model_config(cfg.model, vocab_size=100)


@pytest.mark.parametrize("name", recipe_names())
def test_every_target_of_a_recipe_resolves(name, tmp_path, monkeypatch):
    monkeypatch.setenv("BERTLAB_DATA_DIR", str(tmp_path / "data"))
    cfg = compose_recipe(name, command_of(name), tmp_path, keep_hydra=True)
    found = targets(cfg)
    assert {"bertlab.training.suites.hydra_callbacks.SweepSummary", "lightning.pytorch.Trainer"} <= set(found)
    for target in found:
        get_object(target)


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


CHECKPOINT_KEYS = ("model.init_from", "task.teacher", "data.transfer.masked_lm", "data.tokenizer")


def made_by(command: str, output_dir: str) -> str:
    """The folder a `requires` command makes: `<recipe>/latest` under the outputs, or its --output."""
    words = command.split()
    recipe = next((word.removeprefix("+recipe=") for word in words if word.startswith("+recipe=")), None)
    if recipe:
        return f"{output_dir}/{recipe}/latest"
    if "--output" in words:
        return f"{output_dir}/{words[words.index('--output') + 1].removeprefix('outputs/')}"
    sweep_dir = next(word for word in words if word.startswith("hydra.sweep.dir="))
    return f"{output_dir}/{sweep_dir.partition('=')[2].removeprefix('outputs/')}"


@pytest.mark.parametrize("name", recipe_names())
def test_every_folder_a_recipe_reads_is_required_with_the_command_that_makes_it(name, tmp_path, monkeypatch):
    monkeypatch.setenv("BERTLAB_DATA_DIR", str(tmp_path / "data"))
    output_dir = str(tmp_path / "outputs")
    cfg = compose_recipe(name, command_of(name), tmp_path, [f"paths.output_dir={output_dir}"])
    folders = {key: OmegaConf.select(cfg, key, default=None) for key in CHECKPOINT_KEYS}
    made_here = {key: folder for key, folder in folders.items()  # data.tokenizer is often model.init_from's
                 if isinstance(folder, str) and folder.startswith(output_dir)
                 and (key == "model.init_from" or folder != folders["model.init_from"])}
    required = {key: command for key, command in cfg.requires.items() if command is not None}
    assert set(required) == set(made_here), (name, required)
    for key, command in required.items():
        assert command.startswith("python -m bertlab ")
        assert made_here[key].startswith(made_by(command, output_dir)), (name, key, command)


GROUP_OPTIONS = {"train": ["task=mlm_nsp", "task=embedding_distill data=sentences", "task=general_distill", "trainer=ddp",
                           "trainer=fsdp", "trainer=gpu", "trainer=gpu_deterministic", "scheduler=cosine", "logger=tensorboard", "logger=mlflow",
                           "logger=wandb", "model=bert_base"],
                 "fine-tune": ["task=distill", "+glue=cola", "+glue=stsb", "+glue=mnli_mm", "callbacks=default",
                               "scheduler=cosine", "trainer=gpu"]}


@pytest.mark.parametrize("name", recipe_names())
def test_every_key_of_a_recipe_is_read_by_bertlab(name, tmp_path, monkeypatch):
    monkeypatch.setenv("BERTLAB_DATA_DIR", str(tmp_path / "data"))
    cfg = compose_recipe(name, command_of(name), tmp_path, keep_hydra=True)
    ConfigKeys.walk(cfg).check_known()


@pytest.mark.parametrize("command, option", [(command, option) for command, options in GROUP_OPTIONS.items()
                                             for option in options])
def test_every_key_of_a_shipped_config_group_is_read_by_bertlab(command, option):
    """Each group's options on the command's own config (a recipe's keys belong to its own groups)."""
    register_configs()
    with initialize_config_module("bertlab.conf", version_base="1.3"):
        cfg = compose(PRIMARY[command], overrides=option.split(), return_hydra_config=True)
    ConfigKeys.walk(cfg).check_known()


@pytest.mark.parametrize("override, expected", [
    ("+max_epochs=3", "unknown config key 'max_epochs': nothing in bertlab reads it; did you mean trainer.max_epochs?"),
    ("++max_epochs=3", "unknown config key 'max_epochs': nothing in bertlab reads it; did you mean trainer.max_epochs?"),
    ("+trainer.max_epoch=3", "unknown config key 'trainer.max_epoch': nothing in bertlab reads it; did you mean "
                             "trainer.max_epochs?"),
    ("+optimizer.betaz=[0.9,0.9]", "unknown config key 'optimizer.betaz'"),
    ("+callbacks.checkpoint.every=3", "unknown config key 'callbacks.checkpoint.every'"),
    ("+paths.scratch=/tmp", "unknown config key 'paths.scratch'"),
    ("+data.colour=red", "unknown config key 'data.colour'"),
])
def test_a_key_nothing_reads_is_refused(override, expected, tmp_path):
    cfg = compose_recipe("mlm_tiny", "train", tmp_path, [override], keep_hydra=True)
    with pytest.raises(ConfigError) as error:
        ConfigKeys.walk(cfg).check_known()
    assert str(error.value).startswith(expected)


def test_a_key_nothing_reads_is_refused_where_a_task_passes_its_base_modules_arguments_on(tmp_path):
    """GeneralDistillationModule takes PretrainingModule's arguments as **kwargs: both sets are still checked."""
    cfg = compose_recipe("mlm_tiny_distill", "train", tmp_path, ["+task.relation_weigth=2"], keep_hydra=True)
    with pytest.raises(ConfigError) as error:
        ConfigKeys.walk(cfg).check_known()
    assert str(error.value).startswith("unknown config key 'task.relation_weigth': nothing in bertlab reads it; "
                                       "did you mean task.relation_weight?")
    ConfigKeys.walk(compose_recipe("mlm_tiny_distill", "train", tmp_path, ["task.mlm_probability=0.3"],
                                   keep_hydra=True)).check_known()
