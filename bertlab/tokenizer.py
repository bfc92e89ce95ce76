"""BERT WordPiece tokenizers: train, load and save them in the Hugging Face layout.

A tokenizer is a `tokenizers.Tokenizer` with BERT's normalisation (clean-up, Chinese characters
split, optional lower-casing and accent stripping), BERT's pre-tokenizer, a WordPiece model with "##"
continuation pieces and a `[CLS] A [SEP] B [SEP]` post-processor, so `tok.encode(a, b)` gives the
same ids and type ids as `transformers.BertTokenizerFast`. `WordPieceOptions` are the settings of
transformers' BasicTokenizer and WordpieceTokenizer; `BertTokenizer` wraps a tokenizer with
transformers' token-level methods.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from bertlab.argument_checks import Count, Tokens, check_rules, checks_arguments
from bertlab.errors import CheckpointError, ConfigError, DataError
from bertlab.value_rules import Interval, base_types, field_annotations, is_of

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
_SPECIAL_TOKEN_KEYS = ("pad", "unk", "cls", "sep", "mask")
_CONTINUATION_PREFIX = "##"
ALPHABET_SIZE = 1000  # the most frequent characters, each a piece of the vocabulary (the trainer's limit_alphabet)
OPTION_TYPE_WORDS = {"lowercase": "true or false", "tokenize_chinese_chars": "true or false",
                     "strip_accents": "true, false or null (null: strip accents when lower-casing)",
                     "max_input_chars_per_word": "a whole number of characters"}


@checks_arguments
@dataclass(frozen=True)
class WordPieceOptions:
    """How a tokenizer normalises and splits text: the options of transformers' BasicTokenizer and
    WordpieceTokenizer under their names (`lowercase` is its `do_lower_case`), checked here: they are also read
    back from saved tokenizers."""
    lowercase: bool = True
    strip_accents: bool | None = None  # None: strip them when lower-casing, as BERT's uncased models do
    tokenize_chinese_chars: bool = True  # each CJK character a word of its own
    # Kept whole and never normalised: special tokens, ids after [MASK].
    never_split: Annotated[tuple[str, ...], Tokens("[URL]")] = ()
    max_input_chars_per_word: Count = 100  # a longer word becomes [UNK]

    def __post_init__(self) -> None:
        # Each type is its field's annotation (its rules are checked at the call); these are a message's words.
        for name, expected in OPTION_TYPE_WORDS.items():
            if not is_of(value := getattr(self, name), base_types(field_annotations(WordPieceOptions)[name])):
                raise ConfigError(f"tokenizer.{name}={value!r}: expected {expected}")
        never_split = dict.fromkeys(token for token in self.never_split if token not in SPECIAL_TOKENS)
        object.__setattr__(self, "never_split", tuple(never_split))  # a config's list, once each, in order


def train_tokenizer(
    texts: Iterable[str], vocab_size: int, min_frequency: int = 2, lowercase: bool = True, *,
    strip_accents: bool | None = None, tokenize_chinese_chars: bool = True, never_split: Iterable[str] = (),
    max_input_chars_per_word: int = 100,
) -> Tokenizer:
    """Train a WordPiece vocabulary of at most `vocab_size` entries; special tokens get ids 0..4, the
    `never_split` tokens the ids after them. The keyword options are `WordPieceOptions`'.

    The same texts give the same vocabulary, ids included. `tokenizers` numbers the "##c" pieces in
    hash-map order and breaks ties between equally frequent merges by those numbers
    (huggingface/tokenizers#1794), so the trainer gets them up front, sorted, as extra special
    tokens; the tokenizer returned has only BERT's own and the never-split ones. `texts` is read
    twice (an iterator is turned into a list first).
    """
    options = WordPieceOptions(lowercase, strip_accents, tokenize_chinese_chars, never_split, max_input_chars_per_word)
    reserved = len(SPECIAL_TOKENS) + len(options.never_split)
    check_rules("vocab_size", vocab_size, [Interval(f"({reserved}, inf)", whole=True,
                                                    says=f"more than the {reserved} special and never-split tokens")])
    if iter(texts) is texts:
        texts = list(texts)
    tokenizer = _bert_tokenizer(options=options)
    alphabet, continuations = _alphabet_and_continuations(tokenizer, texts)
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[*SPECIAL_TOKENS, *options.never_split, *continuations],
        initial_alphabet=alphabet,
        limit_alphabet=ALPHABET_SIZE,
        continuing_subword_prefix=_CONTINUATION_PREFIX,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    if tokenizer.get_vocab_size() <= reserved:
        raise DataError("cannot train a tokenizer: the training texts contain no words")
    return _bert_tokenizer(tokenizer.get_vocab(), options=options)


def _alphabet_and_continuations(tokenizer: Tokenizer, texts: Iterable[str]) -> tuple[list[str], list[str]]:
    """The ALPHABET_SIZE most frequent characters of the words of `texts`, ties broken by code point, and
    "##c" for every character c that follows another inside a word, sorted. The trainer's own cut to
    `limit_alphabet` breaks ties in hash-map order, so on a corpus of more characters than that each process
    trained another vocabulary; given as its initial alphabet, these are exactly the characters it keeps."""
    counts, followers = Counter(), set()
    for text in texts:
        words = [word for word, _ in tokenizer.pre_tokenizer.pre_tokenize_str(tokenizer.normalizer.normalize_str(text))]
        counts.update("".join(words))
        for word in words:
            followers.update(word[1:])
    alphabet = sorted(counts, key=lambda character: (-counts[character], character))[:ALPHABET_SIZE]
    return alphabet, [_CONTINUATION_PREFIX + character for character in sorted(followers)]


def load_tokenizer(path: str | Path) -> Tokenizer:
    """Load a tokenizer from a directory (tokenizer.json preferred, else vocab.txt) or either file.

    Truncation and padding stored in a tokenizer.json are switched off, as transformers does when
    it encodes without `truncation`/`padding`: bertlab packs and pads sequences itself.
    """
    path = Path(path)
    if path.is_dir():
        candidates = [path / "tokenizer.json", path / "vocab.txt"]
        file = next((candidate for candidate in candidates if candidate.is_file()), None)
        if file is None:
            raise CheckpointError(f"no tokenizer in {path}: expected tokenizer.json or vocab.txt there")
    elif path.is_file():
        file = path
    else:
        raise CheckpointError(
            f"tokenizer path {path} does not exist: expected a directory with tokenizer.json or "
            "vocab.txt, or one of those files"
        )
    tokenizer = _load_vocab_txt(file) if file.suffix == ".txt" else _load_tokenizer_json(file)
    missing = [token for token in SPECIAL_TOKENS if tokenizer.token_to_id(token) is None]
    if missing:
        raise CheckpointError(
            f"tokenizer {file} lacks the special token(s) {missing}; BERT needs {list(SPECIAL_TOKENS)}"
        )
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def save_tokenizer(tokenizer: Tokenizer, directory: str | Path, *, model_input_names: list[str] | None = None) -> None:
    """Write tokenizer.json, vocab.txt, tokenizer_config.json and special_tokens_map.json.
    `model_input_names`: the inputs transformers' tokenizers are to make (its default: ids, token types, mask).

    tokenizer_config.json repeats the normaliser's and the model's settings: `BertTokenizerFast`
    rebuilds the normaliser from them when they disagree with tokenizer.json, `BertTokenizer` reads
    nothing else. The never-split tokens are also its `additional_special_tokens`: transformers keeps
    those whole wherever they stand and never lower-cases them, as `tokenizers` does its special tokens.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(directory / "tokenizer.json"))
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    tokens_by_id = sorted(vocab, key=vocab.__getitem__)
    if [vocab[token] for token in tokens_by_id] != list(range(len(tokens_by_id))):
        raise CheckpointError(
            f"cannot write {directory / 'vocab.txt'}: the tokenizer's ids are not contiguous from 0"
        )
    (directory / "vocab.txt").write_text("".join(f"{token}\n" for token in tokens_by_id), encoding="utf-8")
    never_split = [token.content for _, token in sorted(tokenizer.get_added_tokens_decoder().items())
                   if token.special and token.content not in SPECIAL_TOKENS]
    special_tokens_map = {**{f"{key}_token": token for key, token in zip(_SPECIAL_TOKEN_KEYS, SPECIAL_TOKENS)},
                          "additional_special_tokens": never_split}
    normalizer = json.loads(tokenizer.to_str()).get("normalizer") or {}
    config = {
        "tokenizer_class": "BertTokenizer",
        "do_lower_case": normalizer.get("lowercase", False),
        "strip_accents": normalizer.get("strip_accents"),
        "tokenize_chinese_chars": normalizer.get("handle_chinese_chars", True),
        "never_split": never_split,
        # BertTokenizer (the slow one) always takes 100; BertTokenizerFast reads tokenizer.json's.
        "max_input_chars_per_word": getattr(tokenizer.model, "max_input_chars_per_word", 100),
        **special_tokens_map,
        **({"model_input_names": model_input_names} if model_input_names else {}),
    }
    for name, content in (("tokenizer_config.json", config), ("special_tokens_map.json", special_tokens_map)):
        (directory / name).write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")


class BertTokenizer:
    """transformers' token-level methods over a bertlab tokenizer, the `tokenizers.Tokenizer` in
    `backend_tokenizer` (as `BertTokenizerFast` holds one): `tokenize`, `convert_tokens_to_ids`,
    `convert_ids_to_tokens`. Unknown tokens map to [UNK]'s id; an id outside the vocabulary is an error."""

    def __init__(self, backend_tokenizer: Tokenizer):
        self.backend_tokenizer = backend_tokenizer

    @classmethod
    def from_pretrained(cls, path: str | Path) -> BertTokenizer:
        """A checkpoint folder, a tokenizer.json or a vocab.txt, as `load_tokenizer` reads them."""
        return cls(load_tokenizer(path))

    def save_pretrained(self, directory: str | Path) -> None:
        save_tokenizer(self.backend_tokenizer, directory)

    def tokenize(self, text: str, pair: str | None = None, add_special_tokens: bool = False) -> list[str]:
        return self.backend_tokenizer.encode(text, pair, add_special_tokens=add_special_tokens).tokens

    def convert_tokens_to_ids(self, tokens: str | Iterable[str]) -> int | list[int]:
        if isinstance(tokens, str):
            token_id = self.backend_tokenizer.token_to_id(tokens)
            return special_token_ids(self.backend_tokenizer)["unk"] if token_id is None else token_id
        return [self.convert_tokens_to_ids(token) for token in tokens]

    def convert_ids_to_tokens(self, ids: int | Iterable[int], skip_special_tokens: bool = False) -> str | list[str]:
        if isinstance(ids, int):
            token = self.backend_tokenizer.id_to_token(ids)
            if token is None:
                raise ValueError(f"token id {ids} is outside the vocabulary: expected 0 to "
                                 f"{self.backend_tokenizer.get_vocab_size() - 1}")
            return token
        special = {id for id, token in self.backend_tokenizer.get_added_tokens_decoder().items() if token.special}
        return [self.convert_ids_to_tokens(int(id)) for id in ids if not (skip_special_tokens and int(id) in special)]


def special_token_ids(tokenizer: Tokenizer) -> dict[str, int]:
    """Ids of the special tokens, keyed pad, unk, cls, sep, mask."""
    ids = {key: tokenizer.token_to_id(token) for key, token in zip(_SPECIAL_TOKEN_KEYS, SPECIAL_TOKENS)}
    missing = [token for key, token in zip(_SPECIAL_TOKEN_KEYS, SPECIAL_TOKENS) if ids[key] is None]
    if missing:
        raise CheckpointError(f"tokenizer lacks the special token(s) {missing}; BERT needs {list(SPECIAL_TOKENS)}")
    return ids


def _add_bert_post_processor(tokenizer: Tokenizer) -> None:
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )


def _load_tokenizer_json(file: Path) -> Tokenizer:
    try:
        return Tokenizer.from_file(str(file))
    except Exception as error:  # tokenizers raises plain Exception for unreadable or malformed files
        raise CheckpointError(f"cannot read tokenizer file {file}: {error}") from error


def _load_vocab_txt(file: Path) -> Tokenizer:
    """A vocab.txt alone: one token per line, id = line number; settings from a tokenizer_config.json beside it."""
    try:
        tokens = file.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as error:
        raise CheckpointError(f"cannot read vocabulary file {file}: {error}") from error
    if tokens and tokens[-1] == "":
        tokens.pop()
    if not tokens:
        raise CheckpointError(f"vocabulary file {file} is empty: expected one WordPiece token per line")
    settings = file.parent / "tokenizer_config.json"
    config = _read_tokenizer_config(settings)
    try:
        options = WordPieceOptions(
            lowercase=config.get("do_lower_case", True),
            strip_accents=config.get("strip_accents"),
            tokenize_chinese_chars=config.get("tokenize_chinese_chars", True),
            never_split=config.get("never_split") or (),
            max_input_chars_per_word=config.get("max_input_chars_per_word", 100),
        )
    except ConfigError as error:
        raise CheckpointError(f"tokenizer settings {settings}: {error}") from None
    return _bert_tokenizer({token: index for index, token in enumerate(tokens)}, options=options)


def _bert_tokenizer(vocab: dict[str, int] | None = None, *, options: WordPieceOptions) -> Tokenizer:
    """BERT's normaliser, pre-tokenizer and decoder around a WordPiece model of `vocab` (None: an
    empty one, to train); its special and never-split tokens are added, and the [CLS] A [SEP]
    post-processor."""
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", continuing_subword_prefix=_CONTINUATION_PREFIX,
                                           max_input_chars_per_word=options.max_input_chars_per_word))
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=options.tokenize_chinese_chars, strip_accents=options.strip_accents,
        lowercase=options.lowercase,
    )
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(prefix=_CONTINUATION_PREFIX)
    if vocab:
        tokenizer.add_special_tokens([token for token in (*SPECIAL_TOKENS, *options.never_split) if token in vocab])
        if "[CLS]" in vocab and "[SEP]" in vocab:
            _add_bert_post_processor(tokenizer)
    return tokenizer


def _read_tokenizer_config(file: Path) -> dict:
    if not file.is_file():
        return {}
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise CheckpointError(f"cannot read tokenizer settings {file}: {error}") from error
