"""Sentences for a sentence-embedding distillation (bertlab.data.sentences): cut from a corpus at sentence
ends, filtered by length, gathered in a seeded order up to a count, joined by a dataset's texts (never its
labels), a seeded share held out, and batched with their row `index`."""

from __future__ import annotations

import pytest

from bertlab.data.sentences import SentenceDataModule, sentences_of, split_sentences
from bertlab.errors import ConfigError, DataError
from bertlab.tokenizer import train_tokenizer
from tests.conftest import write_sentence_corpus


def test_sentences_end_at_a_stop_before_a_capital_or_a_quote():
    line = 'He left at 5 p.m. and came back. "Why?" she asked! It was 3.5 km. away? Yes. e.g. this'
    assert split_sentences(line) == ["He left at 5 p.m. and came back.", '"Why?" she asked!',
                                     "It was 3.5 km. away?", "Yes. e.g. this"]


def test_only_sentences_in_the_word_range_are_kept():
    lines = iter(["One two three. One two three four five six. One two three four five six seven eight."])
    assert list(sentences_of(lines, min_words=4, max_words=7)) == ["One two three four five six."]


def test_sentences_are_gathered_in_a_seeded_order_up_to_the_limit(tmp_path):
    corpus = write_sentence_corpus(tmp_path / "corpus.txt")

    def gathered(seed: int, **options) -> list[str]:
        data = SentenceDataModule(str(corpus), train_tokenizer(["line opens here"], vocab_size=40), seed=seed,
                                  validation_size=2, **{"max_sentences": 20, **options})
        data.setup("fit")
        return data.texts("train") + data.texts("validation")

    first = gathered(0)
    assert len(first) == 20 and all(6 <= len(text.split()) <= 40 for text in first)
    assert {text.split()[0] for text in first} == {"Line", "Does"}  # "Too short!" has 2 words
    assert gathered(0) == first and sorted(gathered(1)) != sorted(first)
    assert len(gathered(0, max_sentences=1000)) == 120  # every kept sentence of the 60 lines


def test_a_datasets_texts_join_the_corpus_and_a_seeded_share_is_held_out(tmp_path, tiny_data_dir):
    corpus = write_sentence_corpus(tmp_path / "corpus.txt", lines=10)
    tokenizer = train_tokenizer(["line opens here the movie"], vocab_size=40)
    data = SentenceDataModule(str(corpus), tokenizer, extra_source=str(tiny_data_dir / "sst2"), validation_size=30,
                              batch_size=8, max_seq_length=16)
    data.setup("fit")
    train, validation = data.texts("train"), data.texts("validation")
    assert len(validation) == 30 and len(train) == 20 + 256 - 30 and not set(train) & set(validation)
    assert any(text.startswith("Line") for text in validation) and len(data.datasets["train"]) == len(train)
    batch = next(iter(data.train_dataloader()))
    assert batch["input_ids"].shape[0] == 8 and batch["input_ids"].shape[1] <= 16 and "labels" not in batch
    rows = batch["index"].tolist()
    assert [data.datasets["train"][row]["length"] for row in rows] == batch["attention_mask"].sum(1).tolist()


def test_the_word_range_cannot_end_before_it_starts():
    with pytest.raises(ConfigError, match=r"^data.max_words=3: must be at least data.min_words \(6\)$"):
        SentenceDataModule("corpus.txt", train_tokenizer(["short"], vocab_size=40), max_words=3)


def test_a_corpus_without_a_sentence_in_the_word_range_is_a_one_line_error(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("Too short. Far too short.\nno capital letters here at all so one long run on\n")
    data = SentenceDataModule(str(corpus), train_tokenizer(["short"], vocab_size=40), max_words=8)
    with pytest.raises(DataError, match=rf"^data.source={corpus}: no sentence of 6-8 words \(data.min_words, "
                                        r"data.max_words\) in its 2 lines; expected plain text") as error:
        data.setup("fit")
    assert "\n" not in str(error.value)
