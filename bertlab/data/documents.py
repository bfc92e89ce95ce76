"""Text lines grouped into documents of sentences: what the pretraining sequences are packed from
(bertlab.data.packing). A WikiText heading, or a paragraph boundary once a document is long enough, ends
a document; sentences end after ".", "!" or "?"."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

import datasets

# A document closes at the first paragraph boundary after this many characters: about the size of
# an average WikiText article (~3.5k words), so long books become chapter-sized documents.
MAX_DOCUMENT_CHARS = 32_000

_HEADING = re.compile(r"^(?P<marks>(?:= )+)(?P<title>.*?)(?: =)+$")
# Split after ., ! or ?, also when a closing quote or bracket follows them.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[.!?][\"'”’)])\s+")


def group_documents(lines: Iterable[str | None], wrapped_lines: bool = False) -> Iterator[list[str]]:
    """Group a stream of lines into documents, each a list of sentences, yielded as soon as it ends:
    the lines are read once, in order, and only the open document is held.

    - Each line is a paragraph (WikiText, Wikipedia dumps, one sentence per row); with
      `wrapped_lines` the text is hard-wrapped (Project Gutenberg): blank lines end paragraphs and
      consecutive non-blank lines form one paragraph, joined with a space.
    - A WikiText level-1 heading (" = Title = ") starts a new document; headings ("= = Sub = =" too)
      lose their "=" marks and become a sentence of their own.
    - Text without such headings (books, Wikipedia dumps) is cut at the first paragraph boundary after
      MAX_DOCUMENT_CHARS characters, so documents stay article-sized for NSP and packing.
    - Paragraphs are split into sentences after ".", "!" or "?" followed by white space: the units
      from which segments A and B are built.
    """
    ended: list[list[str]] = []
    document: list[str] = []
    document_chars = 0
    paragraph: list[str] = []

    def end_paragraph() -> None:
        nonlocal document_chars
        if paragraph:
            text = " ".join(paragraph)
            document.extend(sentence for sentence in _SENTENCE_END.split(text) if sentence)
            document_chars += len(text)
            paragraph.clear()
        if document_chars >= MAX_DOCUMENT_CHARS:
            end_document()

    def end_document() -> None:
        nonlocal document, document_chars
        if document:
            ended.append(document)
        document, document_chars = [], 0

    for line in (part for row in lines for part in (row or "").split("\n")):
        text = line.strip()
        heading = _HEADING.match(text)
        if not text:
            end_paragraph()
        elif heading:
            end_paragraph()
            if heading["marks"].count("=") == 1:
                end_document()
            paragraph.append(heading["title"])
            end_paragraph()
        else:
            paragraph.append(text)
            if not wrapped_lines:
                end_paragraph()
        yield from ended
        ended.clear()
    end_paragraph()
    end_document()
    yield from ended


class DocumentSentences:
    """The sentences of a documents dataset, readable more than once (the tokenizer trainer reads them twice)."""

    def __init__(self, documents: datasets.Dataset):
        self.documents = documents

    def __iter__(self) -> Iterator[str]:
        for batch in self.documents.iter(batch_size=1000):
            for document in batch["sentences"]:
                yield from document
