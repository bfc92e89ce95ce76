"""The storage of an Optuna study (bertlab.training.suites.optuna_study): the URL of an SQLite file whose folder it
makes, as Hydra's Optuna sweeper opens the study before the sweep folder exists (the study itself:
tests/training/suites/test_sweeps.py)."""

from __future__ import annotations

import sqlalchemy

from bertlab.training.suites.optuna_study import sqlite_storage


def test_the_storage_makes_the_files_folder_and_names_the_file_for_sqlalchemy(tmp_path):
    file = tmp_path / "sweep" / "2026-12-07" / "study.db"
    url = sqlite_storage(str(file))
    assert url == f"sqlite:///{file}"
    assert file.parent.is_dir() and not file.exists()  # the folder made; the file is the study's to create
    engine = sqlalchemy.create_engine(url)
    with engine.connect():
        pass
    engine.dispose()
    assert file.is_file()  # SQLite created it where the URL says


def test_a_relative_path_is_made_absolute_against_the_working_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert sqlite_storage("outputs/study.db") == f"sqlite:///{tmp_path / 'outputs' / 'study.db'}"
    assert (tmp_path / "outputs").is_dir()


def test_a_folder_that_exists_is_kept_with_what_it_holds(tmp_path):
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "study.db").write_bytes(b"earlier trials")
    assert sqlite_storage(str(tmp_path / "sweep" / "study.db")) == f"sqlite:///{tmp_path / 'sweep' / 'study.db'}"
    assert (tmp_path / "sweep" / "study.db").read_bytes() == b"earlier trials"
