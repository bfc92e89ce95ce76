"""CoNLL-2003 token-classification throughput: bertlab's TokenClassificationDataModule + TokenClassificationModule
against a plain transformers loop with `BertForTokenClassification` (each word's tag on its first piece, random
batches padded to their longest row by DataCollatorForTokenClassification), the same pretrained checkpoint
(all-MiniLM-L6-v2) loaded by both. Each measurement starts afresh from the same seed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import datasets
import torch
import transformers
from torch.utils.data import DataLoader

from bertlab.bench.clock import Measurement, interleave
from bertlab.bench.report import Result
from bertlab.bench.training import TransformersLoop, bertlab_optimizer, fit_steps
from bertlab.data.sources import load_dataset_source
from bertlab.data.token_classification import TokenClassificationDataModule, piece_labels
from bertlab.lit.token_classification import TokenClassificationModule
from bertlab.model import BertForTokenClassification

TRANSFORMERS = "transformers, dynamic padding"
CONLL_TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]  # conf/data/conll2003


@dataclass(frozen=True)
class TaggingSetup:
    conll_dir: Path  # train split files with columns tokens, ner_tags (tag ids of CONLL_TAGS)
    model_dir: str  # a Hugging Face BERT checkpoint with its tokenizer
    model_name: str
    device: torch.device
    steps: int
    warmup: int
    batch_size: int = 32
    max_seq_length: int = 256
    seed: int = 0

    def labels(self) -> dict:
        return {"num_labels": len(CONLL_TAGS), "id2label": dict(enumerate(CONLL_TAGS)),
                "label2id": {tag: i for i, tag in enumerate(CONLL_TAGS)}}


def bertlab_measurement(setup: TaggingSetup, precision: str) -> Measurement:
    datamodule = TokenClassificationDataModule(str(setup.conll_dir), setup.model_dir, label_names=CONLL_TAGS,
                                               batch_size=setup.batch_size, max_seq_length=setup.max_seq_length,
                                               seed=setup.seed)
    datamodule.setup("fit")
    torch.manual_seed(setup.seed)
    module = TokenClassificationModule(model=BertForTokenClassification.from_pretrained(setup.model_dir,
                                                                                       **setup.labels()),
                                       optimizer=bertlab_optimizer())

    def measure() -> float:
        return fit_steps(module, setup.device, precision, setup.steps, setup.warmup, datamodule=datamodule).seconds

    return measure


def transformers_data(setup: TaggingSetup) -> tuple[datasets.Dataset, transformers.PreTrainedTokenizerBase]:
    """The training split tokenized as transformers' run_ner.py does it (first-piece labels), unpadded."""
    tokenizer = transformers.BertTokenizerFast.from_pretrained(setup.model_dir)
    train = load_dataset_source(str(setup.conll_dir), what="CoNLL-2003")["train"]

    def encode(rows: dict) -> dict:
        encoded = tokenizer(rows["tokens"], is_split_into_words=True, truncation=True, max_length=setup.max_seq_length)
        encoded["labels"] = [piece_labels(encoded.word_ids(i), tags) for i, tags in enumerate(rows["ner_tags"])]
        return encoded

    return train.map(encode, batched=True, remove_columns=train.column_names), tokenizer


def transformers_measurement(setup: TaggingSetup, train: datasets.Dataset,
                             tokenizer: transformers.PreTrainedTokenizerBase, precision: str) -> Measurement:
    torch.manual_seed(setup.seed)
    model = transformers.BertForTokenClassification.from_pretrained(setup.model_dir, **setup.labels())
    loop = TransformersLoop(model, setup.device, precision)
    collator = transformers.DataCollatorForTokenClassification(tokenizer)

    def measure() -> float:
        batches = iter(DataLoader(train, batch_size=setup.batch_size, shuffle=True, collate_fn=collator,
                                  generator=torch.Generator().manual_seed(setup.seed)))
        return loop.run(lambda: next(batches), setup.steps, setup.warmup)

    return measure


def compare(setup: TaggingSetup, precisions: list[str], repeats: int) -> list[Result]:
    """Per precision, bertlab and transformers in turns; ratios against transformers."""
    train, tokenizer = transformers_data(setup)
    setting = (f"CoNLL-2003 train, {setup.model_name}, batch {setup.batch_size}, {setup.steps} steps per repeat "
               f"after {setup.warmup} untimed, data loading included")
    results = []
    for precision in precisions:
        measured = {"bertlab": bertlab_measurement(setup, precision),
                    TRANSFORMERS: transformers_measurement(setup, train, tokenizer, precision)}
        timings = interleave(measured, repeats)
        results += [Result("fine-tuning", "conll2003", setting, precision, name, "examples/s",
                           setup.batch_size * setup.steps, timings[name], baseline=TRANSFORMERS, steps=setup.steps)
                    for name in measured]
    return results
