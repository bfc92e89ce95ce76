"""The selection split: rows held out of a task's training split to choose a run's checkpoint (and a suite's
learning rate) on, so that the validation split is reported, not chosen on (bertlab glue; docs/statistics.md).

The split takes `fraction` of the training rows, at most `max_rows`, drawn with its own seed: every
fine-tuning seed and learning rate of a task trains on the same rows and selects on the same held-out ones,
and a rerun draws them again identically. Classes keep their shares (stratified); regression labels are
stratified by their rank, in ten bins.

It is disjoint from training in content, not only in row numbers: SST-2's rows are phrases cut from the
same sentences, so a held-out phrase is often inside a training one. Texts are compared after BERT's uncased
normalisation and basic tokenisation (`normalised`, the same for every model, so that models with other
tokenizers select on the same rows): a text is inside another where its words and punctuation marks stand
in it consecutively. Rows sharing a text (exact duplicates; for pair tasks a shared sentence) form one unit
that goes to one side whole. Only units none of whose texts is inside another unit's are drawn (for SST-2 the
longest phrases, whole sentences mostly, like its validation split), and the training split leaves out every
row with a text inside a drawn one: no selection text is inside a training text, nor the reverse.
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import numpy as np

from bertlab.argument_checks import Count, checks_arguments
from bertlab.errors import ConfigError
from bertlab.value_rules import Interval

REGRESSION_BINS = 10


def leaves_training_rows(arguments: Mapping[str, Any]) -> str | None:
    """A selection split of the training rows, which takes at least one, leaves at least one for training."""
    if (rows := arguments["rows"]) < 2:
        return (f"data.selection_fraction={arguments['fraction']}: the training split has {rows} row(s); a selection "
                f"split needs at least 2 to leave one for training")
    return None


@checks_arguments(between=(leaves_training_rows,))
def selection_size(rows: int, fraction: Annotated[float, Interval("(0, 1)")], max_rows: Count) -> int:
    """How many of `rows` training rows the selection split takes: `fraction` of them, at most `max_rows`,
    at least one, and never all."""
    return min(max(1, round(fraction * rows)), max_rows, rows - 1)


def strata(labels: np.ndarray) -> np.ndarray:
    """Each row's stratum: its class, or for regression (float labels) its rank's tenth."""
    if labels.dtype.kind == "f":
        ranks = np.argsort(np.argsort(labels, kind="stable"), kind="stable")
        return ranks * REGRESSION_BINS // len(labels)
    return labels


def split_selection(labels: np.ndarray, texts: Sequence[Sequence[str]], fraction: float, max_rows: int,
                    seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(training rows, selection rows), sorted row numbers, disjoint in content; the training rows are those
    left once the selection rows and the rows inside them are out. `texts[row]`: the row's texts (one, or a
    pair's two). Each stratum gives its share of the selection rows (largest remainders round), in whole
    units drawn at random among the units no other contains, as many as fit its share."""
    size = selection_size(len(labels), fraction, max_rows)
    groups = strata(labels)
    values, counts = np.unique(groups, return_counts=True)
    shares = counts * size / len(labels)
    taken = np.floor(shares).astype(int)
    for index in np.argsort(-(shares - taken), kind="stable")[:size - taken.sum()]:
        taken[index] += 1
    units, inside = content_units(texts)
    unit_rows = defaultdict(list)
    for row, unit in enumerate(units):
        unit_rows[unit].append(row)
    contained = {unit for pairs in inside.values() for unit in pairs}
    rng = np.random.default_rng(seed)
    selection, left_out = [], set()
    for value, quota in zip(values, taken):
        candidates = [unit for unit, rows in unit_rows.items() if groups[rows[0]] == value and unit not in contained]
        room = quota
        for unit in rng.permutation(len(candidates)):
            rows = unit_rows[candidates[unit]]
            if len(rows) <= room:
                selection += rows
                left_out |= inside.get(candidates[unit], set())
                room -= len(rows)
    if not selection:
        raise ConfigError(f"data.selection_fraction={fraction}: no unit of rows fits the selection split's {size} "
                          f"rows: the training rows share their texts with one another (bertlab.data.selection); "
                          f"set data.selection_fraction=0 to select on the validation split")
    chosen_units = {units[row] for row in selection}
    training = [row for row, unit in enumerate(units) if unit not in chosen_units and unit not in left_out]
    return np.array(training, dtype=int), np.sort(np.array(selection, dtype=int))


def normalised(text: str) -> str:
    """BERT's uncased normalisation and basic tokenisation: accents stripped, lower-cased, words and
    punctuation marks apart, one space between."""
    text = "".join(char for char in unicodedata.normalize("NFD", text.lower()) if unicodedata.category(char) != "Mn")
    return " ".join(TOKEN.findall(text))


TOKEN = re.compile(r"[^\W_]+|[^\w\s]|_")


def content_units(texts: Sequence[Sequence[str]]) -> tuple[list[int], dict[int, set[int]]]:
    """Each row's unit (rows sharing a normalised text are one, named by the first such row) and, for each
    unit with a text that others' texts are inside, those other units. Containment is found without
    comparing all pairs: a text can hold only texts whose rarest word it has."""
    row_texts = [[text for text in map(normalised, row) if text] for row in texts]
    distinct: dict[str, int] = {}
    for row in row_texts:
        for text in row:
            distinct.setdefault(text, len(distinct))
    parent = list(range(len(texts)))

    def root(row: int) -> int:
        while parent[row] != row:
            parent[row] = parent[parent[row]]
            row = parent[row]
        return row

    first_row: dict[int, int] = {}
    for row, row_text in enumerate(row_texts):
        for text in row_text:
            other = first_row.setdefault(distinct[text], row)
            parent[max(root(row), root(other))] = min(root(row), root(other))
    units = [root(row) for row in range(len(texts))]
    text_unit = {text: units[first_row[index]] for text, index in distinct.items()}
    frequency = defaultdict(int)
    for text in distinct:
        for word in set(text.split()):
            frequency[word] += 1
    by_rarest_word = defaultdict(list)
    for text in distinct:
        by_rarest_word[min(text.split(), key=lambda word: (frequency[word], word))].append(text)
    inside: dict[int, set[int]] = defaultdict(set)
    for text, unit in text_unit.items():
        padded = f" {text} "
        for word in set(text.split()):
            for candidate in by_rarest_word[word]:
                if text_unit[candidate] != unit and f" {candidate} " in padded:
                    inside[unit].add(text_unit[candidate])
    return units, dict(inside)
