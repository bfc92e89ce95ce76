"""The cached steps of the pretraining data (bertlab.data.preprocessing): documents read from lines, validation
documents held out, a vocabulary trained, sequences packed. Each step's cache key changes with what the step depends
on (its input, its settings, the pipeline's source) and with nothing else, and a committed entry is reused
(the data module that chains the steps: tests/data/test_pretraining.py)."""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest

from bertlab.data import preprocessing
from bertlab.data.packing import group_documents
from bertlab.data.preprocessing import (cached_map, hold_out_validation, packed_sequences, read_documents,
                                        step_fingerprint, trained_tokenizer)
from bertlab.errors import DataError
from bertlab.tokenizer import WordPieceOptions, special_token_ids, train_tokenizer

PACKING = dict(max_seq_length=32, short_seq_prob=0.0, nsp=False, seed=0, copy_pair_prob=0.0, copy_drop_prob=0.0,
               source="corpus")


def corpus_lines(folder: Path, split: str = "train") -> list[str]:
    return (folder / f"{split}.txt").read_text(encoding="utf-8").split("\n")


def documents_of(lines: list[str] | datasets.Dataset, cache_dir: Path, text_column: str = "text", *,
                 wrapped_lines: bool = False, max_lines: int | None = None) -> datasets.Dataset:
    """read_documents of `lines` (a list: the "text" column of a Dataset built from it)."""
    if isinstance(lines, list):
        lines = datasets.Dataset.from_dict({"text": lines})
    return read_documents(lines, text_column, wrapped_lines, cache_dir, max_lines=max_lines, split="train",
                          source="corpus")


def entries(cache_dir: Path, step: str) -> set[str]:
    return {path.name for path in cache_dir.glob(f"{step}-*.arrow")}


def numbered_documents(count: int, cache_dir: Path) -> datasets.Dataset:
    """`count` documents, as read_documents writes them (a file, as the steps after it read them), each opening with
    its heading "Document i"."""
    lines = [line for i in range(count) for line in (f" = Document {i} = ", f" Document {i} opens . It ends .")]
    return documents_of(lines, cache_dir)


def never_read(*args, **kwargs):
    raise AssertionError("the step was built again instead of read from its cache entry")
    yield  # a generator, as group_documents is: the step calls it before it reads it


# --- cache keys --------------------------------------------------------------------------------


def test_a_step_key_changes_with_its_input_step_settings_and_the_pipelines_source(monkeypatch):
    lines = datasets.Dataset.from_dict({"text": ["one line .", "another ."]})
    key = step_fingerprint(lines, "tokens", (32, 0.1))
    assert step_fingerprint(datasets.Dataset.from_dict({"text": ["one line .", "another ."]}), "tokens",
                            (32, 0.1)) == key  # the same rows built again
    others = [step_fingerprint(datasets.Dataset.from_dict({"text": ["one line .", "other ."]}), "tokens", (32, 0.1)),
              step_fingerprint(lines, "sequences", (32, 0.1)),
              step_fingerprint(lines, "tokens", (64, 0.1))]
    monkeypatch.setattr(preprocessing, "_PIPELINE_SOURCE_HASH", "an edited pipeline")
    others.append(step_fingerprint(lines, "tokens", (32, 0.1)))
    assert len({key, *others}) == 5


# --- documents ---------------------------------------------------------------------------------


def test_documents_are_the_grouped_lines_up_to_max_lines_wrapped_or_not(tiny_corpus, tmp_path):
    lines = corpus_lines(tiny_corpus)
    assert documents_of(lines, tmp_path)["sentences"] == list(group_documents(lines))
    assert documents_of(lines, tmp_path, max_lines=40)["sentences"] == list(group_documents(lines[:40]))
    assert documents_of(lines, tmp_path, wrapped_lines=True)["sentences"] == list(group_documents(lines, True))


def test_documents_are_read_from_the_cache_until_lines_column_limit_or_wrapping_change(tiny_corpus, tmp_path,
                                                                                       monkeypatch):
    lines = corpus_lines(tiny_corpus)
    first = documents_of(lines, tmp_path)
    monkeypatch.setattr(preprocessing, "group_documents", never_read)
    again = documents_of(lines, tmp_path)  # other Dataset objects of the same lines
    assert again["sentences"] == first["sentences"] and entries(tmp_path, "documents") == {
        Path(first.cache_files[0]["filename"]).name}
    monkeypatch.undo()
    two_columns = datasets.Dataset.from_dict({"text": lines, "body": lines})
    variants = [documents_of(lines[:-3], tmp_path), documents_of(lines, tmp_path, max_lines=40),
                documents_of(lines, tmp_path, wrapped_lines=True),
                documents_of(two_columns, tmp_path, "text"), documents_of(two_columns, tmp_path, "body")]
    assert len(entries(tmp_path, "documents")) == 1 + len(variants)
    assert variants[-1]["sentences"] == first["sentences"]  # the same text under another column: another key


def test_lines_without_text_or_without_the_column_are_refused(tmp_path):
    with pytest.raises(DataError, match=r"^train split of 'corpus' has no text in column 'text'$"):
        documents_of(["", " ", ""], tmp_path)
    with pytest.raises(DataError, match=r"^'corpus' has no column\(s\) \['body'\]; available columns: \['text'\]"):
        documents_of(["A line ."], tmp_path, "body")


# --- held-out validation -----------------------------------------------------------------------


@pytest.mark.parametrize("count, held_out", [(100, 5), (10, 2), (3, 2)])
def test_five_percent_of_the_documents_and_at_least_two_are_held_out_apart_from_training(tmp_path, count, held_out):
    documents = numbered_documents(count, tmp_path)
    splits = hold_out_validation(documents, 0, tmp_path, "corpus")
    train, validation = ([document[0] for document in splits[split]["sentences"]] for split in ("train", "validation"))
    assert len(validation) == held_out and len(train) == count - held_out
    assert sorted(train + validation) == sorted(document[0] for document in documents["sentences"])


def test_too_few_documents_to_hold_two_out_are_refused(tmp_path):
    with pytest.raises(DataError, match=r"^pretraining corpus 'corpus' has no validation split and only 2 document"):
        hold_out_validation(numbered_documents(2, tmp_path), 0, tmp_path, "corpus")


def test_the_held_out_documents_follow_the_seed_and_are_read_back_from_the_cache(tmp_path):
    documents = numbered_documents(100, tmp_path)
    first = hold_out_validation(documents, 1, tmp_path, "corpus")
    written = {path.name: path.stat().st_mtime_ns for path in tmp_path.glob("holdout-*")}
    again = hold_out_validation(documents, 1, tmp_path, "corpus")
    assert again["validation"]["sentences"] == first["validation"]["sentences"]
    assert {path.name: path.stat().st_mtime_ns for path in tmp_path.glob("holdout-*")} == written
    other = hold_out_validation(documents, 2, tmp_path, "corpus")
    assert other["validation"]["sentences"] != first["validation"]["sentences"]
    assert len(list(tmp_path.glob("holdout-*.arrow"))) == 4  # train and validation indices per seed


# --- vocabulary --------------------------------------------------------------------------------


def test_a_trained_vocabulary_is_reused_until_its_documents_size_options_or_the_pipeline_change(
        tiny_corpus, tmp_path, monkeypatch):
    lines = corpus_lines(tiny_corpus)
    documents = documents_of(lines, tmp_path)
    trainings = []

    def counted(*args, **kwargs):
        trainings.append(args[1:])
        return train_tokenizer(*args, **kwargs)

    monkeypatch.setattr(preprocessing, "train_tokenizer", counted)
    first = trained_tokenizer(documents, 200, WordPieceOptions(), tmp_path, "corpus")
    sentences = [sentence for document in group_documents(lines) for sentence in document]
    assert first.get_vocab() == train_tokenizer(sentences, 200).get_vocab()  # trained on the documents' sentences
    again = trained_tokenizer(documents, 200, WordPieceOptions(), tmp_path, "corpus")
    assert len(trainings) == 1 and again.get_vocab() == first.get_vocab()
    trained_tokenizer(documents, 150, WordPieceOptions(), tmp_path, "corpus")
    trained_tokenizer(documents, 200, WordPieceOptions(lowercase=False), tmp_path, "corpus")
    trained_tokenizer(documents.select(range(3)), 200, WordPieceOptions(), tmp_path, "corpus")
    monkeypatch.setattr(preprocessing, "_PIPELINE_SOURCE_HASH", "an edited pipeline")
    trained_tokenizer(documents, 200, WordPieceOptions(), tmp_path, "corpus")
    assert trainings == [(200,), (150,), (200,), (200,), (200,)]
    assert len([path for path in tmp_path.glob("tokenizer-*") if path.is_dir()]) == 5


# --- sequences ---------------------------------------------------------------------------------


@pytest.fixture
def corpus(tiny_corpus, tmp_path):
    """The tiny corpus's training documents, its sentences, and a vocabulary trained on them."""
    lines = corpus_lines(tiny_corpus)
    sentences = [sentence for document in group_documents(lines) for sentence in document]
    return documents_of(lines, tmp_path / "documents"), sentences, train_tokenizer(sentences, 200)


def test_sequences_hold_the_documents_tokens_in_order_between_cls_and_sep(corpus, tmp_path):
    documents, sentences, tokenizer = corpus
    sequences = packed_sequences(documents, tokenizer, tmp_path, None, **PACKING)
    ids = special_token_ids(tokenizer)
    rows = sequences["input_ids"]
    assert sequences.column_names == ["input_ids", "token_type_ids"]
    assert all(len(row) <= 32 and row[0] == ids["cls"] and row[-1] == ids["sep"] for row in rows)
    expected = [token for encoding in tokenizer.encode_batch(sentences, add_special_tokens=False)
                for token in encoding.ids]
    assert [token for row in rows for token in row if token not in (ids["cls"], ids["sep"])] == expected
    with_nsp = packed_sequences(documents, tokenizer, tmp_path, None, **{**PACKING, "nsp": True})
    assert set(with_nsp["next_sentence_label"]) == {0, 1}


def test_next_sentence_prediction_of_one_document_is_refused(corpus, tmp_path):
    documents, _, tokenizer = corpus
    with pytest.raises(DataError, match=r"^next-sentence prediction needs at least 2 documents; 'corpus' gives 1$"):
        packed_sequences(documents.select(range(1)), tokenizer, tmp_path, None, **{**PACKING, "nsp": True})


def test_sequence_keys_follow_the_packing_settings_but_not_the_copy_drop_without_copies(corpus, tmp_path):
    documents, sentences, tokenizer = corpus

    def pack(cache_dir=tmp_path, tokenizer=tokenizer, **changes):
        return packed_sequences(documents, tokenizer, cache_dir, None, **{**PACKING, **changes})

    first = pack()
    pack()
    pack(copy_drop_prob=0.5)
    assert len(entries(tmp_path, "tokens")) == 1 and len(entries(tmp_path, "sequences")) == 1
    # Without copied pairs the drop probability packs nothing differently: sharing the key loses nothing.
    assert pack(tmp_path / "fresh", copy_drop_prob=0.5)["input_ids"] == first["input_ids"]
    changes = [{"seed": 1}, {"max_seq_length": 24}, {"short_seq_prob": 0.5}, {"nsp": True}, {"copy_pair_prob": 0.5},
               {"copy_pair_prob": 0.5, "copy_drop_prob": 0.5}]
    for change in changes:
        pack(**change)
    assert len(entries(tmp_path, "sequences")) == 1 + len(changes)
    assert len(entries(tmp_path, "tokens")) == 1  # the token ids depend on none of them
    pack(tokenizer=train_tokenizer(sentences, 150))
    assert len(entries(tmp_path, "tokens")) == 2


# --- a cached map ------------------------------------------------------------------------------


def doubled(batch: dict[str, list]) -> dict[str, list]:
    return {"x": [2 * x for x in batch["x"]]}


def tripled(batch: dict[str, list]) -> dict[str, list]:
    return {"x": [3 * x for x in batch["x"]]}


def test_a_mapped_step_is_reused_while_committed_and_built_again_otherwise(tmp_path):
    numbers = datasets.Dataset.from_dict({"x": [1, 2, 3]})
    assert cached_map(numbers, doubled, "step", "settings", tmp_path, None)["x"] == [2, 4, 6]
    (entry,) = tmp_path.glob("step-*.arrow")
    assert (tmp_path / f"{entry.name}.commit").is_file()
    # The key is the input, the step and its settings: the function is not in it.
    assert cached_map(numbers, tripled, "step", "settings", tmp_path, None)["x"] == [2, 4, 6]
    assert cached_map(numbers, tripled, "step", "other settings", tmp_path, None)["x"] == [3, 6, 9]
    (tmp_path / f"{entry.name}.commit").unlink()  # as a run killed before the commit leaves it
    assert cached_map(numbers, tripled, "step", "settings", tmp_path, None)["x"] == [3, 6, 9]
