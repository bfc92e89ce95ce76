"""Unit tests of the shared training path (bertlab.training): the command line handed to Hydra, the
checks before a run, the run folder, and the model group."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from bertlab.errors import CheckpointError, ConfigError, UsageError
from bertlab.lit.run_artifacts import SAVED_BY
from bertlab.training.checks import before_run
from bertlab.training.checks.before_run import check_combinations
from bertlab.training.checks.keys import overridden_keys
from bertlab.training.launch.app import flags_first
from bertlab.training.launch.config_tree import register_configs
from bertlab.training.run import model_group, run_folder
from bertlab.training.run.model_group import model_config, model_preset, preset_names


@pytest.fixture
def compose_config():
    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_module("bertlab.conf", version_base="1.3"):
        yield lambda name, *overrides: compose(name, overrides=list(overrides), return_hydra_config=True)


def test_flags_go_before_the_overrides_with_their_values():
    assert flags_first(["+recipe=sst2", "-m", "seed=1,2"]) == ["-m", "+recipe=sst2", "seed=1,2"]
    assert flags_first(["a=1", "--cfg", "job", "b=2"]) == ["--cfg", "job", "a=1", "b=2"]
    with pytest.raises(UsageError, match="command line: unknown flag --frobnicate"):
        flags_first(["a=1", "--frobnicate"])
    with pytest.raises(UsageError, match=r"--cfg needs a value \(job, hydra, all\)"):
        flags_first(["--cfg", "a=1"])


def test_model_preset_is_the_model_group_file():
    preset = model_preset("bert_mini")
    assert (preset["num_hidden_layers"], preset["hidden_size"], preset["num_attention_heads"],
            preset["intermediate_size"]) == (4, 256, 4, 1024)
    assert "init_from" not in preset
    with pytest.raises(ConfigError, match="^" + re.escape("model_preset(name='bert_huge'): must be one of "
                                                          f"{', '.join(preset_names())}") + "$"):
        model_preset("bert_huge")


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


def save_checkpoint(path: Path, step: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"global_step": step, "hyper_parameters": {"mlm_probability": 0.15}}, path)
    return path


def test_resume_path_finds_the_checkpoint_to_start_from(tmp_path):
    assert run_folder.resume_path(None, tmp_path) is None
    assert run_folder.resume_path("auto", tmp_path) is None
    last = save_checkpoint(tmp_path / "run" / "lightning_checkpoints" / "last.ckpt", 20)
    assert run_folder.resume_path(str(tmp_path / "run"), tmp_path) == str(last)
    assert run_folder.resume_path(str(last), tmp_path) == str(last)
    with pytest.raises(CheckpointError, match=f"resume='{tmp_path}/none.ckpt': no checkpoint at {tmp_path}/none.ckpt"):
        run_folder.resume_path(str(tmp_path / "none.ckpt"), tmp_path)
    assert run_folder.checkpoint_hyperparameters(last) == {"mlm_probability": 0.15}


def test_the_task_of_a_checkpoint_is_the_one_it_recorded_or_told_by_its_hyperparameters(tmp_path):
    torch.save({"global_step": 1, "hyper_parameters": {"mlm_probability": 0.15}, SAVED_BY: "DistillationModule"},
               tmp_path / "recorded.ckpt")
    assert run_folder.checkpoint_task(tmp_path / "recorded.ckpt") == "DistillationModule"
    for hyperparameters, task in (({"mlm_probability": 0.15}, "PretrainingModule"), ({"alpha": 0.9}, "DistillationModule"),
                                  ({"teacher": "t"}, "EmbeddingDistillationModule"), ({}, "ClassificationModule")):
        torch.save({"global_step": 1, "hyper_parameters": hyperparameters}, tmp_path / "older.ckpt")
        assert run_folder.checkpoint_task(tmp_path / "older.ckpt") == task


def test_the_newest_checkpoint_is_the_highest_step_and_last_on_a_tie(tmp_path):
    save_checkpoint(tmp_path / "step=10.ckpt", 10)
    save_checkpoint(tmp_path / "step=30.ckpt", 30)
    save_checkpoint(tmp_path / "last.ckpt", 20)
    assert run_folder.newest_checkpoint(tmp_path) == tmp_path / "step=30.ckpt"
    save_checkpoint(tmp_path / "last.ckpt", 30)
    assert run_folder.newest_checkpoint(tmp_path) == tmp_path / "last.ckpt"
    assert run_folder.resume_path("auto", tmp_path.parent / tmp_path.name) is None  # no lightning_checkpoints/


def test_latest_points_at_the_newest_run(tmp_path):
    for name in ("2026-01-01", "2026-01-02"):
        (tmp_path / name).mkdir()
        link = run_folder.point_latest(tmp_path / name)
    assert link == tmp_path / "latest" and os.readlink(link) == "2026-01-02" and link.resolve() == tmp_path / "2026-01-02"


def test_commands_outside_hydra_name_their_folders_as_hydra_names_a_run(compose_config, tmp_path, monkeypatch):
    monkeypatch.setenv("BERTLAB_OUTPUT_DIR", str(tmp_path))
    hydra_run = Path(compose_config("train", "+recipe=mlm_tiny").hydra.run.dir)
    folder = run_folder.timestamped_folder("compare")
    assert folder.parent == tmp_path / "compare"
    assert run_folder.TIMESTAMP.fullmatch(folder.name) and run_folder.TIMESTAMP.fullmatch(hydra_run.name)


def test_model_config_drops_init_from_and_takes_run_time_values():
    config = model_config(OmegaConf.create({"init_from": None, "hidden_size": 64, "num_attention_heads": 2}),
                          vocab_size=99, pad_token_id=3)
    assert (config.hidden_size, config.vocab_size, config.pad_token_id) == (64, 99, 3)
