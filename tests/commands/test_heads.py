"""`python -m bertlab heads`: the command writes its CSVs, PNG and pruned export, and refuses an unknown metric
in one line (importance and the pruning curve: tests/interpret/test_head_importance.py)."""

from __future__ import annotations

import csv
import json

import pytest

from bertlab.inference import load_classifier, load_labelled_split, split_metrics
from tests.bertlab_runs import run_in_process


def test_the_command_writes_importance_curve_plot_and_a_pruned_export(classifier_dir, tiny_data_dir, tmp_path, capsys):
    output, export = tmp_path / "heads", tmp_path / "pruned"
    outcome = run_in_process(["heads", str(classifier_dir), "--data", str(tiny_data_dir / "sst2"), "--step", "2",
                              "--max-drop", "5", "--output", str(output), "--export", str(export)], capsys)
    assert outcome.code == 0, outcome.err
    with (output / "head_importance.csv").open() as handle:
        importance = list(csv.DictReader(handle))
    with (output / "pruning_curve.csv").open() as handle:
        curve = list(csv.DictReader(handle))
    assert len(importance) == 8 and sorted(int(row["prune_rank"]) for row in importance) == list(range(8))
    assert [int(row["heads_pruned"]) for row in curve] == [0, 2, 4, 6, 8]
    summary = json.loads((output / "heads.json").read_text())
    full = float(curve[0]["accuracy"])
    allowed = [int(row["heads_pruned"]) for row in curve if (full - float(row["accuracy"])) * 100 < 5]
    assert summary["prunable_heads"] == max(allowed)
    assert (output / "heads.png").read_bytes().startswith(b"\x89PNG") and (output / "heads.png").stat().st_size > 10000
    pruned = load_classifier(str(export))
    assert sum(len(heads) for heads in pruned.config.pruned_heads.values()) == summary["prunable_heads"]
    data = load_labelled_split(str(export), pruned, str(tiny_data_dir / "sst2"))
    assert split_metrics(pruned, data)["accuracy"] == pytest.approx(summary["export_metric"], abs=1e-6)
    assert summary["export_metric"] == pytest.approx(summary["pruned_metric"], abs=1e-5)


def test_pruning_by_loss_keeps_the_loss_within_the_budget(classifier_dir, tiny_data_dir, tmp_path, capsys):
    output, export = tmp_path / "heads", tmp_path / "pruned"
    outcome = run_in_process(["heads", str(classifier_dir), "--data", str(tiny_data_dir / "sst2"), "--metric", "loss",
                              "--max-drop", "0.01", "--output", str(output), "--export", str(export)], capsys)
    assert outcome.code == 0, outcome.err
    with (output / "pruning_curve.csv").open() as handle:
        curve = [{key: float(value) for key, value in row.items()} for row in csv.DictReader(handle)]
    full = curve[0]["loss"]
    allowed = [int(row["heads_pruned"]) for row in curve if (row["loss"] - full) * 100 < 0.01]
    summary = json.loads((output / "heads.json").read_text())
    assert summary["prunable_heads"] == max(allowed)
    assert (summary["export_metric"] - full) * 100 < 0.01


def test_an_unknown_metric_is_one_line(classifier_dir, tiny_data_dir, tmp_path, capsys):
    outcome = run_in_process(["heads", str(classifier_dir), "--data", str(tiny_data_dir / "sst2"),
                              "--metric", "bleu", "--output", str(tmp_path / "heads")], capsys)
    assert outcome.code == 2
    assert not (tmp_path / "heads").exists()
    assert outcome.error_lines == ["bertlab: error: bertlab heads: --metric bleu: expected one of loss, accuracy, "
                                   "f1, mcc"]
