"""A run's metrics.csv read back: the best value in each metric's direction, the summary printed at
the end of a run (bertlab.metrics)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from bertlab.metrics import (metric_label, metrics_figure, plot_metrics, plot_panels, read_metrics, run_summary,
                             summarise_metrics)


def test_summary_picks_the_best_value_in_each_metrics_direction():
    frame = pd.DataFrame({"step": [9, 19, 29], "epoch": [0, 0, 0], "val/loss": [2.0, 1.0, 1.5],
                          "val/accuracy": [0.5, 0.4, 0.7], "train/loss": [3.0, None, 2.5]})
    summary = summarise_metrics(frame)
    assert summary["best"] == {"val/loss": {"value": 1.0, "step": 19}, "val/accuracy": {"value": 0.7, "step": 29}}
    assert summary["final"] == {"val/loss": 1.5, "val/accuracy": 0.7, "train/loss": 2.5}


def test_run_summary_names_the_best_value_of_the_monitored_metric(tmp_path: Path):
    (tmp_path / "metrics.csv").write_text(
        "epoch,step,train/loss,val/accuracy\n0,9,0.7,\n0,99,,0.80\n0,199,,0.84\n1,299,,0.82\n")
    lines = run_summary(tmp_path, 1.5, "val/accuracy", "max").splitlines()
    assert "val/accuracy: 0.8 (step 99) → 0.82 (step 299)" in lines
    assert lines[-1] == "best val/accuracy: 0.84 (step 199), the exported checkpoint"
    assert run_summary(tmp_path, 1.5, "val/accuracy", "min").splitlines()[-1].startswith("best val/accuracy: 0.8 ")
    assert "best" not in run_summary(tmp_path, 1.5)


def test_a_run_with_two_validation_sets_labels_each_and_plots_each_metric_of_both_in_one_panel(tmp_path: Path):
    (tmp_path / "metrics.csv").write_text(
        "epoch,step,train/loss,val/loss,val/perplexity,val_text/loss,val_text/perplexity\n"
        "0,9,4.0,,,,\n0,9,,3.6,36.6,7.0,1096.6\n0,19,3.5,,,,\n0,19,,3.4,30.0,7.7,2208.3\n")
    frame = read_metrics(tmp_path)
    assert plot_panels(frame) == [("loss", ["train/loss", "val/loss", "val_text/loss"]),
                                  ("perplexity", ["val/perplexity", "val_text/perplexity"])]
    assert metric_label("val/loss", frame) == "val/loss (held-out, built like training)"
    assert metric_label("val_text/loss", frame) == "val_text/loss (held-out plain text)"
    assert metric_label("train/loss", frame) == "train/loss"
    lines = run_summary(tmp_path, 1.0).splitlines()
    assert "val_text/perplexity (held-out plain text): 1097 (step 9) → 2208 (step 19)" in lines
    summary = summarise_metrics(frame)
    assert summary["best"]["val_text/loss"] == {"value": 7.0, "step": 9}
    assert summary["validation_sets"]["val"] == "held-out, built like training"
    plot_metrics(frame, tmp_path / "metrics.png")
    assert (tmp_path / "metrics.png").read_bytes().startswith(b"\x89PNG")
    colours = {}  # a set's curves keep one colour across the panels, so the legend of one panel reads for all
    for axes in metrics_figure(frame).axes:
        for line in axes.get_lines():
            if not line.get_label().startswith("_"):
                colours.setdefault(line.get_label().split("/")[0], set()).add(line.get_color())
    assert {name: len(found) for name, found in colours.items()} == {"train": 1, "val": 1, "val_text": 1}
    assert len({found.pop() for found in colours.values()}) == 3


def test_a_run_with_one_validation_set_keeps_its_names_and_panels():
    frame = pd.DataFrame({"step": [9, 19], "train/loss": [3.0, None], "val/loss": [None, 2.0],
                          "val/perplexity": [None, 7.4], "val/accuracy": [None, 0.3]})
    assert plot_panels(frame) == [("loss", ["train/loss", "val/loss"]), ("val/perplexity", ["val/perplexity"]),
                                  ("val/accuracy", ["val/accuracy"])]
    assert metric_label("val/loss", frame) == "val/loss"
    assert "validation_sets" not in summarise_metrics(frame)


def test_a_training_loss_and_its_parts_are_drawn_each_in_a_colour_of_its_own():
    frame = pd.DataFrame({"step": [9, 19, 29], "epoch": [0, 0, 0], "train/loss": [6.0, 5.0, 4.0],
                          "train/mlm_loss": [5.0, 4.5, 3.5], "train/relation_loss": [1.0, 0.5, 0.5],
                          "val/loss": [None, None, 4.2]})
    loss_panel = metrics_figure(frame).axes[0]
    colours = {line.get_label(): line.get_color() for line in loss_panel.get_lines()
               if not line.get_label().startswith("_")}
    assert colours["train/loss"] == "C0" and len(set(colours.values())) == 4


def test_a_selection_split_is_named_for_what_it_is_and_old_folders_read_alike(tmp_path):
    """Fine-tuning with a selection split logs it as val/… beside dev/… (the task's validation split): read
    back, metrics.json and the summary call it selection/…, and say what each split is."""
    frame = pd.DataFrame({"step": [9, 19], "val/accuracy": [0.7, 0.8], "dev/accuracy": [0.6, 0.65]})
    summary = summarise_metrics(frame)
    assert summary["best"] == {"selection/accuracy": {"value": 0.8, "step": 19},
                               "dev/accuracy": {"value": 0.65, "step": 19}}
    assert summary["validation_sets"] == {"selection": "training rows held out, the checkpoint chosen on them",
                                          "dev": "the task's validation split, reported"}
    frame.to_csv(tmp_path / "metrics.csv", index=False)
    lines = run_summary(tmp_path, 1.0, "val/accuracy", "max").splitlines()
    assert ("selection/accuracy (training rows held out, the checkpoint chosen on them): 0.7 (step 9) → 0.8 (step 19)"
            in lines)
    assert "dev/accuracy (the task's validation split, reported): 0.6 (step 9) → 0.65 (step 19)" in lines
    # Without a dev/ split, val/ is the only validation set and keeps its name.
    assert list(summarise_metrics(frame.drop(columns="dev/accuracy"))["best"]) == ["val/accuracy"]


def test_the_plain_text_measure_is_summarised_and_drawn_against_its_unigram_model(tmp_path: Path):
    rows = ["epoch,step,train/loss,val/loss,val/perplexity,text/loss,text/perplexity,text/unigram_perplexity,"
            "text/perplexity_ratio"]
    for step, (train, text) in enumerate([(9.0, 7.2), (7.0, 6.9), (6.0, 6.1), (5.5, 5.6)]):
        rows += [f"0,{100 * step + 99},{train},,,,,,",
                 f"0,{100 * step + 99},,{text - 0.3},{math.exp(text - 0.3)},{text},{math.exp(text)},1000.0,"
                 f"{math.exp(text) / 1000}"]
    (tmp_path / "metrics.csv").write_text("\n".join(rows) + "\n")
    frame = read_metrics(tmp_path)
    summary = summarise_metrics(frame)
    assert summary["final"]["text/perplexity_ratio"] == pytest.approx(math.exp(5.6) / 1000)
    assert summary["best"]["text/perplexity_ratio"] == {"value": pytest.approx(math.exp(5.6) / 1000), "step": 399}
    assert summary["final"]["text/unigram_perplexity"] == 1000.0
    lines = run_summary(tmp_path, 1.0).splitlines()  # the terminal's summary at the end of the run
    assert f"text/perplexity_ratio: {math.exp(7.2) / 1000:.4g} (step 99) → {math.exp(5.6) / 1000:.4g} (step 399)" in lines
    panels = dict(plot_panels(frame))
    assert panels["perplexity"] == ["val/perplexity", "text/perplexity"]
    assert panels["text/perplexity_ratio"] == ["text/perplexity_ratio"]
    assert not any("text/unigram_perplexity" in names for names in panels.values())  # a line, not a curve
    figure = metrics_figure(frame)
    levels = {axes.get_title(): [line.get_ydata()[0] for line in axes.get_lines()
                                 if line.get_label().startswith("unigram") or line.get_label().endswith("unigram_perplexity")]
              for axes in figure.axes}
    assert levels == {"loss": [], "perplexity": [1000.0], "text/perplexity_ratio": [1.0]}
    plot_metrics(frame, tmp_path / "metrics.png")
    assert (tmp_path / "metrics.png").read_bytes().startswith(b"\x89PNG")
