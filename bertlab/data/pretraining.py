"""Pretraining data: text lines -> documents -> token ids -> `[CLS] A [SEP] B [SEP]` sequences -> batches.

`PretrainingDataModule.setup` runs the cached steps of bertlab.data.preprocessing (documents and sequences by
bertlab.data.packing); its batches are padded by bertlab.data.batches.PretrainingCollator.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Annotated

import datasets
import lightning as L
import numpy as np
import pyarrow.compute as pc
from tokenizers import Tokenizer
from torch.utils.data import DataLoader

from bertlab.argument_checks import Count, Entries, Probability, SequenceLength, Workers, checks_arguments
from bertlab.data.batches import LengthGroupedSampler, PretrainingCollator, ResumableTrainingOrder
from bertlab.data.preprocessing import hold_out_validation, packed_sequences, read_documents, trained_tokenizer
from bertlab.data.sources import cache_folder, load_dataset_source
from bertlab.errors import DataError
from bertlab.metrics import TEXT_VALIDATION, VALIDATION
from bertlab.tokenizer import WordPieceOptions, load_tokenizer, special_token_ids

logger = logging.getLogger(__name__)

# The split of the validation documents packed as the training ones are, when those are copied pairs.
TRAINING_STYLE_VALIDATION = "validation_training_style"
# Validation text is packed with this seed, not the run's: runs of any seed validate on the same sequences, so the
# plain-text measure (text/, at positions fixed by each sequence's tokens) scores the same targets in every run.
VALIDATION_PACKING_SEED = 0


@checks_arguments
class PretrainingDataModule(ResumableTrainingOrder, L.LightningDataModule):
    """Masked-language-model (and optionally next-sentence) pretraining batches from a text corpus.

    `source` is anything `load_dataset_source` reads; its `text_column` is a stream of lines (see
    `bertlab.data.packing.group_documents`, `wrapped_lines`). `validation_source` replaces the corpus's
    validation text: a file, or a source whose validation split is read. Without `tokenizer_path` a
    WordPiece vocabulary of `vocab_size` is trained on the training split, with the options `lowercase`
    to `max_input_chars_per_word` (`bertlab.tokenizer.WordPieceOptions`). Without a validation split,
    VALIDATION_FRACTION (bertlab.data.preprocessing) of the training documents are held out. With
    `copy_pair_prob`, the validation documents are packed twice: as plain text and, like the training
    ones, with copied pairs (split TRAINING_STYLE_VALIDATION); `val_dataloader` then gives both.
    `max_train_lines` / `max_eval_lines` keep only the first lines (quick runs). Cached arrow files and
    trained tokenizers go to `cache_dir` (default: the `datasets` cache folder + "/bertlab"). Batches:
    see `bertlab.data.batches.PretrainingCollator`; masking happens in the training step
    (`bertlab.lit.masking.mask_tokens`). `pad_to_max_length` pads every batch to `max_seq_length` and
    leaves out each epoch's short last training batch: one shape for torch.compile (with
    task.static_masking). `num_proc` processes tokenize and pack (None: this one alone). Given the
    tokenizer, the sequences and the training order depend only on `seed`, not on `num_proc`; the validation
    sequences not even on `seed` (VALIDATION_PACKING_SEED).
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
        extra_train_sources: Annotated[list[dict], Entries("source", "text_column")] | None = None,
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
            documents = hold_out_validation(documents["train"], self.seed, self.cache_dir, self.source)
        self.tokenizer = load_tokenizer(self.tokenizer_path) if self.tokenizer_path else trained_tokenizer(
            documents["train"], self.vocab_size, self.tokenizer_options, self.cache_dir, self.source)
        self.collator = self._make_collator(self.tokenizer)
        if self.copy_pair_prob:  # validation text as the training sequences are built, beside it as plain text
            documents[TRAINING_STYLE_VALIDATION] = documents["validation"]
        for split, documents_of_split in documents.items():
            copy_pair_prob = self.copy_pair_prob if split in ("train", TRAINING_STYLE_VALIDATION) else 0.0
            sequences = packed_sequences(
                documents_of_split, self.tokenizer, self.cache_dir, self.num_proc, max_seq_length=self.max_seq_length,
                short_seq_prob=self.short_seq_prob, nsp=self.nsp,
                seed=self.seed if split == "train" else VALIDATION_PACKING_SEED, copy_pair_prob=copy_pair_prob,
                copy_drop_prob=self.copy_drop_prob, source=self.source,
            )
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
        return read_documents(lines, text_column or self.text_column, self.wrapped_lines, self.cache_dir,
                              max_lines=max_lines, split=split, source=source or self.source)

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
