"""Where datasets come from (bertlab.data.sources): text files, folders of split files in several formats, saved
`datasets` folders, and the one-line data errors of a source that is missing, empty or unreachable."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import datasets
import pytest

from bertlab.data.sources import load_dataset_source, require_columns
from bertlab.errors import DataError

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_text_source_keeps_empty_lines_and_skips_undecodable_ones(tmp_path, caplog):
    corpus = tmp_path / "train.txt"
    corpus.write_bytes(b"first line\n\nbad \xff\xfe bytes\nlast line\r\n")
    with caplog.at_level(logging.WARNING, logger="bertlab"):
        splits = load_dataset_source(str(corpus), cache_dir=tmp_path / "cache")
    assert splits["train"]["text"] == ["first line", "", "last line"]
    assert splits["train"].cache_files, "the lines are memory-mapped from the cache, not held in memory"
    assert "skipped 1 line(s)" in caplog.text and str(corpus) in caplog.text


def test_folder_of_split_files_in_several_formats(tmp_path):
    datasets.Dataset.from_dict({"sentence": ["a", "b"], "label": [0, 1]}).to_parquet(tmp_path / "train.parquet")
    (tmp_path / "dev.jsonl").write_text('{"sentence": "c", "label": 1}\n', encoding="utf-8")
    splits = load_dataset_source(str(tmp_path), cache_dir=tmp_path / "cache")
    assert set(splits) == {"train", "validation"}
    assert splits["train"]["sentence"] == ["a", "b"] and splits["validation"]["label"] == [1]
    saved = tmp_path / "saved"
    splits.save_to_disk(str(saved))
    assert load_dataset_source(str(saved))["validation"]["sentence"] == ["c"]


def test_bad_sources_raise_clear_data_errors(tmp_path):
    with pytest.raises(DataError, match="does not exist.*BERTLAB_DATA_DIR.*internet"):
        load_dataset_source(str(tmp_path / "missing" / "train.txt"))
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(DataError, match="empty.txt has no readable lines"):
        load_dataset_source(str(empty), cache_dir=tmp_path / "cache")
    (tmp_path / "notes.md").write_text("nothing to load", encoding="utf-8")
    with pytest.raises(DataError, match=r"no split files.*notes.md"):
        load_dataset_source(str(tmp_path))
    dataset = datasets.Dataset.from_dict({"sentence": ["a"]})
    with pytest.raises(DataError, match=r"no column\(s\) \['text'\]; available columns: \['sentence'\]"):
        require_columns(dataset, ["text"], "corpus.parquet")


def test_the_way_out_does_not_ask_for_a_data_folder_already_set(tmp_path, monkeypatch):
    monkeypatch.delenv("BERTLAB_DATA_DIR", raising=False)
    with pytest.raises(DataError, match="Either set BERTLAB_DATA_DIR"):
        load_dataset_source(str(tmp_path / "missing" / "train.txt"))
    monkeypatch.setenv("BERTLAB_DATA_DIR", str(tmp_path))
    with pytest.raises(DataError) as raised:
        load_dataset_source(str(tmp_path / "missing" / "train.txt"))
    assert f"BERTLAB_DATA_DIR={tmp_path} holds no local copy of it" in str(raised.value)
    assert "set BERTLAB_DATA_DIR" not in str(raised.value)


@pytest.mark.slow
def test_unreachable_hub_id_fails_fast_with_one_data_error(tmp_path):
    script = textwrap.dedent(
        """
        from bertlab.data.sources import load_dataset_source
        from bertlab.errors import DataError
        try:
            load_dataset_source("bertlab-test/no-such-dataset")
        except DataError as error:
            print("DataError:", error)
        """
    )
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_CACHE": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, env=environment, capture_output=True, text=True, timeout=60
    )
    assert result.stdout.startswith("DataError:"), result.stderr
    assert "bertlab-test/no-such-dataset" in result.stdout and "BERTLAB_DATA_DIR" in result.stdout
