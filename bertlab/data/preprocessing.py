"""The cached steps that turn a pretraining corpus into sequences (bertlab.data.pretraining): lines into
documents, validation documents held out, a WordPiece vocabulary trained, token ids, packed sequences.

Every step is cached under `cache_dir` with a fingerprint made of the input's fingerprint, the step's
settings and the source of the pipeline's modules, so a second run with the same corpus and settings
reuses the arrow files, and an edit of the pipeline rebuilds them. The steps stream from arrow file to
arrow file, so memory does not grow with the corpus: grouping writes each document as it ends, tokenizing
and packing are batched `datasets.map`s (in `num_proc` processes), and the tokenizer trains on the
documents file.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path

import datasets
from datasets.fingerprint import Hasher
from tokenizers import Tokenizer

from bertlab import tokenizer as tokenizer_module
from bertlab import atomic_files
from bertlab.data import packing as packing_module
from bertlab.data import sources as sources_module
from bertlab.data.packing import MAX_DOCUMENT_CHARS, DocumentSentences, SequencePacker, group_documents, tokenize_batch
from bertlab.data.sources import require_columns, written_once
from bertlab.errors import DataError
from bertlab.tokenizer import WordPieceOptions, load_tokenizer, save_tokenizer, special_token_ids, train_tokenizer

logger = logging.getLogger(__name__)

# Share of the training documents held out for validation when the source has no validation split.
VALIDATION_FRACTION = 0.05
# Documents per `map` batch when tokenizing: a batch's encodings are all in memory at once.
TOKENIZE_BATCH_SIZE = 100
# Documents per `map` batch when packing.
PACKING_BATCH_SIZE = 256
# Cached tokenizers and datasets are keyed by the source of every module of the pipeline: a change
# to any of them rebuilds the cache.
_PIPELINE_SOURCE_HASH = Hasher.hash([Path(path).read_bytes() for path in (
    __file__, packing_module.__file__, sources_module.__file__, tokenizer_module.__file__)])


def step_fingerprint(dataset: datasets.Dataset, step: str, settings: object) -> str:
    return Hasher.hash([dataset._fingerprint, step, settings, _PIPELINE_SOURCE_HASH])


def read_documents(lines: datasets.Dataset, text_column: str, wrapped_lines: bool, cache_dir: Path, *,
                   max_lines: int | None, split: str, source: str) -> datasets.Dataset:
    """The documents of the first `max_lines` lines of `text_column` (bertlab.data.packing), one row of
    sentences each; `split` and `source` name the lines in error messages."""
    require_columns(lines, [text_column], source)
    if max_lines is not None:
        lines = lines.select(range(min(max_lines, len(lines))))
    # One pass in this process rather than a `map`: documents span rows, and map batches cannot share state.
    fingerprint = step_fingerprint(lines, "documents", (text_column, MAX_DOCUMENT_CHARS, wrapped_lines))
    text = (line for batch in lines.select_columns(text_column).iter(batch_size=1000)
            for line in batch[text_column])
    documents = written_once(
        cache_dir / f"documents-{fingerprint}.arrow",
        ({"sentences": document} for document in group_documents(text, wrapped_lines)),
        datasets.Features({"sentences": datasets.Sequence(datasets.Value("string"))}), fingerprint,
    )
    if len(documents) == 0:
        raise DataError(f"{split} split of {source!r} has no text in column {text_column!r}")
    return documents


def hold_out_validation(documents: datasets.Dataset, seed: int, cache_dir: Path,
                        source: str) -> dict[str, datasets.Dataset]:
    """VALIDATION_FRACTION of the training `documents`, drawn with `seed`, as the validation split."""
    # Two at least, so that next-sentence prediction can draw B from another document.
    num_held_out = max(2, round(VALIDATION_FRACTION * len(documents)))
    if len(documents) <= num_held_out:
        raise DataError(
            f"pretraining corpus {source!r} has no validation split and only {len(documents)} "
            "document(s) to hold some out from; add a validation file (validation.txt) or more text"
        )
    fingerprint = Hasher.hash([documents._fingerprint, "hold-out", num_held_out, seed])
    entries = [cache_dir / f"holdout-{split}-{fingerprint}.arrow" for split in ("train", "validation")]
    committed = all([atomic_files.is_committed(entry) for entry in entries])
    splits = documents.train_test_split(
        test_size=num_held_out,
        seed=seed,
        train_indices_cache_file_name=str(entries[0]),
        test_indices_cache_file_name=str(entries[1]),
        train_new_fingerprint=Hasher.hash([fingerprint, "train"]),
        test_new_fingerprint=Hasher.hash([fingerprint, "validation"]),
        load_from_cache_file=committed,
    )
    if not committed:
        for entry in entries:
            atomic_files.commit(entry)
    logger.info(
        "%s has no validation split: holding out %d of %d documents", source, num_held_out, len(documents)
    )
    return {"train": splits["train"], "validation": splits["test"]}


def trained_tokenizer(documents: datasets.Dataset, vocab_size: int, options: WordPieceOptions, cache_dir: Path,
                      source: str) -> Tokenizer:
    """A WordPiece vocabulary of `vocab_size` trained on the sentences of `documents`, once."""
    fingerprint = Hasher.hash(
        [documents._fingerprint, vocab_size, dataclasses.astuple(options), _PIPELINE_SOURCE_HASH]
    )
    directory = cache_dir / f"tokenizer-{fingerprint}"
    if atomic_files.is_committed(directory):
        return load_tokenizer(directory)
    tokenizer = train_tokenizer(DocumentSentences(documents), vocab_size, **dataclasses.asdict(options))
    save_tokenizer(tokenizer, directory)
    atomic_files.commit(directory)
    logger.info(
        "trained a %d-token WordPiece vocabulary on %s, saved to %s",
        tokenizer.get_vocab_size(), source, directory,
    )
    return tokenizer


def packed_sequences(documents: datasets.Dataset, tokenizer: Tokenizer, cache_dir: Path, num_proc: int | None, *,
                     max_seq_length: int, short_seq_prob: float, nsp: bool, seed: int, copy_pair_prob: float,
                     copy_drop_prob: float, source: str) -> datasets.Dataset:
    """The token ids of `documents`' sentences, packed into sequences (bertlab.data.packing.SequencePacker)."""
    tokenized = cached_map(
        documents, tokenize_batch, "tokens", tokenizer.to_str(), cache_dir, num_proc,
        batch_size=TOKENIZE_BATCH_SIZE, remove_columns=documents.column_names, fn_kwargs={"tokenizer": tokenizer},
        features=datasets.Features({"input_ids": datasets.Sequence(datasets.Sequence(datasets.Value("int32")))}),
    )
    if nsp and len(tokenized) < 2:
        raise DataError(
            f"next-sentence prediction needs at least 2 documents; {source!r} gives {len(tokenized)}"
        )
    ids = special_token_ids(tokenizer)
    packer = SequencePacker(
        tokenized, max_seq_length=max_seq_length, short_seq_prob=short_seq_prob, nsp=nsp,
        seed=seed, cls_token_id=ids["cls"], sep_token_id=ids["sep"],
        copy_pair_prob=copy_pair_prob, copy_drop_prob=copy_drop_prob,
    )
    features = {
        "input_ids": datasets.Sequence(datasets.Value("int32")),
        "token_type_ids": datasets.Sequence(datasets.Value("int8")),
    }
    if nsp:
        features["next_sentence_label"] = datasets.Value("int8")
    settings = (max_seq_length, short_seq_prob, nsp, seed)
    if copy_pair_prob:  # without copies, the fingerprint (and the cached file) of earlier versions
        settings += (copy_pair_prob, copy_drop_prob)
    return cached_map(
        tokenized, packer, "sequences", settings, cache_dir, num_proc,
        with_indices=True, batch_size=PACKING_BATCH_SIZE, remove_columns=tokenized.column_names,
        features=datasets.Features(features),
    )


def cached_map(
    dataset: datasets.Dataset, function: Callable, step: str, settings: object, cache_dir: Path,
    num_proc: int | None, **map_kwargs
) -> datasets.Dataset:
    """`dataset.map(function, batched=True)` in `num_proc` processes (each maps a contiguous shard),
    cached in cache_dir under a fingerprint of its inputs, as a committed cache entry."""
    fingerprint = step_fingerprint(dataset, step, settings)
    entry = cache_dir / f"{step}-{fingerprint}.arrow"
    committed = atomic_files.is_committed(entry)
    mapped = dataset.map(
        function,
        batched=True,
        num_proc=num_proc,
        new_fingerprint=fingerprint,
        cache_file_name=str(entry),
        load_from_cache_file=committed,
        desc=f"bertlab: {step}",
        **map_kwargs,
    )
    if not committed:
        atomic_files.commit(entry, [file["filename"] for file in mapped.cache_files])
    return mapped
