"""A run's metrics.csv (written by Lightning's CSVLogger): reading it, which direction of a metric is
best, and the files a person reads — metrics.json (final and best values) and metrics.png."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from bertlab.atomic_files import write_atomically


METRICS_CSV = "metrics.csv"
# The validation sets a run can log, by metric prefix, with what each measures. A pretraining run whose
# training sequences are built otherwise than plain text (copied pairs) logs val/ and val_text/; a fine-tuning
# run with a selection split logs it as val/ (what its checkpoint is chosen on) and the task's validation split
# as dev/, and is read with val/ named selection/ (`named_for_their_sets`); every other run logs val/ alone.
VALIDATION, TEXT_VALIDATION, SELECTION, DEV = "val", "val_text", "selection", "dev"
VALIDATION_SETS = {VALIDATION: "held-out, built like training", TEXT_VALIDATION: "held-out plain text",
                   SELECTION: "training rows held out, the checkpoint chosen on them",
                   DEV: "the task's validation split, reported"}
# Pretraining's measure of what it learned, the same for every run (bertlab.lit.pretraining; docs/pretraining_validation.md):
# the held-out plain text, 15% of its tokens all [MASK] at positions fixed by the text: `text/loss`, `text/perplexity`,
# `text/accuracy`, and against a unigram model of the training tokens, `text/unigram_perplexity` and
# `text/perplexity_ratio` (the model's perplexity over the unigram's, lower is better).
TEXT_MEASURE = "text"
TEXT_RATIO, TEXT_UNIGRAM = f"{TEXT_MEASURE}/perplexity_ratio", f"{TEXT_MEASURE}/unigram_perplexity"
VALIDATION_PREFIXES = tuple(f"{name}/" for name in [*VALIDATION_SETS, TEXT_MEASURE])
# A set keeps its colour in every panel.
SERIES_COLOURS = {"train": "C0", VALIDATION: "C1", TEXT_VALIDATION: "C2", SELECTION: "C1", DEV: "C2", TEXT_MEASURE: "C3"}
LOSS_PART_COLOURS = ("C4", "C5", "C6", "C7", "C8", "C9")  # a training loss's parts after the first (mlm, relation…)
# Metrics where lower is better; every other validation metric is best at its maximum.
_LOWER_IS_BETTER = ("loss", "perplexity", "mse", "mae")


def best_mode(name: str) -> str:
    """"min" for losses, perplexities and errors, "max" for every other metric."""
    return "min" if any(word in name for word in _LOWER_IS_BETTER) else "max"


def read_metrics(run_dir: Path) -> pd.DataFrame:
    """metrics.csv of `run_dir` (one row per logging call, NaN where a column was not logged);
    an empty frame when the run has none yet."""
    path = Path(run_dir) / METRICS_CSV
    if not path.is_file() or path.stat().st_size == 0:
        return pd.DataFrame(columns=["step"])
    return pd.read_csv(path)


def named_for_their_sets(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with a selection split's metrics named selection/… instead of the val/… they are logged as, where
    the run also logs the task's validation split (dev/…); at read time, so that older run folders read alike."""
    if not any(str(name).startswith(f"{DEV}/") for name in frame.columns):
        return frame
    prefix = f"{VALIDATION}/"
    return frame.rename(columns=lambda name: f"{SELECTION}/{name[len(prefix):]}" if name.startswith(prefix) else name)


def series(frame: pd.DataFrame, name: str) -> pd.Series:
    """The logged values of `name`, indexed by step."""
    return frame.set_index("step")[name].dropna()


def best_point(values: pd.Series, mode: str | None = None, name: str = "") -> tuple[int, float]:
    """(step, value) of the best entry of `values`; `mode` "min"/"max", by default `best_mode(name)`."""
    step = values.idxmin() if (mode or best_mode(name)) == "min" else values.idxmax()
    return int(step), float(values[step])


def metric_names(frame: pd.DataFrame) -> list[str]:
    return [name for name in frame.columns if name not in ("step", "epoch") and not frame[name].dropna().empty]


def final_values(frame: pd.DataFrame, prefix: str | tuple[str, ...] = "") -> dict[str, float]:
    """The last logged value of every metric whose name starts with `prefix` (or one of them)."""
    return {name: float(series(frame, name).iloc[-1]) for name in metric_names(frame) if name.startswith(prefix)}


def summarise_metrics(frame: pd.DataFrame) -> dict[str, Any]:
    """Last value of every metric, and the best value and its step for each validation metric, each split
    named for what it is (`named_for_their_sets`)."""
    frame = named_for_their_sets(frame)
    summary: dict[str, Any] = {"step": int(frame["step"].max()), "final": final_values(frame), "best": {}}
    for name in metric_names(frame):
        if name.startswith(VALIDATION_PREFIXES):
            step, value = best_point(series(frame, name), name=name)
            summary["best"][name] = {"value": value, "step": step}
    if len(sets := logged_sets(frame)) > 1:
        summary["validation_sets"] = sets
    return summary


def logged_sets(frame: pd.DataFrame) -> dict[str, str]:
    """The validation sets `frame` logs, with what each measures."""
    return {name: meaning for name, meaning in VALIDATION_SETS.items()
            if any(str(column).startswith(f"{name}/") for column in frame.columns)}


def metric_label(name: str, frame: pd.DataFrame) -> str:
    """`name`, and what its validation set measures when the run logs more than one."""
    sets = logged_sets(frame)
    prefix = name.split("/")[0]
    return f"{name} ({sets[prefix]})" if prefix in sets and len(sets) > 1 else name


def plot_panels(frame: pd.DataFrame) -> list[tuple[str, list[str]]]:
    """(title, metrics) of each panel of metrics.png: one for the losses (training and validation), one per
    other validation metric, which holds it for every validation set (val/perplexity beside val_text/perplexity)."""
    losses = [name for name in frame.columns if name.endswith("loss")]
    others: dict[str, list[str]] = {}
    for name in frame.columns:
        # The unigram's constant perplexity is a line in the perplexity panel (`metrics_figure`).
        if name.startswith(VALIDATION_PREFIXES) and name not in losses and name != TEXT_UNIGRAM:
            others.setdefault(name.split("/", 1)[1], []).append(name)
    return ([("loss", losses)] if losses else []) + [(names[0] if len(names) == 1 else metric, names)
                                                      for metric, names in others.items()]


def plot_metrics(frame: pd.DataFrame, path: Path) -> None:
    figure = metrics_figure(frame)
    write_atomically(path, lambda temp: figure.savefig(temp, format="png", dpi=100))


def metrics_figure(frame: pd.DataFrame) -> Figure:
    """metrics.png: the `plot_panels`, each validation curve labelled with what its set measures (`metric_label`),
    the plain text's dashed, a training loss's parts (a distillation's mlm_loss and relation_loss) each in a colour
    of its own."""
    panels = plot_panels(frame)
    columns = min(3, len(panels))
    rows = math.ceil(len(panels) / columns)
    figure = Figure(figsize=(5 * columns, 3.5 * rows), layout="constrained")
    FigureCanvasAgg(figure)
    for index, (title, names) in enumerate(panels):
        axes = figure.add_subplot(rows, columns, index + 1)
        training_colours = iter((SERIES_COLOURS["train"], *LOSS_PART_COLOURS))
        for name in names:
            values = series(frame, name)
            if name.startswith(VALIDATION_PREFIXES):
                text = name.startswith(f"{TEXT_VALIDATION}/")  # dashed in every panel
                axes.plot(values.index, values.values, marker="o", markersize=3, linestyle="--" if text else "-",
                          color=SERIES_COLOURS.get(name.split("/")[0]), label=metric_label(name, frame))
            else:
                line, = axes.plot(values.index, values.values, alpha=0.3, linewidth=0.8,
                                  color=next(training_colours, None))
                smoothed = values.rolling(max(1, len(values) // 50), min_periods=1).mean()
                axes.plot(smoothed.index, smoothed.values, color=line.get_color(), label=name)
        unigram = _unigram_level(frame, names)
        if unigram is not None:
            axes.axhline(unigram[0], color=SERIES_COLOURS[TEXT_MEASURE], linestyle=":", linewidth=1.5,
                         label=unigram[1])
        axes.set_title(title)
        if "perplexity" in title:
            axes.set_yscale("log")  # it falls by orders of magnitude early in pretraining
        axes.set_xlabel("step")
        axes.grid(alpha=0.3)
        if len(names) > 1 or unigram is not None:
            axes.legend(fontsize="small")
    return figure


def _unigram_level(frame: pd.DataFrame, names: list[str]) -> tuple[float, str] | None:
    """(level, label) of the unigram model's horizontal line in a panel of `text/` perplexities or of their
    ratio; None in other panels."""
    if TEXT_RATIO in names:
        return 1.0, "unigram model (ratio 1)"
    if f"{TEXT_MEASURE}/perplexity" in names and TEXT_UNIGRAM in frame:
        return float(series(frame, TEXT_UNIGRAM).iloc[-1]), TEXT_UNIGRAM
    return None


def run_summary(run_dir: Path, minutes: float, monitor: str | None = None, mode: str | None = None) -> str:
    """A few lines for the terminal: first → last value of each validation metric, wall time, and
    the best value of `monitor` (the checkpoint a fine-tuning run exports)."""
    lines = [f"Run folder: {run_dir}", f"Wall time: {minutes:.1f} min"]
    frame = read_metrics(run_dir)
    named = named_for_their_sets(frame)
    for name in sorted(metric_names(named)):
        if name.startswith(VALIDATION_PREFIXES) or name.endswith("tokens_per_sec"):
            values = series(named, name)
            lines.append(f"{metric_label(name, named)}: {values.iloc[0]:.4g} (step {values.index[0]}) → "
                         f"{values.iloc[-1]:.4g} (step {values.index[-1]})")
    if monitor in metric_names(frame):
        step, value = best_point(series(frame, monitor), mode, monitor)
        lines.append(f"best {monitor}: {value:.4g} (step {step}), the exported checkpoint")
    return "\n".join(lines)
