"""Result tables (bertlab.tables): Markdown rows and tables as the reports have always written them, intervals, and
CSV files whose missing cells are empty, each written whole."""

from __future__ import annotations

import csv
import math

from bertlab.tables import interval, markdown_row, markdown_table, write_csv, write_markdown


def test_a_row_tells_an_empty_value_from_a_cell_that_does_not_apply():
    assert markdown_row(["a", 1.5, "", None]) == "| a | 1.5 |  | |"


def test_a_table_is_its_header_its_rule_and_one_line_a_row():
    assert markdown_table(["task", "score"], [["sst2", 81.6], ["rte", None]]) == [
        "| task | score |", "| --- | --- |", "| sst2 | 81.6 |", "| rte | |"]
    assert markdown_table(["a"], [], rule="---") == ["| a |", "|---|"]


def test_an_interval_is_rounded_or_missing_for_a_single_seed():
    assert interval(0.04, 1.96) == "[0.0, 2.0]"
    assert interval(-1.234, 5.0, digits=2) == "[-1.23, 5.00]"
    assert interval(math.nan, math.nan) == "–"


def test_files_are_written_whole_with_empty_cells_for_missing_keys(tmp_path):
    assert write_markdown(tmp_path / "deep" / "table.md", "| a |\n") == "| a |\n"
    assert (tmp_path / "deep" / "table.md").read_text() == "| a |\n"
    write_csv(tmp_path / "rows.csv", [{"task": "sst2", "score": 81.6}, {"task": "rte"}], columns=["task", "score"])
    with open(tmp_path / "rows.csv", newline="") as handle:
        assert list(csv.reader(handle)) == [["task", "score"], ["sst2", "81.6"], ["rte", ""]]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["deep", "rows.csv"]  # no temporary file left
