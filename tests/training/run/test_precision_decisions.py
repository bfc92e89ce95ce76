"""bertlab.training.run.precision_decisions: the cache folder's order of places, a machine kind that names
what a step's speed depends on, a file that keeps the other decisions on a write and is replaced whole."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from bertlab.training.run import precision_decisions
from bertlab.training.run.precision_decisions import Decision

DECISION = Decision("bf16-mixed", "2026-12-05", {"32-true": 146.0, "bf16-mixed": 151.0}, "CPU x")


def test_the_cache_folder_is_bertlab_cache_dir_else_xdg_else_home(monkeypatch, tmp_path):
    monkeypatch.setenv("BERTLAB_CACHE_DIR", str(tmp_path / "own"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert precision_decisions.decisions_file() == tmp_path / "own" / "precision_decisions.json"
    monkeypatch.delenv("BERTLAB_CACHE_DIR")
    assert precision_decisions.cache_folder() == tmp_path / "xdg" / "bertlab"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert precision_decisions.cache_folder() == tmp_path / "home" / ".cache" / "bertlab"


def test_the_tests_never_write_to_the_users_cache():
    assert Path(precision_decisions.cache_folder()).resolve() != (Path.home() / ".cache" / "bertlab").resolve()


def test_a_cpus_kind_names_its_bf16_support_threads_and_torch(monkeypatch):
    capabilities = {"cpu_name": "Some EPYC", "avx512_bf16": True, "amx_tile": False, "architecture": "x86_64"}
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: capabilities)
    kind = precision_decisions.machine_kind(torch.device("cpu"))
    assert kind == (f"CPU Some EPYC, native bf16 yes, AMX no, {torch.get_num_threads()} threads, "
                    f"torch {torch.__version__}")
    capabilities["avx512_bf16"] = False
    assert precision_decisions.cpu_has_native_bf16() is False
    assert precision_decisions.machine_kind(torch.device("cpu")) != kind


def test_a_write_keeps_the_other_decisions_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "precision_decisions.json"
    precision_decisions.write(path, "a", DECISION)
    precision_decisions.write(path, "b", Decision("32-true", "2026-12-06", {"32-true": 9.0}, "CPU y"))
    assert precision_decisions.read(path) == {"a": DECISION, "b": Decision("32-true", "2026-12-06",
                                                                         {"32-true": 9.0}, "CPU y")}
    assert json.loads(path.read_text())["a"]["precision"] == "bf16-mixed"
    assert [file.name for file in tmp_path.iterdir()] == ["precision_decisions.json"]


def test_a_missing_file_holds_no_decisions(tmp_path):
    assert precision_decisions.read(tmp_path / "absent.json") == {}
