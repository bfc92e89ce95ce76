"""The run folder (bertlab.training.run.run_folder): the checkpoint to resume, the task that saved a checkpoint, the
newest checkpoint, `latest`, and folders named as Hydra names a run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from bertlab.errors import CheckpointError
from bertlab.lit.run_artifacts import SAVED_BY
from bertlab.training.run import run_folder


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
