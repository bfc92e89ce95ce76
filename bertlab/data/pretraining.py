"""Pretraining data: text lines -> documents -> token ids -> `[CLS] A [SEP] B [SEP]` sequences -> batches.

Every step is cached under `cache_dir` with a fingerprint made of the input's fingerprint, the step's
settings and this file's source, so a second run with the same corpus and settings reuses the arrow
files, and an edit of this file rebuilds them. The steps stream from arrow file to arrow file, so
memory does not grow with the corpus: grouping writes each document as it ends, tokenizing and packing
are batched `datasets.map`s (in `num_proc` processes), and the tokenizer trains on the documents file.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import datasets
import lightning as L
import numpy as np
import pyarrow.compute as pc
import torch
from datasets.fingerprint import Hasher
from tokenizers import Tokenizer
from torch.utils.data import DataLoader

from bertlab import tokenizer as tokenizer_module
from bertlab.data import cache_entries
from bertlab.data import sources as sources_module
from bertlab.data.sampling import LengthGroupedSampler, ResumableTrainingOrder
from bertlab.data.sources import cache_folder, load_dataset_source, require_columns, written_once
from bertlab.errors import ConfigError, DataError
from bertlab.metrics import TEXT_VALIDATION, VALIDATION
from bertlab.tokenizer import WordPieceOptions, load_tokenizer, save_tokenizer, special_token_ids, train_tokenizer
from bertlab.value_rules import Count, Probability, SequenceLength, Workers

logger = logging.getLogger(__name__)

# A document closes at the first paragraph boundary after this many characters: about the size of
# an average WikiText article (~3.5k words), so long books become chapter-sized documents.
MAX_DOCUMENT_CHARS = 32_000
# Share of the training documents held out for validation when the source has no validation split.
VALIDATION_FRACTION = 0.05
# Documents per `map` batch when tokenizing: a batch's encodings are all in memory at once.
TOKENIZE_BATCH_SIZE = 100
# Documents per `map` batch when packing.
PACKING_BATCH_SIZE = 256
# The split of the validation documents packed as the training ones are, when those are copied pairs.
TRAINING_STYLE_VALIDATION = "validation_training_style"

_HEADING = re.compile(r"^(?P<marks>(?:= )+)(?P<title>.*?)(?: =)+$")
# Split after ., ! or ?, also when a closing quote or bracket follows them.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[.!?][\"'”’)])\s+")
# Cached tokenizers and datasets are keyed by the source of every module of the pipeline: a change
# to any of them rebuilds the cache.
_PIPELINE_SOURCE_HASH = Hasher.hash([Path(path).read_bytes()
                                     for path in (__file__, sources_module.__file__, tokenizer_module.__file__)])


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


def _step_fingerprint(dataset: datasets.Dataset, step: str, settings: object) -> str:
    return Hasher.hash([dataset._fingerprint, step, settings, _PIPELINE_SOURCE_HASH])


class _Sentences:
    """The sentences of a documents dataset, readable more than once (the tokenizer trainer reads them twice)."""

    def __init__(self, documents: datasets.Dataset):
        self.documents = documents

    def __iter__(self) -> Iterator[str]:
        for batch in self.documents.iter(batch_size=1000):
            for document in batch["sentences"]:
                yield from document


def _tokenize_batch(batch: dict[str, list], tokenizer: Tokenizer) -> dict[str, list]:
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


@dataclass(frozen=True)
class PretrainingCollator:
    """Pads sequences to the longest in the batch (or to `pad_to_length`, so that every batch has one
    shape) and adds attention and special-token masks.

    Specials are found by position (first token, last token, end of segment A) rather than by id,
    so a literal "[SEP]" in the text stays maskable text. With `is_continuation` (a bool per
    vocabulary id, true for "##" pieces) it adds `word_ids`: a word is a token plus the
    continuation pieces after it; specials and padding get -1.
    """

    pad_token_id: int
    is_continuation: np.ndarray | None = None
    pad_to_length: int | None = None

    def __call__(self, rows: list[dict[str, np.ndarray]]) -> dict[str, torch.Tensor]:
        lengths = np.array([len(row["input_ids"]) for row in rows])
        positions = np.arange(max(lengths.max(), self.pad_to_length or 0))[None, :]
        filled = positions < lengths[:, None]
        input_ids = np.full(filled.shape, self.pad_token_id, dtype=np.int64)
        input_ids[filled] = np.concatenate([row["input_ids"] for row in rows])
        token_type_ids = np.zeros(filled.shape, dtype=np.int64)
        token_type_ids[filled] = np.concatenate([row["token_type_ids"] for row in rows])
        first_sep = ((token_type_ids == 0) & filled).sum(axis=1, keepdims=True) - 1
        special = (positions == 0) | (positions == first_sep) | (positions == lengths[:, None] - 1) | ~filled
        batch = {
            "input_ids": torch.from_numpy(input_ids),
            "attention_mask": torch.from_numpy(filled.astype(np.int64)),
            "token_type_ids": torch.from_numpy(token_type_ids),
            "special_tokens_mask": torch.from_numpy(special),
        }
        if self.is_continuation is not None:
            word_ids = np.cumsum(~self.is_continuation[input_ids] | special, axis=1) - 1
            word_ids[special] = -1
            batch["word_ids"] = torch.from_numpy(word_ids)
        if "next_sentence_label" in rows[0]:
            batch["next_sentence_label"] = torch.tensor([int(row["next_sentence_label"]) for row in rows])
        return batch


class PretrainingDataModule(ResumableTrainingOrder, L.LightningDataModule):
    """Masked-language-model (and optionally next-sentence) pretraining batches from a text corpus.

    `source` is anything `load_dataset_source` reads; its `text_column` is a stream of lines (see
    `group_documents`, `wrapped_lines`). `validation_source` replaces the corpus's validation text: a
    file, or a source whose validation split is read. Without `tokenizer_path` a WordPiece vocabulary of `vocab_size` is trained
    on the training split, with the options `lowercase` to `max_input_chars_per_word`
    (`bertlab.tokenizer.WordPieceOptions`). Without a validation split, VALIDATION_FRACTION of the training
    documents are held out. With `copy_pair_prob`, the validation documents are packed twice: as plain
    text and, like the training ones, with copied pairs (split TRAINING_STYLE_VALIDATION); `val_dataloader`
    then gives both. `max_train_lines` / `max_eval_lines` keep only the first lines (quick
    runs). Cached arrow files and trained tokenizers go to `cache_dir` (default: the `datasets`
    cache folder + "/bertlab"). Batches: see `PretrainingCollator`; masking happens in the
    training step (`bertlab.lit.masking.mask_tokens`). `pad_to_max_length` pads every batch to
    `max_seq_length` and leaves out each epoch's short last training batch: one shape for torch.compile
    (with task.static_masking). `num_proc` processes
    tokenize and pack (None: this one alone). Given the tokenizer, the sequences and the training order
    depend only on `seed`, not on `num_proc`.
    """

    def __init__(
        self,
        source: str,
        tokenizer_path: str | None = None,
        vocab_size: int = 8192,
        lowercase: bool = True,
        strip_accents: bool | None = None,
        tokenize_chinese_chars: bool = True,
        never_split: Sequence[str] = (),
        max_input_chars_per_word: int = 100,
        max_seq_length: SequenceLength = 128,
        short_seq_prob: Probability = 0.1,
        nsp: bool = False,
        whole_word_masking: bool = False,
        pad_to_max_length: bool = False,
        batch_size: Count = 32,
        eval_batch_size: Count | None = None,
        num_workers: Workers = 0,
        seed: int = 0,
        max_train_lines: Count | None = None,
        max_eval_lines: Count | None = None,
        cache_dir: str | None = None,
        text_column: str = "text",
        extra_train_sources: list[dict] | None = None,
        validation_source: str | None = None,
        wrapped_lines: bool = False,
        num_proc: Count | None = None,
        copy_pair_prob: Probability = 0.0,
        copy_drop_prob: Probability = 0.15,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.source = source
        self.tokenizer_path = tokenizer_path
        self.vocab_size = vocab_size
        self.tokenizer_options = WordPieceOptions(lowercase, strip_accents, tokenize_chinese_chars, never_split,
                                                  max_input_chars_per_word)
        self.max_seq_length = max_seq_length
        self.short_seq_prob = short_seq_prob
        self.nsp = nsp
        self.whole_word_masking = whole_word_masking
        self.pad_to_max_length = pad_to_max_length
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size or batch_size
        self.num_workers = num_workers
        self.seed = seed
        self.max_train_lines = max_train_lines
        self.max_eval_lines = max_eval_lines
        self.cache_dir = cache_folder(cache_dir)
        self.text_column = text_column
        self.extra_train_sources = [dict(extra) for extra in extra_train_sources or []]
        for extra in self.extra_train_sources:
            if set(extra) - {"source", "text_column"} or "source" not in extra:
                raise ConfigError(f"data.extra_train_sources: expected entries {{source, text_column}}, got {extra}")
        self.validation_source = validation_source
        self.wrapped_lines = wrapped_lines
        self.num_proc = num_proc
        self.copy_pair_prob = copy_pair_prob
        self.copy_drop_prob = copy_drop_prob
        self.tokenizer: Tokenizer | None = None
        self.collator: PretrainingCollator | None = None
        self.datasets: dict[str, datasets.Dataset] = {}

    def prepare_data(self) -> None:
        """Build everything once on the main process, so that in multi-process runs every process's
        `setup` loads the cached tokenizer and data instead of building them again."""
        self.setup()

    def setup(self, stage: str | None = None) -> None:
        if self.datasets:
            return
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        corpus = load_dataset_source(self.source, what="pretraining corpus", cache_dir=self.cache_dir)
        if "train" not in corpus:
            raise DataError(f"pretraining corpus {self.source!r} has no train split (found {list(corpus)})")
        documents = {"train": self._documents(corpus["train"], "train", self.max_train_lines)}
        if self.extra_train_sources:
            documents["train"] = datasets.concatenate_datasets([documents["train"], *self._extra_documents()])
        if self.validation_source:
            documents["validation"] = self._documents(self._validation_lines(), "validation", self.max_eval_lines,
                                                      source=self.validation_source)
        elif "validation" in corpus:
            documents["validation"] = self._documents(corpus["validation"], "validation", self.max_eval_lines)
        else:
            documents = self._hold_out_validation(documents["train"])
        self.tokenizer = self._load_or_train_tokenizer(documents["train"])
        self.collator = self._make_collator(self.tokenizer)
        if self.copy_pair_prob:  # validation text as the training sequences are built, beside it as plain text
            documents[TRAINING_STYLE_VALIDATION] = documents["validation"]
        for split, documents_of_split in documents.items():
            copy_pair_prob = self.copy_pair_prob if split in ("train", TRAINING_STYLE_VALIDATION) else 0.0
            sequences = self._sequences(documents_of_split, self.tokenizer, copy_pair_prob)
            num_tokens = pc.sum(pc.list_value_length(sequences.data.column("input_ids"))).as_py()
            source = self.validation_source if split != "train" and self.validation_source else self.source
            logger.info(
                "%s split of %s: %d documents, %d sequences, %d tokens",
                split, source, len(documents_of_split), len(sequences), num_tokens,
            )
            self.datasets[split] = sequences.with_format("numpy")

    def token_counts(self) -> np.ndarray:
        """Occurrences of each vocabulary id in the training sequences, [CLS] and [SEP] included."""
        ids = pc.list_flatten(self._train_input_ids()).to_numpy()
        return np.bincount(ids, minlength=self.tokenizer.get_vocab_size())

    def _train_input_ids(self):
        return self._dataset("train").with_format("arrow")["input_ids"]

    def train_dataloader(self) -> DataLoader:
        # Length-grouped, seeded by (seed, epoch), sharded across processes and resumable mid-epoch. Padded
        # to one length, batches also keep one row count: a short last batch would make compile recompile.
        lengths = pc.list_value_length(self._train_input_ids()).to_numpy()
        sampler = self.training_sampler(lengths, self.batch_size, self.seed, drop_short_batch=self.pad_to_max_length)
        return self._loader("train", self.batch_size, sampler)

    def val_dataloader(self) -> DataLoader | dict[str, DataLoader]:
        """The validation sequences; when the training ones are copied pairs, a dict by validation set
        (bertlab.metrics.VALIDATION_SETS): the plain text first, which keeps the masks (seeded by the
        dataloader's index) that it had as the only one, then the same text as copied pairs."""
        plain = self._loader("validation", self.eval_batch_size, None)
        if TRAINING_STYLE_VALIDATION not in self.datasets:
            return plain
        training_style = self._loader(TRAINING_STYLE_VALIDATION, self.eval_batch_size, None)
        return {TEXT_VALIDATION: plain, VALIDATION: training_style}

    def _dataset(self, split: str) -> datasets.Dataset:
        if split not in self.datasets:
            raise RuntimeError(f"call setup() before asking for the {split} dataloader")
        return self.datasets[split]

    def _loader(self, split: str, batch_size: int, sampler: LengthGroupedSampler | None) -> DataLoader:
        return DataLoader(
            self._dataset(split),
            batch_size=batch_size,
            sampler=sampler,
            collate_fn=self.collator,
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
        )

    def _extra_documents(self) -> list[datasets.Dataset]:
        """Documents from the training splits of `extra_train_sources` (e.g. a fine-tuning task's
        unlabelled training sentences, for in-domain pretraining)."""
        extra_documents = []
        for extra in self.extra_train_sources:
            text = load_dataset_source(extra["source"], what="extra pretraining text", cache_dir=self.cache_dir)
            if "train" not in text:
                raise DataError(f"data.extra_train_sources: {extra['source']!r} has no train split (found {list(text)})")
            extra_documents.append(self._documents(text["train"], "train", self.max_train_lines,
                                                   extra.get("text_column", "text"), extra["source"]))
        return extra_documents

    def _validation_lines(self) -> datasets.Dataset:
        splits = load_dataset_source(self.validation_source, what="pretraining validation text",
                                     cache_dir=self.cache_dir)
        if "validation" in splits:
            return splits["validation"]
        if list(splits) == ["train"]:  # a single file
            return splits["train"]
        raise DataError(f"data.validation_source {self.validation_source!r} has no validation split "
                        f"(found {list(splits)})")

    def _documents(self, lines: datasets.Dataset, split: str, max_lines: int | None,
                   text_column: str | None = None, source: str | None = None) -> datasets.Dataset:
        text_column, source = text_column or self.text_column, source or self.source
        require_columns(lines, [text_column], source)
        if max_lines is not None:
            lines = lines.select(range(min(max_lines, len(lines))))
        # One pass in this process rather than a `map`: documents span rows, and map batches cannot share state.
        fingerprint = _step_fingerprint(lines, "documents", (text_column, MAX_DOCUMENT_CHARS, self.wrapped_lines))
        text = (line for batch in lines.select_columns(text_column).iter(batch_size=1000)
                for line in batch[text_column])
        documents = written_once(
            self.cache_dir / f"documents-{fingerprint}.arrow",
            ({"sentences": document} for document in group_documents(text, self.wrapped_lines)),
            datasets.Features({"sentences": datasets.Sequence(datasets.Value("string"))}), fingerprint,
        )
        if len(documents) == 0:
            raise DataError(f"{split} split of {source!r} has no text in column {text_column!r}")
        return documents

    def _hold_out_validation(self, documents: datasets.Dataset) -> dict[str, datasets.Dataset]:
        # Two at least, so that next-sentence prediction can draw B from another document.
        num_held_out = max(2, round(VALIDATION_FRACTION * len(documents)))
        if len(documents) <= num_held_out:
            raise DataError(
                f"pretraining corpus {self.source!r} has no validation split and only {len(documents)} "
                "document(s) to hold some out from; add a validation file (validation.txt) or more text"
            )
        fingerprint = Hasher.hash([documents._fingerprint, "hold-out", num_held_out, self.seed])
        entries = [self.cache_dir / f"holdout-{split}-{fingerprint}.arrow" for split in ("train", "validation")]
        committed = all([cache_entries.is_committed(entry) for entry in entries])
        splits = documents.train_test_split(
            test_size=num_held_out,
            seed=self.seed,
            train_indices_cache_file_name=str(entries[0]),
            test_indices_cache_file_name=str(entries[1]),
            train_new_fingerprint=Hasher.hash([fingerprint, "train"]),
            test_new_fingerprint=Hasher.hash([fingerprint, "validation"]),
            load_from_cache_file=committed,
        )
        if not committed:
            for entry in entries:
                cache_entries.commit(entry)
        logger.info(
            "%s has no validation split: holding out %d of %d documents", self.source, num_held_out, len(documents)
        )
        return {"train": splits["train"], "validation": splits["test"]}

    def _load_or_train_tokenizer(self, documents: datasets.Dataset) -> Tokenizer:
        if self.tokenizer_path:
            return load_tokenizer(self.tokenizer_path)
        fingerprint = Hasher.hash(
            [documents._fingerprint, self.vocab_size, dataclasses.astuple(self.tokenizer_options), _PIPELINE_SOURCE_HASH]
        )
        directory = self.cache_dir / f"tokenizer-{fingerprint}"
        if cache_entries.is_committed(directory):
            return load_tokenizer(directory)
        tokenizer = train_tokenizer(_Sentences(documents), self.vocab_size,
                                    **dataclasses.asdict(self.tokenizer_options))
        save_tokenizer(tokenizer, directory)
        cache_entries.commit(directory)
        logger.info(
            "trained a %d-token WordPiece vocabulary on %s, saved to %s",
            tokenizer.get_vocab_size(), self.source, directory,
        )
        return tokenizer

    def _make_collator(self, tokenizer: Tokenizer) -> PretrainingCollator:
        ids = special_token_ids(tokenizer)
        is_continuation = None
        if self.whole_word_masking:
            prefix = getattr(tokenizer.model, "continuing_subword_prefix", "##")
            is_continuation = np.zeros(tokenizer.get_vocab_size(), dtype=bool)
            for token, token_id in tokenizer.get_vocab().items():
                is_continuation[token_id] = token.startswith(prefix)
        return PretrainingCollator(pad_token_id=ids["pad"], is_continuation=is_continuation,
                                   pad_to_length=self.max_seq_length if self.pad_to_max_length else None)

    def _sequences(self, documents: datasets.Dataset, tokenizer: Tokenizer, copy_pair_prob: float) -> datasets.Dataset:
        tokenized = self._cached_map(
            documents, _tokenize_batch, "tokens", tokenizer.to_str(), batch_size=TOKENIZE_BATCH_SIZE,
            remove_columns=documents.column_names, fn_kwargs={"tokenizer": tokenizer},
            features=datasets.Features({"input_ids": datasets.Sequence(datasets.Sequence(datasets.Value("int32")))}),
        )
        if self.nsp and len(tokenized) < 2:
            raise DataError(
                f"next-sentence prediction needs at least 2 documents; {self.source!r} gives {len(tokenized)}"
            )
        ids = special_token_ids(tokenizer)
        packer = SequencePacker(
            tokenized, max_seq_length=self.max_seq_length, short_seq_prob=self.short_seq_prob, nsp=self.nsp,
            seed=self.seed, cls_token_id=ids["cls"], sep_token_id=ids["sep"],
            copy_pair_prob=copy_pair_prob, copy_drop_prob=self.copy_drop_prob,
        )
        features = {
            "input_ids": datasets.Sequence(datasets.Value("int32")),
            "token_type_ids": datasets.Sequence(datasets.Value("int8")),
        }
        if self.nsp:
            features["next_sentence_label"] = datasets.Value("int8")
        settings = (self.max_seq_length, self.short_seq_prob, self.nsp, self.seed)
        if copy_pair_prob:  # without copies, the fingerprint (and the cached file) of earlier versions
            settings += (copy_pair_prob, self.copy_drop_prob)
        return self._cached_map(
            tokenized, packer, "sequences", settings,
            with_indices=True, batch_size=PACKING_BATCH_SIZE, remove_columns=tokenized.column_names,
            features=datasets.Features(features),
        )

    def _cached_map(
        self, dataset: datasets.Dataset, function: Callable, step: str, settings: object, **map_kwargs
    ) -> datasets.Dataset:
        """`dataset.map(function, batched=True)` in `num_proc` processes (each maps a contiguous shard),
        cached in cache_dir under a fingerprint of its inputs, as a committed cache entry."""
        fingerprint = _step_fingerprint(dataset, step, settings)
        entry = self.cache_dir / f"{step}-{fingerprint}.arrow"
        committed = cache_entries.is_committed(entry)
        mapped = dataset.map(
            function,
            batched=True,
            num_proc=self.num_proc,
            new_fingerprint=fingerprint,
            cache_file_name=str(entry),
            load_from_cache_file=committed,
            desc=f"bertlab: {step}",
            **map_kwargs,
        )
        if not committed:
            cache_entries.commit(entry, [file["filename"] for file in mapped.cache_files])
        return mapped
