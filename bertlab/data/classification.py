"""Sequence classification data: single sentences or sentence pairs with class or regression labels.

Texts are tokenized once with the checkpoint's own tokenizer (bertlab.data.encoding) and padded per
batch (bertlab.data.batches). Training batches group rows of similar length; evaluation batches are
sorted by length, and each batch carries `index` (the row in its split) so predictions can be put back
in the original order, and a distillation's teacher outputs looked up (bertlab.lit.distillation).

With a selection split (`selection_fraction` > 0, bertlab.data.selection) some training rows are held out:
validation then runs on two loaders, the selection split first (logged as val/…, what the checkpoint is
chosen on) and the validation split second (logged as dev/…, what is reported).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Annotated, Any

import datasets
import lightning as L
import numpy as np
import torch
from tokenizers import Tokenizer
from torch.utils.data import DataLoader

from bertlab.argument_checks import Count, Seed, SequenceLength, Workers, checks_arguments
from bertlab.config import NUM_LABELS_LIMIT
from bertlab.data.batches import ResumableTrainingOrder, collate, length_grouped_dataloader, length_sorted_dataloader
from bertlab.data.encoding import column_values, tokenize_dataset
from bertlab.data.selection import split_selection
from bertlab.data.sources import load_dataset_source, require_columns
from bertlab.data.transfer_set import TransferSettings, transfer_examples
from bertlab.errors import ConfigError, DataError
from bertlab.tokenizer import load_tokenizer, special_token_ids
from bertlab.value_rules import OPEN_PROBABILITY, Interval

log = logging.getLogger("bertlab")
UNLABELLED = -1  # GLUE's label for rows of its unlabelled test splits; NaN for regression
SELECTION_SPLIT = "selection"  # the training rows held out to choose the checkpoint on


def labelled_rows(labels: torch.Tensor) -> torch.Tensor:
    """Which rows carry a gold label. Training rows that only a teacher labels (a distillation's
    transfer examples) hold UNLABELLED, or NaN for regression."""
    return ~labels.isnan() if labels.is_floating_point() else labels != UNLABELLED


def named_labels(arguments: Mapping[str, Any]) -> str | None:
    """`label_names`, where given, name every label."""
    label_names, num_labels = arguments["label_names"], arguments["num_labels"]
    if label_names is not None and len(label_names) != num_labels:
        return f"label_names has {len(label_names)} names but num_labels is {num_labels}"
    return None


@checks_arguments(between=(named_labels,))
class ClassificationDataModule(ResumableTrainingOrder, L.LightningDataModule):
    """Train/validation/test splits of a sequence classification dataset, tokenized for BERT.

    `source` is a hub id (e.g. "stanfordnlp/sst2"), a local folder of split files or a file (see
    `load_dataset_source`). `tokenizer` is a checkpoint directory or tokenizer file, or a loaded
    `tokenizers.Tokenizer`. `num_labels == 1` means regression (float labels). `label_names`
    default to the names of a ClassLabel label column, else LABEL_0, LABEL_1, ...; string labels
    are mapped to ids through `label_names`. The test split (for `test` and `predict`) may be
    unlabelled: no label column, or every label -1 as in GLUE; its batches then carry no labels.
    `selection_fraction` of the training rows (at most `selection_max_rows`, drawn with `selection_seed`) are
    held out as the selection split, validated before the validation split (bertlab.data.selection).
    `transfer` (TransferSettings' fields) appends a distillation's transfer set to the training split,
    its rows labelled UNLABELLED (NaN for regression): the teacher labels them; `cache_dir` keeps it.

    In distributed training each rank takes every world_size-th batch of the same order. The
    training position is part of `state_dict()` (saved in Lightning checkpoints), so a run resumed
    mid-epoch continues with the batches it had not trained on yet.
    """

    collate_rows = staticmethod(collate)  # pads a batch's rows (a token or span task's pads its targets too)

    def __init__(
        self,
        source: str,
        tokenizer: str | Tokenizer,
        *,
        text_column: str = "sentence",
        text_pair_column: str | None = None,
        label_column: str = "label",
        num_labels: Annotated[int, Interval(f"[1, {NUM_LABELS_LIMIT}]")] = 2,  # 1: regression
        label_names: list[str] | None = None,
        train_split: str = "train",
        validation_split: str = "validation",
        test_split: str | None = None,
        max_seq_length: SequenceLength = 128,
        batch_size: Count = 32,
        eval_batch_size: Count = 128,
        num_workers: Workers = 0,
        seed: int = 0,
        limit_train_samples: Count | None = None,
        limit_eval_samples: Count | None = None,
        selection_fraction: Annotated[float, OPEN_PROBABILITY] = 0.0,  # 0: no selection split
        selection_max_rows: Count = 1000,
        selection_seed: Seed = 0,
        transfer: Annotated[Mapping[str, Any], TransferSettings] | None = None,
        cache_dir: str | None = None,
    ) -> None:
        super().__init__()
        self.source = source
        self._tokenizer_source = tokenizer
        self._tokenizer: Tokenizer | None = tokenizer if isinstance(tokenizer, Tokenizer) else None
        self.text_column = text_column
        self.text_pair_column = text_pair_column
        self.label_column = label_column
        self.num_labels = num_labels
        self._label_names = list(label_names) if label_names is not None else None  # Hydra passes a ListConfig
        self.train_split = train_split
        self.validation_split = validation_split
        self.test_split = test_split
        self.max_seq_length = max_seq_length
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size
        self.num_workers = num_workers
        self.seed = seed
        self.limit_train_samples = limit_train_samples
        self.limit_eval_samples = limit_eval_samples
        self.selection_fraction = selection_fraction
        self.selection_max_rows = selection_max_rows
        self.selection_seed = selection_seed
        self._selection: tuple[np.ndarray, np.ndarray] | None = None  # (training rows, selection rows)
        self.transfer = TransferSettings.from_config(transfer or {})
        self.cache_dir = cache_dir
        self._transfer_examples: list[tuple[str, ...]] | None = None
        self._raw: datasets.DatasetDict | None = None
        self.datasets: dict[str, datasets.Dataset] = {}  # tokenized splits by name

    @property
    def tokenizer(self) -> Tokenizer:
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self._tokenizer_source)
        return self._tokenizer

    @property
    def label_names(self) -> list[str]:
        """Class names by id (after `setup`, names from a ClassLabel column are known)."""
        if self._label_names is not None:
            return list(self._label_names)
        return [f"LABEL_{i}" for i in range(self.num_labels)]

    def setup(self, stage: str | None = None) -> None:
        wanted = {
            "fit": [self.train_split, *([SELECTION_SPLIT] * bool(self.selection_fraction)), self.validation_split],
            "validate": [self.validation_split],
            "test": [self.test_split],
            "predict": [self.test_split],
        }.get(stage or "fit", [])
        if stage in ("test", "predict") and self.test_split is None:
            raise ConfigError(f"stage {stage!r} needs data.test_split: set it to the split to evaluate")
        for split in wanted:
            if split not in self.datasets:
                self.datasets[split] = self._prepare_split(split)

    def train_dataloader(self) -> DataLoader:
        return length_grouped_dataloader(self.datasets[self.train_split], self, self.batch_size, self.seed,
                                         pad_token_id=special_token_ids(self.tokenizer)["pad"],
                                         num_workers=self.num_workers, collate_rows=self.collate_rows)

    def val_dataloader(self) -> DataLoader | list[DataLoader]:
        """The validation split's batches; after those of the selection split when there is one."""
        if SELECTION_SPLIT in self.datasets:
            return [self._eval_dataloader(SELECTION_SPLIT), self._eval_dataloader(self.validation_split)]
        return self._eval_dataloader(self.validation_split)

    def test_dataloader(self) -> DataLoader:
        return self._eval_dataloader(self.test_split)

    def predict_dataloader(self) -> DataLoader:
        return self._eval_dataloader(self.test_split)

    def _eval_dataloader(self, split: str | None) -> DataLoader:
        if split is None or split not in self.datasets:
            raise ConfigError(f"split {split!r} is not set up: call setup() with the stage that uses it")
        return length_sorted_dataloader(
            self.datasets[split],
            self.eval_batch_size,
            pad_token_id=special_token_ids(self.tokenizer)["pad"],
            num_workers=self.num_workers,
            collate_rows=self.collate_rows,
        )

    def texts(self, split: str) -> tuple[list[str], list[str] | None]:
        """The texts of a split (and their pairs, None for single sentences) in row order, the order
        of the batches' `index`, the transfer set's after the training split's: what another
        tokenizer, a distillation's teacher, reads."""
        examples = self._examples(split)
        if split == self.train_split:
            examples += self._transfer()
        pairs = [example[1] for example in examples] if self.text_pair_column else None
        return [example[0] for example in examples], pairs

    @property
    def _text_columns(self) -> list[str]:
        return [column for column in (self.text_column, self.text_pair_column) if column]

    def _examples(self, split: str) -> list[tuple[str, ...]]:
        """The texts of a split's rows, a tuple of one (or, for pairs, two) each."""
        dataset = self._raw_split(split)
        return [*zip(*(dataset[column] for column in self._text_columns))]

    def _transfer(self) -> list[tuple[str, ...]]:
        """The transfer set (data.transfer), built or loaded once."""
        if self.transfer.empty:
            return []
        if self._transfer_examples is None:
            self._transfer_examples = transfer_examples(self._examples(self.train_split), self.transfer,
                                                        self._text_columns, self.cache_dir)
        return self._transfer_examples

    def _raw_split(self, split: str) -> datasets.Dataset:
        """The split as loaded, cut to its `limit_*_samples`; the training split less the selection split's rows,
        which are the selection split."""
        if split == SELECTION_SPLIT:
            return self._loaded_split(self.train_split).select(self._selection_rows()[1])
        dataset = self._loaded_split(split)
        if split == self.train_split and self.selection_fraction:
            dataset = dataset.select(self._selection_rows()[0])
        return dataset

    def _selection_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """(training rows, selection rows) of the loaded training split, drawn once."""
        if self._selection is None:
            dataset = self._loaded_split(self.train_split)
            strata, texts = self._selection_strata_and_texts(dataset)
            self._selection = split_selection(strata, texts, self.selection_fraction, self.selection_max_rows,
                                              self.selection_seed)
            left_out = len(dataset) - sum(map(len, self._selection))
            log.info("selection split: %d of the %d training rows held out, %d more left out of training for holding "
                     "text of theirs (bertlab.data.selection)", len(self._selection[1]), len(dataset), left_out)
        return self._selection

    def _selection_strata_and_texts(self, dataset: datasets.Dataset) -> tuple[np.ndarray, list[tuple[str, ...]]]:
        """What the selection split draws the loaded training rows by: each row's stratum (its label) and its
        texts (bertlab.data.selection.split_selection)."""
        labels = self._labels(dataset, self.train_split, f"split {self.train_split!r} of {self.source}")
        return labels, [*zip(*(dataset[column] for column in self._text_columns))]

    def _loaded_split(self, split: str) -> datasets.Dataset:
        """The split as loaded, cut to its `limit_*_samples`."""
        if self._raw is None:
            self._raw = load_dataset_source(self.source, what="classification dataset")
        if split not in self._raw:
            raise DataError(
                f"classification dataset {self.source!r} has no split {split!r}; "
                f"available splits: {sorted(self._raw)}"
            )
        dataset = self._raw[split]
        limit = self.limit_train_samples if split == self.train_split else self.limit_eval_samples
        if limit is not None:
            dataset = dataset.select(range(min(limit, len(dataset))))
        return dataset

    def _prepare_split(self, split: str) -> datasets.Dataset:
        dataset = self._raw_split(split)
        name = f"split {split!r} of {self.source}"
        labels = self._labels(dataset, split, name)
        if split == self.train_split and (transfer := self._transfer()):
            # The teacher alone labels these rows: UNLABELLED (NaN for regression) marks them.
            extra = datasets.Dataset.from_dict({column: [example[i] for example in transfer]
                                                for i, column in enumerate(self._text_columns)},
                                               features=dataset.select_columns(self._text_columns).features)
            dataset = datasets.concatenate_datasets([dataset.select_columns(self._text_columns), extra])
            labels = np.concatenate([labels, np.full(len(transfer), np.nan if self.num_labels == 1 else UNLABELLED,
                                                     dtype=labels.dtype)])
        return tokenize_dataset(
            dataset,
            self.tokenizer,
            text_column=self.text_column,
            text_pair_column=self.text_pair_column,
            max_seq_length=self.max_seq_length,
            labels=labels,
            name=name,
        )

    def _labels(self, dataset: datasets.Dataset, split: str, name: str) -> np.ndarray | None:
        """Validated label ids (or floats for regression); None for an unlabelled test split."""
        predict_only = split == self.test_split and split not in (self.train_split, self.validation_split)
        if predict_only and self.label_column not in dataset.column_names:
            return None
        require_columns(dataset, [self.label_column], name)
        feature = dataset.features[self.label_column]
        if isinstance(feature, datasets.ClassLabel) and self._label_names is None:
            if feature.num_classes != self.num_labels:
                raise DataError(
                    f"column {self.label_column!r} of {name} has {feature.num_classes} classes "
                    f"{feature.names} but num_labels is {self.num_labels}"
                )
            self._label_names = list(feature.names)
        values = column_values(dataset, self.label_column)
        if predict_only and values.dtype.kind in "iuf" and np.all(values == UNLABELLED):
            return None
        return _encode_labels(values, self.num_labels, self._label_names, name, self.label_column)


def _encode_labels(
    values: np.ndarray, num_labels: int, label_names: list[str] | None, name: str, column: str
) -> np.ndarray:
    where = f"column {column!r} of {name}"
    if num_labels == 1:
        if values.dtype.kind not in "iuf":
            raise DataError(f"{where} must hold numbers for regression (num_labels=1), got {_at(values, 0)!r}")
        values = values.astype(np.float32)
        bad = ~np.isfinite(values)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise DataError(f"{where} holds {_at(values, row)} at row {row}; expected finite numbers")
        return values
    if values.dtype.kind in "OUS":
        if label_names is None:
            raise DataError(
                f"{where} holds strings such as {_at(values, 0)!r}: set data.label_names to map them to ids"
            )
        ids = {label: index for index, label in enumerate(label_names)}
        unknown = [value for value in values.tolist() if value not in ids]
        if unknown:
            raise DataError(f"{where} holds {unknown[0]!r}, which is not one of label_names {label_names}")
        return np.asarray([ids[value] for value in values.tolist()], dtype=np.int64)
    if values.dtype.kind not in "iuf":
        raise DataError(f"{where} must hold class ids, got {_at(values, 0)!r}")
    outside = (values < 0) | (values >= num_labels) | (values != np.round(values))
    if outside.any():
        row = int(np.flatnonzero(outside)[0])
        raise DataError(
            f"{where} holds label {_at(values, row)!r} at row {row}; expected integers in [0, {num_labels}) "
            f"for num_labels={num_labels}"
        )
    return values.astype(np.int64)


def _at(values: np.ndarray, row: int) -> Any:
    """The value at `row` as a plain Python object, for messages."""
    return values[row : row + 1].tolist()[0]
