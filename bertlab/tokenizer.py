"""BERT WordPiece tokenizers: train, load and save them in the Hugging Face layout.

A tokenizer is a `tokenizers.Tokenizer` with BERT's normalisation (clean-up, Chinese characters
split, optional lower-casing + accent stripping), BERT's pre-tokenizer, a WordPiece model with "##"
continuation pieces and a `[CLS] A [SEP] B [SEP]` post-processor, so `tok.encode(a, b)` gives the
same ids and type ids as `transformers.BertTokenizerFast`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from bertlab.errors import CheckpointError, ConfigError, DataError

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
_SPECIAL_TOKEN_KEYS = ("pad", "unk", "cls", "sep", "mask")
_CONTINUATION_PREFIX = "##"


def train_tokenizer(
    texts: Iterable[str], vocab_size: int, min_frequency: int = 2, lowercase: bool = True
) -> Tokenizer:
    """Train a WordPiece vocabulary of at most `vocab_size` entries; special tokens get ids 0..4.

    The same texts give the same vocabulary, ids included. `tokenizers` numbers the "##c" pieces in
    hash-map order and breaks ties between equally frequent merges by those numbers
    (huggingface/tokenizers#1794), so the trainer gets them up front, sorted, as extra special
    tokens; the tokenizer returned has only BERT's own. `texts` is read twice (an iterator is
    turned into a list first).
    """
    if vocab_size <= len(SPECIAL_TOKENS):
        raise ConfigError(f"vocab_size must exceed the {len(SPECIAL_TOKENS)} special tokens, got {vocab_size}")
    if iter(texts) is texts:
        texts = list(texts)
    tokenizer = _bert_tokenizer(lowercase=lowercase)
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[*SPECIAL_TOKENS, *_continuation_pieces(tokenizer, texts)],
        limit_alphabet=1000,
        continuing_subword_prefix=_CONTINUATION_PREFIX,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    if tokenizer.get_vocab_size() <= len(SPECIAL_TOKENS):
        raise DataError("cannot train a tokenizer: the training texts contain no words")
    return _bert_tokenizer(tokenizer.get_vocab(), lowercase=lowercase)


def _continuation_pieces(tokenizer: Tokenizer, texts: Iterable[str]) -> list[str]:
    """"##c" for every character c that follows another inside a word of `texts`, sorted."""
    characters = set()
    for text in texts:
        for word, _ in tokenizer.pre_tokenizer.pre_tokenize_str(tokenizer.normalizer.normalize_str(text)):
            characters.update(word[1:])
    return [_CONTINUATION_PREFIX + character for character in sorted(characters)]


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


def save_tokenizer(tokenizer: Tokenizer, directory: str | Path) -> None:
    """Write tokenizer.json, vocab.txt, tokenizer_config.json and special_tokens_map.json.

    tokenizer_config.json repeats the normaliser's settings: `BertTokenizerFast` rebuilds the
    normaliser from them when they disagree with tokenizer.json.
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
    special_tokens_map = {f"{key}_token": token for key, token in zip(_SPECIAL_TOKEN_KEYS, SPECIAL_TOKENS)}
    normalizer = json.loads(tokenizer.to_str()).get("normalizer") or {}
    config = {
        "tokenizer_class": "BertTokenizer",
        "do_lower_case": normalizer.get("lowercase", False),
        "strip_accents": normalizer.get("strip_accents"),
        "tokenize_chinese_chars": normalizer.get("handle_chinese_chars", True),
        **special_tokens_map,
    }
    for name, content in (("tokenizer_config.json", config), ("special_tokens_map.json", special_tokens_map)):
        (directory / name).write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")


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
    config = _read_tokenizer_config(file.parent / "tokenizer_config.json")
    return _bert_tokenizer(
        {token: index for index, token in enumerate(tokens)},
        lowercase=config.get("do_lower_case", True),
        strip_accents=config.get("strip_accents"),
        handle_chinese_chars=config.get("tokenize_chinese_chars", True),
    )


def _bert_tokenizer(vocab: dict[str, int] | None = None, *, lowercase: bool, strip_accents: bool | None = None,
                    handle_chinese_chars: bool = True) -> Tokenizer:
    """BERT's normaliser, pre-tokenizer and decoder around a WordPiece model of `vocab` (None: an
    empty one, to train); its special tokens are added, and the [CLS] A [SEP] post-processor."""
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", continuing_subword_prefix=_CONTINUATION_PREFIX))
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=handle_chinese_chars, strip_accents=strip_accents, lowercase=lowercase
    )
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(prefix=_CONTINUATION_PREFIX)
    if vocab:
        tokenizer.add_special_tokens([token for token in SPECIAL_TOKENS if token in vocab])
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
