"""Token classification data (bertlab.data.token_classification): a word's tag on its first piece, -100 on the
rest, padded batches, the selection split's strata, and the one-line refusals of bad tags."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bertlab.data.token_classification import TokenClassificationDataModule, first_pieces, piece_labels
from bertlab.errors import ConfigError, DataError
from bertlab.losses import IGNORE_INDEX
from bertlab.tokenizer import load_tokenizer, save_tokenizer, train_tokenizer

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
NAMES = ["anna", "bert", "carla"]
PLACES = ["paris", "rome", "oslo"]
OTHER = ["visited", "the", "city", "of", "and", "met", "yesterday"]


def sentence(rng: np.random.Generator) -> tuple[list[str], list[int]]:
    """A few words, a person of one or two words and perhaps a place."""
    words, tags = [str(rng.choice(OTHER))], [0]
    if rng.random() < 0.7:
        person = [str(rng.choice(NAMES)).title()] + ([str(rng.choice(NAMES)).title() + "son"] if rng.random() < .5 else [])
        words += person
        tags += [1] + [2] * (len(person) - 1)
    words.append(str(rng.choice(OTHER)))
    tags.append(0)
    if rng.random() < 0.5:
        words += [str(rng.choice(PLACES)).title()]
        tags += [3]
    return words, tags


def write_conll(folder: Path, rows: int = 60, seed: int = 0, **changes) -> Path:
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for split, count in (("train", rows), ("validation", rows // 3)):
        pairs = [sentence(rng) for _ in range(count)]
        frame = pd.DataFrame({"id": [str(i) for i in range(count)], "tokens": [p[0] for p in pairs],
                              "ner_tags": [p[1] for p in pairs]})
        if split in changes:
            frame = changes[split](frame)
        frame.to_parquet(folder / f"{split}.parquet")
    return folder


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    texts = [" ".join(sentence(np.random.default_rng(i))[0]) for i in range(100)] + ["annason bertson carlason"]
    directory = tmp_path_factory.mktemp("tokenizer")
    save_tokenizer(train_tokenizer(texts, vocab_size=60, min_frequency=1), directory)
    return directory


def datamodule(source: Path, tokenizer_dir: Path, **options) -> TokenClassificationDataModule:
    return TokenClassificationDataModule(str(source), str(tokenizer_dir), label_names=TAGS, batch_size=8,
                                         eval_batch_size=8, **options)


def test_a_words_tag_goes_to_its_first_piece_and_its_other_pieces_and_the_specials_are_not_scored():
    assert piece_labels([None, 0, 1, 1, 1, 2, None], [3, 1, 2]) == [IGNORE_INDEX, 3, 1, IGNORE_INDEX,
                                                                   IGNORE_INDEX, 2, IGNORE_INDEX]
    assert first_pieces([None, 0, 1, 1, 2, None]) == [1, 2, 4]


def test_batches_carry_each_words_tag_at_its_first_piece_and_minus_100_elsewhere(tmp_path, tokenizer_dir):
    data = datamodule(write_conll(tmp_path / "conll"), tokenizer_dir)
    data.setup("fit")
    tokenizer = load_tokenizer(str(tokenizer_dir))
    words, gold = data.words("validation"), data.gold_tags("validation")
    checked = 0
    for batch in data.val_dataloader():
        assert batch["labels"].shape == batch["input_ids"].shape
        assert (batch["labels"][batch["attention_mask"] == 0] == IGNORE_INDEX).all()
        for row, index in enumerate(batch["index"].tolist()):
            scored = batch["labels"][row][batch["labels"][row] != IGNORE_INDEX].tolist()
            assert [TAGS[i] for i in scored] == gold[index]  # one label a word, in word order
            checked += 1
    assert checked == len(words)
    several = [w for ws in words for w in ws if len(tokenizer.encode([w], is_pretokenized=True).ids) > 3]
    assert several, "the data should hold words of several pieces"


def test_the_selection_split_keeps_the_share_of_each_first_entity_type(tmp_path, tokenizer_dir):
    data = datamodule(write_conll(tmp_path / "conll", rows=200), tokenizer_dir, selection_fraction=0.2)
    data.setup("fit")
    train_rows, held_out = data._selection_rows()
    assert len(held_out) == 40 and not set(train_rows) & set(held_out)
    strata = data._strata(data._split_tags(data._loaded_split("train"), "train"))
    for stratum in np.unique(strata):
        share = (strata == stratum).mean()
        assert abs((strata[held_out] == stratum).mean() - share) <= 1 / 40 + 1e-9
    assert len(data.val_dataloader()) == 2


def test_tags_may_come_as_names_of_label_names(tmp_path, tokenizer_dir):
    as_names = write_conll(tmp_path / "names", train=lambda f: f.assign(ner_tags=f.ner_tags.map(
        lambda tags: [TAGS[t] for t in tags])))
    data = datamodule(as_names, tokenizer_dir)
    data.setup("fit")
    assert data.gold_tags("train")[0][1:] and set(t for row in data.gold_tags("train") for t in row) <= set(TAGS)


@pytest.mark.parametrize("change, message", [
    (lambda f: f.assign(ner_tags=f.ner_tags.map(lambda tags: " ".join(TAGS[t] for t in tags))),
     "at row 0; expected a list of tags, one per word"),
    (lambda f: f.assign(ner_tags=[[0]] + list(f.ner_tags[1:])), "holds 1 tags at row 0 for its"),
    (lambda f: f.assign(ner_tags=[[9] * len(f.tokens[0])] + list(f.ner_tags[1:])),
     "holds tag 9 at row 0, which is not one of label_names"),
    (lambda f: f.assign(ner_tags=[[0] * (len(f.tokens[0]) - 1) + [2]] + list(f.ner_tags[1:])),
     "mixes IOB schemes: row 0 opens an entity with 'I-PER' (IOB1)"),
])
def test_bad_tags_are_refused_in_one_line_naming_the_row(tmp_path, tokenizer_dir, change, message):
    data = datamodule(write_conll(tmp_path / "bad", train=change), tokenizer_dir)
    with pytest.raises(DataError, match=message.replace("(", r"\(").replace(")", r"\)")) as error:
        data.setup("fit")
    assert "\n" not in str(error.value) and "column 'ner_tags' of split 'train'" in str(error.value)


def test_tag_names_of_two_schemes_are_refused(tmp_path, tokenizer_dir):
    with pytest.raises(ConfigError, match="mix tagging schemes: 'S-PER' \\(IOBES\\) beside 'L-LOC' \\(BILOU\\)"):
        TokenClassificationDataModule(str(tmp_path), str(tokenizer_dir), label_names=["O", "B-PER", "S-PER", "L-LOC"])
