"""Token classification data (named-entity recognition): sentences given as words, a tag per word.

Words become word pieces with the checkpoint's own tokenizer, and each word's tag goes to its first piece; the
other pieces, and the special tokens, are labelled -100, which the loss and the scores skip. That is the
standard of BERT's paper (Devlin et al. 2019, §5.3) and of the hub's token-classification example, and it
scores words, as CoNLL's entities are spans of words, not of pieces: a word is predicted by its first piece.

A selection split (`selection_fraction` > 0, bertlab.data.selection) holds training sentences out to choose the
checkpoint on, stratified by the type of each sentence's first entity (or none): every entity type, and the
sentences without one, keep their shares. Validation then runs on it first (val/…) and on the validation split
second (dev/…), as for sequence classification (bertlab.data.classification).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import datasets
import numpy as np
import torch
from tokenizers import Tokenizer

from bertlab.argument_checks import Count, Seed, SequenceLength, Workers, checks_arguments
from bertlab.data.batches import collate
from bertlab.data.classification import ClassificationDataModule
from bertlab.data.encoding import truncate_without_padding
from bertlab.data.sources import require_columns
from bertlab.errors import ConfigError, DataError
from bertlab.losses import IGNORE_INDEX
from bertlab.ner_metrics import OUTSIDE, check_iob_use, one_tag_scheme, tag_scheme
from bertlab.value_rules import OPEN_PROBABILITY

PIECE_LABELS = "piece_labels"  # the tokenized rows' column: a tag id per piece, -100 where nothing is scored


def collate_tokens(rows: Sequence[Mapping[str, Any]], *, pad_token_id: int = 0) -> dict[str, torch.Tensor]:
    """`collate`'s batch with `labels` ([B, L], -100 on padding) from each row's piece labels."""
    batch = collate(rows, pad_token_id=pad_token_id)
    if PIECE_LABELS in rows[0]:
        labels = np.full(batch["input_ids"].shape, IGNORE_INDEX, dtype=np.int64)
        labels[batch["attention_mask"].numpy().astype(bool)] = np.concatenate([row[PIECE_LABELS] for row in rows])
        batch["labels"] = torch.from_numpy(labels)
    return batch


def encode_words(tokenizer: Tokenizer, sentences: Sequence[Sequence[str]], tags: Sequence[Sequence[int]] | None,
                 max_seq_length: int) -> dict[str, list]:
    """input_ids, token_type_ids and length of sentences given as words, truncated to `max_seq_length`, with
    the piece labels of `tags` (a word's tag on its first piece, -100 elsewhere) when given."""
    truncate_without_padding(tokenizer, max_seq_length, paired=False)
    encodings = tokenizer.encode_batch([list(words) for words in sentences], is_pretokenized=True)
    encoded = {"input_ids": [e.ids for e in encodings], "token_type_ids": [e.type_ids for e in encodings],
               "length": [len(e.ids) for e in encodings]}
    if tags is not None:
        encoded[PIECE_LABELS] = [piece_labels(e.word_ids, row_tags) for e, row_tags in zip(encodings, tags)]
    return encoded


def piece_labels(word_ids: Sequence[int | None], tags: Sequence[int]) -> list[int]:
    """A word's tag on its first piece; -100 on its other pieces and on the special tokens."""
    labels, previous = [], None
    for word in word_ids:
        labels.append(IGNORE_INDEX if word is None or word == previous else int(tags[word]))
        previous = word
    return labels


def first_pieces(word_ids: Sequence[int | None]) -> list[int]:
    """The position of each word's first piece, in word order (the words a truncation kept)."""
    positions, previous = [], None
    for position, word in enumerate(word_ids):
        if word is not None and word != previous:
            positions.append(position)
        previous = word
    return positions


@checks_arguments(between=(one_tag_scheme,))
class TokenClassificationDataModule(ClassificationDataModule):
    """Train/validation/test splits of sentences as lists of words (`tokens_column`) with a tag per word
    (`tags_column`: tag ids, or tag names of `label_names`). `label_names` are the tags in id order (O, B-PER,
    I-PER, …); null reads them from the hub's Sequence(ClassLabel) column. Batching, the selection split and the
    resumable training order are those of ClassificationDataModule."""

    collate_rows = staticmethod(collate_tokens)

    def __init__(
        self,
        source: str,
        tokenizer: str | Tokenizer,
        *,
        tokens_column: str = "tokens",
        tags_column: str = "ner_tags",
        label_names: list[str] | None = None,
        train_split: str = "train",
        validation_split: str = "validation",
        test_split: str | None = None,
        max_seq_length: SequenceLength = 256,
        batch_size: Count = 32,
        eval_batch_size: Count = 128,
        num_workers: Workers = 0,
        seed: int = 0,
        limit_train_samples: Count | None = None,
        limit_eval_samples: Count | None = None,
        selection_fraction: Annotated[float, OPEN_PROBABILITY] = 0.0,
        selection_max_rows: Count = 1000,
        selection_seed: Seed = 0,
    ) -> None:
        names = list(label_names) if label_names is not None else None
        super().__init__(source, tokenizer, text_column=tokens_column, label_column=tags_column,
                         num_labels=len(names) if names else 1, label_names=names, train_split=train_split,
                         validation_split=validation_split, test_split=test_split, max_seq_length=max_seq_length,
                         batch_size=batch_size, eval_batch_size=eval_batch_size, num_workers=num_workers, seed=seed,
                         limit_train_samples=limit_train_samples, limit_eval_samples=limit_eval_samples,
                         selection_fraction=selection_fraction, selection_max_rows=selection_max_rows,
                         selection_seed=selection_seed)
        self.scheme = tag_scheme(names) if names else None
        self._tags: dict[str, list[np.ndarray]] = {}  # each split's tag ids per row, checked

    @property
    def label_names(self) -> list[str]:
        if self._label_names is None:
            raise ConfigError(f"data.label_names is not set and {self.source!r} has not been read yet (its "
                              f"column {self.label_column!r} names no tags); list the tags in id order")
        return list(self._label_names)

    def words(self, split: str) -> list[list[str]]:
        """The words of a split's sentences in row order (the order of the batches' `index`)."""
        return [list(words) for words in self._raw_split(split)[self.text_column]]

    def gold_tags(self, split: str) -> list[list[str]]:
        """The tag names of a split's words in row order, every word's (a truncation cuts only the pieces)."""
        names = self.label_names
        return [[names[i] for i in row] for row in self._split_tags(self._raw_split(split), split)]

    def _selection_strata_and_texts(self, dataset: datasets.Dataset) -> tuple[np.ndarray, list[list[str]]]:
        rows = self._split_tags(dataset, self.train_split)
        return self._strata(rows), [[" ".join(words)] for words in dataset[self.text_column]]

    def _strata(self, rows: list[np.ndarray]) -> np.ndarray:
        """Each sentence's stratum: the type of its first entity, or none (-1)."""
        types = sorted({name[2:] for name in self.label_names if name != OUTSIDE})
        names = self.label_names
        first = [next((names[i][2:] for i in row if names[i] != OUTSIDE), None) for row in rows]
        return np.asarray([-1 if kind is None else types.index(kind) for kind in first], dtype=np.int64)

    def _prepare_split(self, split: str) -> datasets.Dataset:
        dataset = self._raw_split(split)
        name = f"split {split!r} of {self.source}"
        require_columns(dataset, [self.text_column], name)
        sentences = _word_rows(dataset[self.text_column], self.text_column, name)
        labelled = self.label_column in dataset.column_names or split != self.test_split
        tags = self._split_tags(dataset, split) if labelled else None
        encoded = encode_words(self.tokenizer, sentences, tags, self.max_seq_length)
        encoded["index"] = list(range(len(sentences)))
        features = {"input_ids": datasets.List(datasets.Value("int32")),
                    "token_type_ids": datasets.List(datasets.Value("int8")),
                    "length": datasets.Value("int32"), "index": datasets.Value("int64")}
        if tags is not None:
            features[PIECE_LABELS] = datasets.List(datasets.Value("int64"))
        return datasets.Dataset.from_dict(encoded, features=datasets.Features(features)).with_format("numpy")

    def _split_tags(self, dataset: datasets.Dataset, split: str) -> list[np.ndarray]:
        """The tag ids of every row, checked: a list per row, as long as its words, each tag in the tag set,
        one IOB scheme. Kept per split (the selection split's rows are the training split's)."""
        key = f"{split}:{len(dataset)}"  # the training split less its selection rows has fewer rows than in full
        if key not in self._tags:
            name = f"split {split!r} of {self.source}"
            require_columns(dataset, [self.text_column, self.label_column], name)
            feature = dataset.features[self.label_column]
            inner = getattr(feature, "feature", None)
            if self._label_names is None and isinstance(inner, datasets.ClassLabel):
                self._label_names = list(inner.names)
                self.scheme = tag_scheme(self._label_names)
            self._tags[key] = _tag_ids(dataset[self.label_column], dataset[self.text_column], self.label_names,
                                       f"column {self.label_column!r} of {name}")
            if self.scheme == "IOB2":
                check_iob_use([[self.label_names[i] for i in row] for row in self._tags[key]],
                              f"column {self.label_column!r} of {name}")
        return self._tags[key]


def _word_rows(values: list, column: str, name: str) -> list[list[str]]:
    for row, words in enumerate(values):
        if not isinstance(words, (list, tuple)) or not all(isinstance(word, str) for word in words):
            raise DataError(f"column {column!r} of {name} holds {words!r} at row {row}; expected a list of words")
    return values


def _tag_ids(values: list, sentences: list, label_names: list[str], where: str) -> list[np.ndarray]:
    ids = {name: index for index, name in enumerate(label_names)}
    rows = []
    for row, (tags, words) in enumerate(zip(values, sentences)):
        if not isinstance(tags, (list, tuple)):
            raise DataError(f"{where} holds {tags!r} at row {row}; expected a list of tags, one per word")
        if len(tags) != len(words):
            raise DataError(f"{where} holds {len(tags)} tags at row {row} for its {len(words)} words; expected "
                            f"one tag per word")
        for tag in tags:
            known = tag in ids if isinstance(tag, str) else isinstance(tag, int) and 0 <= tag < len(label_names)
            if not known:
                raise DataError(f"{where} holds tag {tag!r} at row {row}, which is not one of label_names "
                                f"{label_names} (or their ids 0-{len(label_names) - 1})")
        rows.append(np.asarray([ids[tag] if isinstance(tag, str) else tag for tag in tags], dtype=np.int64))
    return rows
