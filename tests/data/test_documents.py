"""Text lines grouped into documents of sentences (bertlab.data.documents): WikiText headings, wrapped lines,
paragraph boundaries, and each document yielded before reading further."""

from __future__ import annotations

from bertlab.data.documents import group_documents


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
    monkeypatch.setattr("bertlab.data.documents.MAX_DOCUMENT_CHARS", 30)
    lines = ["First paragraph, one line", "then a line of twenty. Second", "Third is short."]
    assert list(group_documents(lines)) == [
        ["First paragraph, one line", "then a line of twenty.", "Second"],
        ["Third is short."],
    ]
    assert list(group_documents(lines, wrapped_lines=True)) == [
        ["First paragraph, one line then a line of twenty.", "Second Third is short."],
    ]


def test_group_documents_cuts_books_at_paragraph_boundaries(monkeypatch):
    monkeypatch.setattr("bertlab.data.documents.MAX_DOCUMENT_CHARS", 30)
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
