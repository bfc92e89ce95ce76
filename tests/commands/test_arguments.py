"""The options of the commands that take ordinary ones (bertlab.commands.arguments): errors as UsageError lines,
argparse types, an output that holds work refused unless --overwrite, and labelled-data options falling back to a
run's own."""

from __future__ import annotations

import argparse

import pytest

from bertlab.commands.arguments import (ArgumentParser, add_labelled_data_options, add_overwrite, check_output,
                                        checkpoint_folder, labelled_data_options, output_file, positive_int)
from bertlab.errors import ConfigError, UsageError


def test_a_parser_error_is_a_usage_error_naming_the_command():
    parser = ArgumentParser(prog="bertlab predict")
    parser.add_argument("--count", type=positive_int)
    with pytest.raises(UsageError, match=r"^bertlab predict: argument --count: expected a positive integer, got 0 "
                                         r"\(see bertlab predict --help\)$"):
        parser.parse_args(["--count", "0"])
    assert parser.parse_args(["--count", "3"]).count == 3
    with pytest.raises(argparse.ArgumentTypeError, match="got 'x'"):
        positive_int("x")


def test_a_run_folder_stands_for_its_export_and_other_paths_are_kept(tmp_path):
    assert checkpoint_folder(str(tmp_path)) == str(tmp_path)
    (tmp_path / "hf_model").mkdir()
    assert checkpoint_folder(str(tmp_path)) == str(tmp_path / "hf_model")


def test_an_output_file_needs_its_suffix_and_an_existing_folder(tmp_path):
    check = output_file(".csv", ".md")
    assert check(str(tmp_path / "scores.csv")) == tmp_path / "scores.csv"
    with pytest.raises(argparse.ArgumentTypeError, match="expected a .csv or .md file name"):
        check(str(tmp_path / "scores.txt"))
    with pytest.raises(argparse.ArgumentTypeError, match=f"its folder {tmp_path / 'missing'} does not exist"):
        check(str(tmp_path / "missing" / "scores.csv"))


def test_an_output_holding_work_is_refused_unless_overwritten(tmp_path):
    check_output("--output", tmp_path / "new", overwrite=False)  # nothing there yet
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match="--output .*model.*config.json.*--overwrite"):
        check_output("--output", tmp_path / "model", overwrite=False)
    check_output("--output", tmp_path / "model", overwrite=True)
    (tmp_path / "report.md").write_text("")
    with pytest.raises(ConfigError, match="report.md"):
        check_output("--output", tmp_path / "report.md", overwrite=False, writes=())
    check_output("--output", tmp_path, overwrite=False, writes=["scores.csv"])  # the folder holds none of them


def test_labelled_data_options_fall_back_to_the_runs_data_then_the_defaults():
    parser = argparse.ArgumentParser()
    add_labelled_data_options(parser, data_required=False)
    add_overwrite(parser)
    args = parser.parse_args(["--text-column", "text"])
    assert not args.overwrite
    options = labelled_data_options(args, {"validation_split": "test", "text_pair_column": "second"})
    assert options == {"split": "test", "text_column": "text", "text_pair_column": "second",
                       "label_column": "label", "max_seq_length": 128}
    assert labelled_data_options(args)["split"] == "validation"
