"""Text lines to pretraining sequences (bertlab.data.packing): lines grouped into documents of sentences
(WikiText headings, wrapped lines, paragraph boundaries, and each document yielded before reading further), and
SequencePacker on seeded random toy corpora: plain text is packed whole."""

from __future__ import annotations

import random

import datasets
import pytest

from bertlab.data.packing import SequencePacker, group_documents

CLS, SEP = 2, 3


def test_group_documents_follows_wikitext_headings_and_joins_wrapped_lines():
    lines = [
        " ", " = First Article = ", " ", " Intro sentence one . Intro two !", " ",
        " = = Section = = ", " Body line .", "",
        " = Second = ", "A hard-wrapped", "paragraph ends here. Next sentence", "continues.", "", "",
    ]
    assert list(group_documents(lines, wrapped_lines=True)) == [
        ["First Article", "Intro sentence one .", "Intro two !", "Section", "Body line ."],
        ["Second", "A hard-wrapped paragraph ends here.", "Next sentence continues."],
    ]


def test_group_documents_takes_each_line_as_a_paragraph_by_default(monkeypatch):
    monkeypatch.setattr("bertlab.data.packing.MAX_DOCUMENT_CHARS", 30)
    lines = ["First paragraph, one line", "then a line of twenty. Second", "Third is short."]
    assert list(group_documents(lines)) == [
        ["First paragraph, one line", "then a line of twenty.", "Second"],
        ["Third is short."],
    ]
    assert list(group_documents(lines, wrapped_lines=True)) == [
        ["First paragraph, one line then a line of twenty.", "Second Third is short."],
    ]


def test_group_documents_cuts_books_at_paragraph_boundaries(monkeypatch):
    monkeypatch.setattr("bertlab.data.packing.MAX_DOCUMENT_CHARS", 30)
    paragraph = ["Twenty characters in", "two lines here."]  # 36 characters once joined
    assert list(group_documents([*paragraph, "", *paragraph, "", "Short."], wrapped_lines=True)) == [
        ["Twenty characters in two lines here."],
        ["Twenty characters in two lines here."],
        ["Short."],
    ]


def test_group_documents_yields_each_document_before_reading_further():
    def lines():
        yield from [" = First = ", "Some text ."]
        yield " = Second = "
        raise AssertionError("read past the line that ends the first document")

    assert next(group_documents(lines())) == ["First", "Some text ."]


def random_documents(seed: int) -> list[list[list[int]]]:
    """Documents of sentences of ordinary token ids (5 and up), of every length from one token to several times
    a sequence's budget, so that sentences are cut and chunks end inside them."""
    rng = random.Random(seed)
    return [[[rng.randrange(5, 1000) for _ in range(rng.choice([1, 2, rng.randrange(1, 40), rng.randrange(1, 120)]))]
             for _ in range(rng.randrange(1, 12))] for _ in range(rng.randrange(2, 30))]


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("short_seq_prob", [0.0, 0.1, 1.0])
def test_plain_text_is_packed_whole_each_token_once_in_order(seed, short_seq_prob):
    documents = random_documents(seed)
    max_seq_length = random.Random(seed).choice([8, 16, 64])
    packer = SequencePacker(datasets.Dataset.from_dict({"input_ids": documents}), max_seq_length=max_seq_length,
                            short_seq_prob=short_seq_prob, nsp=False, seed=seed, cls_token_id=CLS, sep_token_id=SEP)
    packed = packer({"input_ids": documents}, list(range(len(documents))))
    text = [token for row in packed["input_ids"] for token in row if token not in (CLS, SEP)]
    assert text == [token for document in documents for sentence in document for token in sentence]
    assert all(len(row) <= max_seq_length and row[0] == CLS and row[-1] == SEP for row in packed["input_ids"])
