"""The selection split (bertlab.data.selection): its size, strata and seed, its content disjoint from the
training rows' (no text inside another, duplicates on one side, on synthetic phrases and on the real SST-2),
and the data module's use of it — held-out rows disjoint from the training rows used, the same on every rerun,
validated before the validation split."""

from __future__ import annotations

import numpy as np
import pytest

from bertlab.data.classification import SELECTION_SPLIT, ClassificationDataModule
from bertlab.data.selection import normalised, selection_size, split_selection
from bertlab.errors import ConfigError
from tests.data.test_classification import make_sentences, single_sentence_data, tokenizer_dir, write_split_files

__all__ = ["tokenizer_dir"]  # the fixture, shared


def distinct_texts(rows: int) -> list[tuple[str]]:
    """A text a row, none inside another."""
    return [(f"row {row} .",) for row in range(rows)]


def inside(small: str, large: str) -> bool:
    return f" {normalised(small)} " in f" {normalised(large)} "


def overlaps(texts: list[tuple[str, ...]], train: np.ndarray, selection: np.ndarray) -> list[tuple[str, str]]:
    """(selection text, training text) where one is inside the other."""
    return [(held, trained) for row in selection for held in texts[row] for other in train for trained in texts[other]
            if inside(held, trained) or inside(trained, held)]


@pytest.mark.parametrize("rows, size", [(2490, 124), (67349, 1000), (3668, 183), (40, 2), (10, 1), (2, 1)])
def test_the_selection_split_takes_five_percent_capped_at_a_thousand_rows(rows, size):
    assert selection_size(rows, 0.05, 1000) == size


@pytest.mark.parametrize("fraction, max_rows, rows, message", [
    (1.0, 1000, 100, "selection_size(fraction=1.0): must be in (0, 1)"),
    (0.05, 0, 100, "selection_size(max_rows=0): must be in "),
    (0.05, 1000, 1, "the training split has 1 row(s); a selection split needs at least 2"),
])
def test_an_impossible_selection_split_is_refused_naming_its_key(fraction, max_rows, rows, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        selection_size(rows, fraction, max_rows)


def test_the_selection_rows_keep_each_class_share_and_are_disjoint_from_the_training_rows():
    labels = np.array([0] * 900 + [1] * 100)
    train, selection = split_selection(labels, distinct_texts(1000), 0.1, 1000, seed=0)
    assert len(selection) == 100 and np.bincount(labels[selection]).tolist() == [90, 10]
    assert np.intersect1d(train, selection).size == 0 and sorted([*train, *selection]) == list(range(1000))


def test_regression_labels_are_stratified_by_rank():
    labels = np.linspace(0.0, 5.0, 1000).astype(np.float32)[::-1].copy()
    _, selection = split_selection(labels, distinct_texts(1000), 0.05, 1000, seed=3)
    assert np.histogram(labels[selection], bins=10, range=(0, 5))[0].tolist() == [5] * 10


def test_the_same_seed_draws_the_same_rows_and_another_seed_others():
    labels = np.arange(500) % 3
    texts = distinct_texts(500)
    first = split_selection(labels, texts, 0.05, 1000, seed=0)
    assert all(np.array_equal(a, b) for a, b in zip(first, split_selection(labels, texts, 0.05, 1000, seed=0)))
    assert not np.array_equal(first[1], split_selection(labels, texts, 0.05, 1000, seed=1)[1])


def test_normalised_text_is_bert_uncased_basic_tokens():
    assert normalised("  Café  SOCIETY,\tits   charm!") == "cafe society , its charm !"


def phrases_of_sentences(sentences: int) -> tuple[list[tuple[str]], np.ndarray]:
    """SST-2-shaped rows: each sentence, and phrases cut from it (its first words, its last words, one word
    shared by all sentences), labelled by the sentence."""
    texts, labels = [], []
    for index in range(sentences):
        words = f"sentence{index} opens with words{index} and ends in a mood{index} .".split()
        for phrase in (words, words[:3], words[-4:], words[4:6], ["a"]):
            texts.append((" ".join(phrase),))
            labels.append(index % 2)
    return texts, np.array(labels)


def test_no_selection_text_is_inside_a_training_text_or_the_reverse():
    texts, labels = phrases_of_sentences(40)
    train, selection = split_selection(labels, texts, 0.1, 1000, seed=0)
    assert overlaps(texts, train, selection) == []
    assert len(selection) == 20 and np.bincount(labels[selection]).tolist() == [10, 10]
    # Whole sentences are held out; their own two phrases leave training, and the phrases every sentence
    # shares ("and ends", "a": 40 rows each) too.
    assert all(len(texts[row][0].split()) == 10 for row in selection)
    assert len(train) == len(texts) - 20 * 3 - 2 * 40


def test_duplicates_after_normalisation_land_on_one_side():
    texts = [(f"Row {row} of the Café ,",) for row in range(50)]
    texts += [(f"row   {row} of the cafe,",) for row in range(50)]
    labels = np.arange(100) % 2
    for seed in range(5):
        train, selection = split_selection(labels, texts, 0.1, 1000, seed=seed)
        assert sorted((set(selection % 50))) == sorted(selection[selection < 50])
        # Five rows a class in units of two: two units each.
        assert set(train % 50).isdisjoint(selection % 50) and len(selection) == 8


def test_pair_rows_sharing_a_sentence_land_on_one_side():
    texts = [(f"premise {row // 3} holds .", f"hypothesis {row} .") for row in range(60)]
    labels = np.arange(60) % 2
    train, selection = split_selection(labels, texts, 0.1, 1000, seed=2)
    assert {row // 3 for row in train}.isdisjoint({row // 3 for row in selection})
    assert overlaps(texts, train, selection) == []


def test_rows_that_all_share_text_leave_no_selection_split_and_say_so():
    chained = [(f"sentence {row} .", f"sentence {row + 1} .") for row in range(20)]
    with pytest.raises(ConfigError, match=r"^data.selection_fraction=0.1: no unit of rows fits the selection split's 2 "
                                          r"rows: the training rows share their texts with one another"):
        split_selection(np.arange(20) % 2, chained, 0.1, 1000, seed=0)


@pytest.mark.slow
def test_the_real_sst2_selection_split_holds_no_training_text(shared_data_dir):
    """SST-2's 67,349 rows are phrases of ~10k sentences: today's split held out phrases inside training ones."""
    import pandas as pd

    path = shared_data_dir / "sst2" / "train.parquet"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    frame = pd.read_parquet(path)
    texts, labels = [(text,) for text in frame["sentence"]], frame["label"].to_numpy()
    train, selection = split_selection(labels, texts, 0.05, 1000, seed=0)
    assert len(selection) == 1000
    trained = "\n".join(f" {normalised(texts[row][0])} " for row in train)
    assert [row for row in selection if f" {normalised(texts[row][0])} " in trained] == []
    held = "\n".join(f" {normalised(texts[row][0])} " for row in selection)
    assert [row for row in train if f" {normalised(texts[row][0])} " in held] == []


def test_the_data_module_trains_without_the_selection_rows_and_validates_on_them_first(tmp_path, tokenizer_dir):
    sentences = [f"{row} {text}" for row, text in enumerate(make_sentences(60, seed=7))]  # each row its own text
    source = write_split_files(tmp_path / "data", {
        "train": {"sentence": sentences, "label": [i % 2 for i in range(60)]},
        "validation": {"sentence": make_sentences(10, seed=2), "label": [i % 2 for i in range(10)]}})
    dm = ClassificationDataModule(str(source), str(tokenizer_dir), selection_fraction=0.2, selection_seed=4)
    dm.setup("fit")
    train_texts, _ = dm.texts("train")
    held_out, _ = dm.texts(SELECTION_SPLIT)
    assert len(train_texts) == 48 and len(held_out) == 12
    assert set(train_texts).isdisjoint(held_out) and set(train_texts) | set(held_out) == set(sentences)
    selection_loader, validation_loader = dm.val_dataloader()
    assert sum(len(batch["labels"]) for batch in selection_loader) == 12
    assert sum(len(batch["labels"]) for batch in validation_loader) == 10
    assert sum(len(batch["labels"]) for batch in dm.train_dataloader()) == 48

    again = ClassificationDataModule(str(source), str(tokenizer_dir), selection_fraction=0.2, selection_seed=4)
    again.setup("fit")
    assert again.texts(SELECTION_SPLIT) == dm.texts(SELECTION_SPLIT) and again.texts("train") == dm.texts("train")


def test_without_a_selection_fraction_validation_runs_on_the_validation_split_alone(tmp_path, tokenizer_dir):
    dm = ClassificationDataModule(str(single_sentence_data(tmp_path / "data")), str(tokenizer_dir))
    dm.setup("fit")
    assert not isinstance(dm.val_dataloader(), list) and len(dm.texts("train")[0]) == 40
