"""Unlabelled sentences for a sentence-embedding distillation (bertlab.lit.embedding_distillation):
sentences cut from a plain-text corpus (a paragraph a line) and, optionally, the text column of a
dataset (its labels are never read), with `validation_size` of them held out.

The corpus lines are visited in an order shuffled by the seed and read in chunks until `max_sentences`
sentences of `min_words` to `max_words` words are found, so gathering them reads only the lines it
needs. Texts are tokenized once with the student's tokenizer and padded per batch; each batch carries
`index`, the row of its texts, by which the teacher's embeddings are looked up.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

import datasets
import lightning as L
import numpy as np
from tokenizers import Tokenizer
from torch.utils.data import DataLoader

from bertlab.argument_checks import Count, SequenceLength, Workers, check_rules, checks_arguments
from bertlab.data.batches import ResumableTrainingOrder, length_grouped_dataloader, length_sorted_dataloader
from bertlab.data.encoding import tokenize_dataset
from bertlab.data.sources import load_dataset_source, require_columns
from bertlab.errors import DataError
from bertlab.tokenizer import load_tokenizer, special_token_ids
from bertlab.value_rules import Interval

# A sentence ends at . ! or ? followed by white space and an upper-case letter or a quote.
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'])")
LINES_PER_READ = 10_000


def split_sentences(line: str) -> list[str]:
    return [sentence.strip() for sentence in SENTENCE_END.split(line) if sentence.strip()]


def sentences_of(lines: Iterator[str], min_words: int, max_words: int) -> Iterator[str]:
    """The sentences of `lines` with `min_words` to `max_words` words, in order."""
    for line in lines:
        for sentence in split_sentences(line):
            if min_words <= len(sentence.split()) <= max_words:
                yield sentence


def shuffled_lines(lines: datasets.Dataset, seed: int) -> Iterator[str]:
    """The "text" column of `lines` in an order shuffled by `seed`, read a chunk at a time."""
    order = np.random.default_rng(seed).permutation(len(lines))
    for start in range(0, len(order), LINES_PER_READ):
        yield from lines[order[start:start + LINES_PER_READ].tolist()]["text"]


@checks_arguments
class SentenceDataModule(ResumableTrainingOrder, L.LightningDataModule):
    """`source`: the corpus, a text file, a folder with train.txt or a hub id (see `load_dataset_source`),
    whose training split's lines give up to `max_sentences` sentences; `extra_source` (optional): a
    dataset whose `extra_split` adds every text of its `extra_text_column`. The texts are shuffled by `seed`, the
    first `validation_size` held out for validation. `tokenizer`: the student's (a checkpoint folder or
    a tokenizer file). Training batches group rows of similar length, in a seeded order per epoch,
    resumable mid-epoch (bertlab.data.batches)."""

    def __init__(self, source: str, tokenizer: str | Tokenizer, *, extra_source: str | None = None,
                 extra_text_column: str = "sentence", extra_split: str = "train", min_words: Count = 6,
                 max_words: Count = 40, max_sentences: Count = 200_000, validation_size: Count = 2_000,
                 max_seq_length: SequenceLength = 128, batch_size: Count = 64, eval_batch_size: Count = 256,
                 num_workers: Workers = 0, seed: int = 0) -> None:
        super().__init__()
        check_rules("data.max_words", max_words, [Interval(f"[{min_words}, inf)", whole=True,
                                                           says=f"at least data.min_words ({min_words})")])
        self.source = source
        self._tokenizer_source = tokenizer
        self._tokenizer: Tokenizer | None = tokenizer if isinstance(tokenizer, Tokenizer) else None
        self.extra_source = extra_source
        self.extra_text_column = extra_text_column
        self.extra_split = extra_split
        self.min_words, self.max_words = min_words, max_words
        self.max_sentences = max_sentences
        self.validation_size = validation_size
        self.max_seq_length = max_seq_length
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size
        self.num_workers = num_workers
        self.seed = seed
        self._texts: dict[str, list[str]] = {}  # by split: "train", "validation"
        self.datasets: dict[str, datasets.Dataset] = {}  # tokenized, by split

    @property
    def tokenizer(self) -> Tokenizer:
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self._tokenizer_source)
        return self._tokenizer

    def setup(self, stage: str | None = None) -> None:
        if self.datasets:
            return
        texts = self._corpus_sentences() + self._extra_texts()
        if len(texts) <= self.validation_size:
            raise DataError(f"data.validation_size={self.validation_size} leaves no training text: only "
                            f"{len(texts)} texts were gathered; lower it, or gather more (data.max_sentences)")
        shuffled = [texts[row] for row in np.random.default_rng(self.seed).permutation(len(texts))]
        self._texts = {"validation": shuffled[:self.validation_size], "train": shuffled[self.validation_size:]}
        for split, split_texts in self._texts.items():
            self.datasets[split] = tokenize_dataset(
                datasets.Dataset.from_dict({"text": split_texts}), self.tokenizer, text_column="text",
                max_seq_length=self.max_seq_length, name=f"the {split} sentences")

    def texts(self, split: str) -> list[str]:
        """The texts of `split` ("train" or "validation") in row order, the order of the batches' `index`."""
        return self._texts[split]

    def train_dataloader(self) -> DataLoader:
        return length_grouped_dataloader(self.datasets["train"], self, self.batch_size, self.seed,
                                         pad_token_id=special_token_ids(self.tokenizer)["pad"],
                                         num_workers=self.num_workers)

    def val_dataloader(self) -> DataLoader:
        return length_sorted_dataloader(self.datasets["validation"], self.eval_batch_size,
                                        pad_token_id=special_token_ids(self.tokenizer)["pad"],
                                        num_workers=self.num_workers)

    def _corpus_sentences(self) -> list[str]:
        splits = load_dataset_source(self.source, what="sentence corpus")
        if "train" not in splits:
            raise DataError(f"data.source={self.source} has no training split (train.txt); "
                            f"available splits: {sorted(splits)}")
        lines = splits["train"]
        require_columns(lines, ["text"], f"data.source={self.source}")
        found = sentences_of(shuffled_lines(lines, self.seed), self.min_words, self.max_words)
        sentences = list(itertools.islice(found, self.max_sentences))
        if not sentences:
            raise DataError(f"data.source={self.source}: no sentence of {self.min_words}-{self.max_words} words "
                            f"(data.min_words, data.max_words) in its {len(lines)} lines; expected plain text, "
                            f"a paragraph a line, sentences ending in . ! or ? before an upper-case letter")
        return sentences

    def _extra_texts(self) -> list[str]:
        if self.extra_source is None:
            return []
        splits = load_dataset_source(self.extra_source, what="sentence dataset")
        if self.extra_split not in splits:
            raise DataError(f"data.extra_source={self.extra_source} has no split {self.extra_split!r} "
                            f"(data.extra_split); available splits: {sorted(splits)}")
        texts = splits[self.extra_split]
        require_columns(texts, [self.extra_text_column], f"data.extra_source={self.extra_source}")
        return list(texts[self.extra_text_column])
