"""BERT's tokenizer on a sentence or pair, stage by stage, for students: the normalised text, the basic
tokens (the whitespace and punctuation split) with their spans in the original text, each basic token's
WordPiece pieces, and the final sequence with [CLS]/[SEP] and token type ids.

Every stage is computed by the `tokenizers` component that `Tokenizer.encode` runs (normaliser,
pre-tokenizer, WordPiece model, post-processor), so it shows exactly what the model sees; the pieces are
checked against `encode`'s ids.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenizers import Encoding, PreTokenizedString, Tokenizer, models

from bertlab.errors import CheckpointError


@dataclass(frozen=True)
class Piece:
    token: str
    id: int


@dataclass(frozen=True)
class BasicToken:
    original: str
    span: tuple[int, int]  # start and end character in the original text
    normalized: str
    pieces: list[Piece]
    special: bool  # a special token typed in the text, e.g. [MASK]: matched before normalisation, kept whole
    unknown: str | None  # why the word became [UNK]; None when it did not


@dataclass(frozen=True)
class SentenceStages:
    text: str
    normalized: str
    basic_tokens: list[BasicToken]


@dataclass(frozen=True)
class FinalSequence:
    tokens: list[str]
    input_ids: list[int]
    token_type_ids: list[int]
    sources: list[tuple[int, int] | None]  # (sentence, basic token) of each token; None for [CLS]/[SEP] added


@dataclass(frozen=True)
class TokenizerStages:
    sentences: list[SentenceStages]
    final: FinalSequence


def tokenizer_stages(tokenizer: Tokenizer, text: str, pair: str | None = None) -> TokenizerStages:
    if not isinstance(tokenizer.model, models.WordPiece):
        raise CheckpointError(f"expected a WordPiece tokenizer (BERT's), got a {type(tokenizer.model).__name__} one")
    sentences = [_sentence_stages(tokenizer, sentence) for sentence in (text, pair) if sentence is not None]
    return TokenizerStages(sentences, _final_sequence(tokenizer.encode(text, pair), sentences))


def _sentence_stages(tokenizer: Tokenizer, text: str) -> SentenceStages:
    normalized, basic_tokens = [], []
    for start, end, special in _segments(tokenizer, text):
        segment = text[start:end]
        if special:
            normalized.append(segment)
            pieces = [Piece(segment, tokenizer.token_to_id(segment))]
            basic_tokens.append(BasicToken(segment, (start, end), segment, pieces, special=True, unknown=None))
        else:
            normalizer = tokenizer.normalizer
            normalized.append(normalizer.normalize_str(segment) if normalizer is not None else segment)
            basic_tokens += _basic_tokens(tokenizer, segment, start)
    return SentenceStages(text, "".join(normalized), basic_tokens)


def _segments(tokenizer: Tokenizer, text: str) -> list[tuple[int, int, bool]]:
    """`text` cut into (start, end, is a special token) around the special tokens typed in it, found
    where `encode` finds them: it matches them before anything else and never normalises or splits them."""
    added = tokenizer.get_added_tokens_decoder()
    encoding = tokenizer.encode(text, add_special_tokens=False)
    specials = [(start, end) for id, (start, end) in zip(encoding.ids, encoding.offsets)
                if id in added and text[start:end] == added[id].content]
    segments, position = [], 0
    for start, end in specials:
        if position < start:
            segments.append((position, start, False))
        segments.append((start, end, True))
        position = end
    if position < len(text):
        segments.append((position, len(text), False))
    return segments


def _basic_tokens(tokenizer: Tokenizer, segment: str, offset: int) -> list[BasicToken]:
    """The normaliser, pre-tokenizer and WordPiece model run in place on a `PreTokenizedString`, which
    keeps every basic token's span in the original text (`pre_tokenize_str` would give spans in the
    normalised one)."""
    pretokenized = PreTokenizedString(segment)
    if tokenizer.normalizer is not None:
        pretokenized.normalize(tokenizer.normalizer.normalize)
    if tokenizer.pre_tokenizer is not None:
        tokenizer.pre_tokenizer.pre_tokenize(pretokenized)
    pretokenized.tokenize(tokenizer.model.tokenize)
    basic_tokens = []
    for word, (start, end), tokens in pretokenized.get_splits(offset_referential="original", offset_type="char"):
        pieces = [Piece(token.value, token.id) for token in tokens]
        basic_tokens.append(BasicToken(segment[start:end], (offset + start, offset + end), word, pieces,
                                       special=False, unknown=_unknown_reason(tokenizer.model, word, pieces)))
    return basic_tokens


def _unknown_reason(model: models.WordPiece, word: str, pieces: list[Piece]) -> str | None:
    if [piece.token for piece in pieces] != [model.unk_token]:
        return None
    if len(word) > model.max_input_chars_per_word:
        return f"longer than {model.max_input_chars_per_word} characters"
    return "cannot be spelt with the vocabulary's pieces"


def _final_sequence(encoding: Encoding, sentences: list[SentenceStages]) -> FinalSequence:
    staged_ids = [[piece.id for basic in sentence.basic_tokens for piece in basic.pieces] for sentence in sentences]
    encoded_ids = [[id for id, sequence in zip(encoding.ids, encoding.sequence_ids) if sequence == index]
                   for index in range(len(sentences))]
    if staged_ids != encoded_ids:
        raise CheckpointError("this tokenizer's stages do not add up to its encoding (a tokenizer.json with "
                              "extra added tokens or components BERT lacks?); expected a BERT WordPiece tokenizer")
    sources = [iter([(index, position) for position, basic in enumerate(sentence.basic_tokens) for _ in basic.pieces])
               for index, sentence in enumerate(sentences)]
    return FinalSequence(encoding.tokens, encoding.ids, encoding.type_ids,
                         [None if sequence is None else next(sources[sequence]) for sequence in encoding.sequence_ids])
