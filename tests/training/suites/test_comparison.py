"""The rows of `bertlab compare` (bertlab.training.suites.comparison): the config keys that differ (bookkeeping keys
left out), cells as tables show them, labels that say which experiment a timestamped folder was, averages over
different tasks left out, and runs of different commands refused."""

from __future__ import annotations

import math

import pytest

from bertlab.errors import DataError
from bertlab.training.suites.comparison import (cell_text, check_one_kind, differing_keys, drop_partial_averages,
                                                 label)


def test_the_keys_that_differ_leave_out_bookkeeping_and_folders_without_a_config():
    configs = [{"optimizer.lr": 1e-3, "seed": 0, "paths.output_dir": "a", "model.layers": [1, 2]},
               {"optimizer.lr": 2e-3, "seed": 0, "paths.output_dir": "b", "model.layers": [1, 2], "extra": 1},
               {}]
    assert differing_keys(configs) == ["extra", "optimizer.lr"]
    assert differing_keys(configs, everywhere=True) == ["optimizer.lr"]


def test_cells_round_floats_to_four_digits_and_show_null_as_empty():
    assert [cell_text(0.123456), cell_text(1234567.0), cell_text(math.inf), cell_text(None), cell_text(3)] == [
        "0.1235", "1.235e+06", "inf", "", "3"]


def test_a_timestamped_folder_is_labelled_with_its_run_name(tmp_path):
    run = tmp_path / "mlm_tiny" / "2026-12-07_10-00-00"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("command: train\n")
    assert label(run) == "mlm_tiny/2026-12-07_10-00-00"
    suite = tmp_path / "glue" / "wiki"
    suite.mkdir(parents=True)
    (suite / "glue.csv").write_text("task\n")
    assert label(suite) == "glue/wiki"


def test_the_average_of_a_suite_missing_a_task_is_left_out_and_said_so():
    rows = [{"GLUE cola": 9.0, "GLUE rte": 50.0, "GLUE average": 29.5}, {"GLUE cola": 8.0, "GLUE average": 8.0}]
    notes = drop_partial_averages(rows, ["full", "partial"])
    assert rows == [{"GLUE cola": 9.0, "GLUE rte": 50.0, "GLUE average": 29.5}, {"GLUE cola": 8.0}]
    assert notes == ["partial: GLUE average left out, the suite has no rte"]


def test_runs_of_different_commands_are_refused_naming_each_kind(tmp_path):
    folders = [tmp_path / "a", tmp_path / "b"]
    configs = [{"command": "train"}, {"command": "fine-tune"}]
    with pytest.raises(DataError, match=r"^compare: runs of different kinds \(a is a `train` run, b is a `fine-tune` "
                                        r"run\); their metrics do not compare: give runs of one kind$"):
        check_one_kind(folders, ["a", "b"], configs)
    check_one_kind(folders, ["a", "b"], [{"command": "train"}, {"command": "train"}])
