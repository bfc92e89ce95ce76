"""trainer=gpu_deterministic (docs/reproducibility.md): torch's deterministic algorithms, cuBLAS's fixed
workspace and no cuDNN benchmarking are set as the run starts (bertlab.training.run.fit.run_training), before the
data and the model exist, so before anything can run on a GPU. Checked on the CPU: a GPU run differs only in the
accelerator, which Lightning chooses after these switches."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from bertlab.data import pretraining
from bertlab.errors import DataError
from bertlab.training.launch.config_tree import register_configs
from bertlab.training.run.fit import set_torch_flags
from tests.bertlab_runs import pretraining as pretraining_argv, run_in_process

ON_CPU = ["trainer.accelerator=cpu", "trainer.precision=32-true"]  # the rest of trainer=gpu_deterministic as it is


def trainer_config(option: str) -> dict:
    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_module("bertlab.conf", version_base="1.3"):
        trainer = compose("train", overrides=["+recipe=mlm_base_gpu", f"trainer={option}"]).trainer
    return OmegaConf.to_container(trainer, resolve=False)


@pytest.fixture
def nondeterministic_process(monkeypatch):
    """The switches as a process that never asked for determinism has them; put back afterwards."""
    benchmark, deterministic = torch.backends.cudnn.benchmark, torch.are_deterministic_algorithms_enabled()
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    torch.backends.cudnn.benchmark = True
    torch.use_deterministic_algorithms(False)
    yield
    torch.backends.cudnn.benchmark = benchmark
    torch.use_deterministic_algorithms(deterministic)


def test_the_deterministic_option_is_the_gpu_one_with_determinism_and_without_benchmarking():
    gpu, deterministic = trainer_config("gpu"), trainer_config("gpu_deterministic")
    assert (gpu["deterministic"], deterministic["deterministic"], deterministic["benchmark"]) == (False, True, False)
    assert {key: value for key, value in deterministic.items() if key not in ("deterministic", "benchmark")} == \
        {key: value for key, value in gpu.items() if key not in ("deterministic", "benchmark")}


def test_warn_makes_the_deterministic_algorithms_warn_and_a_benchmark_asked_for_stays(nondeterministic_process):
    set_torch_flags("warn", True)
    assert torch.are_deterministic_algorithms_enabled() and torch.is_deterministic_algorithms_warn_only_enabled()
    assert torch.backends.cudnn.benchmark and os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"


def test_the_switches_are_set_before_the_data_and_the_model_are_built(nondeterministic_process, tiny_data_dir: Path,
                                                                      tmp_path: Path, monkeypatch, capsys):
    seen = {}

    def record_and_stop(self, *args, **kwargs):
        seen.update(deterministic=torch.are_deterministic_algorithms_enabled(),
                    warn_only=torch.is_deterministic_algorithms_warn_only_enabled(),
                    cublas=os.environ.get("CUBLAS_WORKSPACE_CONFIG"), benchmark=torch.backends.cudnn.benchmark,
                    cuda_started=torch.cuda.is_initialized())
        raise DataError("stopped where the data module is built")

    monkeypatch.setattr(pretraining.PretrainingDataModule, "__init__", record_and_stop)
    argv = pretraining_argv(tiny_data_dir, tmp_path / "cache", tmp_path / "run", "trainer=gpu_deterministic", *ON_CPU)
    outcome = run_in_process(argv, capsys)
    assert outcome.code == 1 and "stopped where the data module is built" in outcome.err
    assert seen == {"deterministic": True, "warn_only": False, "cublas": ":4096:8", "benchmark": False,
                    "cuda_started": False}


def test_the_fast_gpu_option_leaves_determinism_off(nondeterministic_process, tiny_data_dir: Path, tmp_path: Path,
                                                    monkeypatch, capsys):
    seen = {}

    def record_and_stop(self, *args, **kwargs):
        seen.update(deterministic=torch.are_deterministic_algorithms_enabled(),
                    cublas=os.environ.get("CUBLAS_WORKSPACE_CONFIG"))
        raise DataError("stopped where the data module is built")

    monkeypatch.setattr(pretraining.PretrainingDataModule, "__init__", record_and_stop)
    argv = pretraining_argv(tiny_data_dir, tmp_path / "cache", tmp_path / "run", "trainer=gpu", *ON_CPU)
    assert run_in_process(argv, capsys).code == 1
    assert seen == {"deterministic": False, "cublas": None}
