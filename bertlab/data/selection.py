"""The selection split: rows held out of a task's training split to choose a run's checkpoint (and a suite's
learning rate) on, so that the validation split is reported, not chosen on (bertlab glue; docs/statistics.md).

The split takes `fraction` of the training rows, at most `max_rows`, drawn with its own seed: every
fine-tuning seed and learning rate of a task trains on the same rows and selects on the same held-out ones,
and a rerun draws them again identically. Classes keep their shares (stratified); regression labels are
stratified by their rank, in ten bins.
"""

from __future__ import annotations

import numpy as np

from bertlab.errors import ConfigError

REGRESSION_BINS = 10


def selection_size(rows: int, fraction: float, max_rows: int) -> int:
    """How many of `rows` training rows the selection split takes: `fraction` of them, at most `max_rows`,
    at least one, and never all."""
    if not 0 < fraction < 1:
        raise ConfigError(f"data.selection_fraction must be in (0, 1) (or 0: no selection split), got {fraction}")
    if max_rows < 1:
        raise ConfigError(f"data.selection_max_rows must be >= 1, got {max_rows}")
    if rows < 2:
        raise ConfigError(f"data.selection_fraction={fraction}: the training split has {rows} row(s); a selection "
                          f"split needs at least 2 to leave one for training")
    return min(max(1, round(fraction * rows)), max_rows, rows - 1)


def strata(labels: np.ndarray) -> np.ndarray:
    """Each row's stratum: its class, or for regression (float labels) its rank's tenth."""
    if labels.dtype.kind == "f":
        ranks = np.argsort(np.argsort(labels, kind="stable"), kind="stable")
        return ranks * REGRESSION_BINS // len(labels)
    return labels


def split_selection(labels: np.ndarray, fraction: float, max_rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(training rows, selection rows): disjoint, sorted row numbers covering every row once. Each stratum
    gives its share of the selection rows (largest remainders round), its rows drawn at random."""
    size = selection_size(len(labels), fraction, max_rows)
    groups = strata(labels)
    values, counts = np.unique(groups, return_counts=True)
    shares = counts * size / len(labels)
    taken = np.floor(shares).astype(int)
    for index in np.argsort(-(shares - taken), kind="stable")[:size - taken.sum()]:
        taken[index] += 1
    rng = np.random.default_rng(seed)
    chosen = [rng.choice(np.flatnonzero(groups == value), count, replace=False)
              for value, count in zip(values, taken)]
    selection = np.sort(np.concatenate(chosen))
    return np.setdiff1d(np.arange(len(labels)), selection), selection
