"""Text lines to pretraining sequences: the lines grouped into documents of sentences (`group_documents`: a
WikiText heading, or a paragraph boundary once a document is long enough, ends a document; sentences end after
".", "!" or "?"), the token ids of each sentence (`tokenize_batch`), then `[CLS] A [SEP] B [SEP]` sequences
packed inside documents (`SequencePacker`)."""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Iterator

import datasets
from tokenizers import Tokenizer

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


def tokenize_batch(batch: dict[str, list], tokenizer: Tokenizer) -> dict[str, list]:
    """Token ids per sentence, without special tokens; empty sentences and documents are dropped."""
    sentences = [sentence for document in batch["sentences"] for sentence in document]
    encodings = iter(tokenizer.encode_batch(sentences, add_special_tokens=False))
    documents = []
    for document in batch["sentences"]:
        ids = [encoding.ids for encoding in (next(encodings) for _ in document)]
        ids = [sentence_ids for sentence_ids in ids if sentence_ids]
        if ids:
            documents.append(ids)
    return {"input_ids": documents}


class SequencePacker:
    """Builds `[CLS] A [SEP] B [SEP]` sequences inside documents, like Google's create_pretraining_data.py.

    Segments of a document fill a chunk up to a target length (max_seq_length - 3, or with
    probability `short_seq_prob` a random shorter one, drawn per sequence); the segment that would
    overflow it is cut, its rest starting the next chunk, so no token is lost. A is the first
    1..n-1 segments of the chunk, B the rest. With `nsp`, B is instead, with probability 1/2, text
    from a random other document starting at a random segment (label 1; the unused segments go back
    to the document), else the true continuation (label 0; a one-segment chunk takes the next
    segment as B). Segments are sentences, those longer than half the token budget cut into equal
    pieces so that A and B can split them. A + B exceed the budget only by the one token a full
    one-segment A leaves no room for; the longer one then loses a token at its front or back, at
    random. Sequences never mix documents, except for the random B.

    With probability `copy_pair_prob` a sequence is instead `[CLS] A [SEP] A' [SEP]`: A cut to half the
    budget, A' the same tokens each left out with probability `copy_drop_prob`. A masked token of one
    segment can then be read off the other, which teaches the attention to find a segment's tokens in
    the other one: what a cross-encoder needs for sentence-pair tasks (STS-B, MRPC).
    """

    def __init__(
        self, documents: datasets.Dataset, *, max_seq_length: int, short_seq_prob: float, nsp: bool, seed: int,
        cls_token_id: int, sep_token_id: int, copy_pair_prob: float = 0.0, copy_drop_prob: float = 0.15,
    ) -> None:
        self.documents = documents
        self.max_num_tokens = max_seq_length - 3
        self.short_seq_prob = short_seq_prob
        self.nsp = nsp
        self.seed = seed
        self.cls_token_id = cls_token_id
        self.sep_token_id = sep_token_id
        self.copy_pair_prob = copy_pair_prob
        self.copy_drop_prob = copy_drop_prob

    def __call__(self, batch: dict[str, list], indices: list[int]) -> dict[str, list]:
        columns: dict[str, list] = {"input_ids": [], "token_type_ids": []}
        if self.nsp:
            columns["next_sentence_label"] = []
        for document_index, sentences in zip(indices, batch["input_ids"]):
            # Seeded per document: the sequences do not depend on how `map` batches or shards the documents.
            rng = random.Random(self.seed * 1_000_003 + document_index)
            for tokens_a, tokens_b, is_random_next in self._pack_document(document_index, sentences, rng):
                input_ids = [self.cls_token_id, *tokens_a, self.sep_token_id]
                token_type_ids = [0] * len(input_ids)
                if tokens_b:
                    input_ids += [*tokens_b, self.sep_token_id]
                    token_type_ids += [1] * (len(tokens_b) + 1)
                columns["input_ids"].append(input_ids)
                columns["token_type_ids"].append(token_type_ids)
                if self.nsp:
                    columns["next_sentence_label"].append(int(is_random_next))
        return columns

    def _pack_document(
        self, document_index: int, sentences: list[list[int]], rng: random.Random
    ) -> Iterator[tuple[list[int], list[int], bool]]:
        segments = self._pieces(sentences)
        chunk: list[list[int]] = []
        chunk_length = 0
        target_length = self._target_length(rng)
        i = 0
        while i < len(segments):
            _cut(segments, i, target_length - chunk_length)
            chunk.append(segments[i])
            chunk_length += len(segments[i])
            if i == len(segments) - 1 or chunk_length >= target_length:
                a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                tokens_a = [token for segment in chunk[:a_end] for token in segment]
                tokens_b = [token for segment in chunk[a_end:] for token in segment]
                room_for_b = max(1, target_length - len(tokens_a))
                is_random_next = self.nsp and rng.random() < 0.5
                if self.nsp and not is_random_next and not tokens_b:
                    if i + 1 < len(segments):
                        i += 1
                        _cut(segments, i, room_for_b)
                        tokens_b = list(segments[i])
                    else:
                        is_random_next = True
                if is_random_next:
                    i -= len(chunk) - a_end
                    tokens_b = self._random_segment(document_index, room_for_b, rng)
                _truncate_pair(tokens_a, tokens_b, self.max_num_tokens, rng)
                if self.copy_pair_prob and rng.random() < self.copy_pair_prob:
                    tokens_a = tokens_a[: self.max_num_tokens // 2]
                    tokens_b = [token for token in tokens_a if rng.random() >= self.copy_drop_prob]
                yield tokens_a, tokens_b, is_random_next
                chunk, chunk_length = [], 0
                target_length = self._target_length(rng)
            i += 1

    def _target_length(self, rng: random.Random) -> int:
        if rng.random() < self.short_seq_prob:
            return rng.randint(2, self.max_num_tokens)
        return self.max_num_tokens

    def _pieces(self, sentences: list[list[int]]) -> list[list[int]]:
        """Sentences, those longer than half the token budget cut into equal pieces."""
        size = max(1, self.max_num_tokens // 2)
        pieces = []
        for sentence in sentences:
            count = -(-len(sentence) // size)
            bounds = [len(sentence) * index // count for index in range(count + 1)]
            pieces += [sentence[start:end] for start, end in zip(bounds, bounds[1:])]
        return pieces

    def _random_segment(self, document_index: int, length: int, rng: random.Random) -> list[int]:
        other = rng.randrange(len(self.documents) - 1)
        other += other >= document_index
        segments = self._pieces(self.documents[other]["input_ids"])
        tokens: list[int] = []
        for segment in segments[rng.randrange(len(segments)) :]:
            tokens.extend(segment)
            if len(tokens) >= length:
                break
        return tokens[:length]


def _cut(segments: list[list[int]], index: int, size: int) -> None:
    """Split segments[index] after `size` tokens, in place, when it is longer; the rest follows it."""
    if len(segments[index]) > size:
        segments[index : index + 1] = [segments[index][:size], segments[index][size:]]


def _truncate_pair(tokens_a: list[int], tokens_b: list[int], max_num_tokens: int, rng: random.Random) -> None:
    """Drop tokens from the longer segment, at its front or back at random, until both fit."""
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        del longer[0 if rng.random() < 0.5 else -1]
