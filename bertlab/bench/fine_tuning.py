"""SST-2 fine-tuning throughput: bertlab's ClassificationDataModule + ClassificationModule vs a plain
transformers loop, the same pretrained checkpoint (all-MiniLM-L6-v2) loaded by both.

transformers gets random batches padded to their longest row (DataCollatorWithPadding, the strong
baseline) or to a fixed max_seq_length (run_glue.py's default, pad_to_max_length). Each measurement
starts the epoch afresh from the same seed, so every repeat trains on the same batches. Padding to a
fixed length makes every batch cost the same, so that baseline runs a quarter of the steps.
"""

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
from bertlab.data.classification import ClassificationDataModule
from bertlab.data.sources import load_dataset_source
from bertlab.lit.classification import ClassificationModule
from bertlab.model import BertForSequenceClassification

DYNAMIC = "transformers, dynamic padding"


@dataclass(frozen=True)
class FineTuneSetup:
    sst2_dir: Path  # train.parquet with columns sentence, label
    model_dir: str  # a Hugging Face BERT checkpoint with its tokenizer
    model_name: str
    device: torch.device
    steps: int
    warmup: int
    batch_size: int = 32
    max_seq_length: int = 128
    seed: int = 0


def bertlab_data(setup: FineTuneSetup) -> ClassificationDataModule:
    datamodule = ClassificationDataModule(str(setup.sst2_dir), setup.model_dir, batch_size=setup.batch_size,
                                          max_seq_length=setup.max_seq_length, seed=setup.seed)
    datamodule.setup("fit")
    return datamodule


def bertlab_measurement(setup: FineTuneSetup, datamodule: ClassificationDataModule, precision: str) -> Measurement:
    torch.manual_seed(setup.seed)
    model = BertForSequenceClassification.from_pretrained(setup.model_dir, num_labels=2)
    module = ClassificationModule(model=model, optimizer=bertlab_optimizer())

    def measure() -> float:
        clock = fit_steps(module, setup.device, precision, setup.steps, setup.warmup, datamodule=datamodule)
        return clock.seconds

    return measure


def transformers_data(setup: FineTuneSetup) -> tuple[datasets.Dataset, transformers.PreTrainedTokenizerBase]:
    """The training split tokenized as run_glue.py does it, without padding (the collators pad)."""
    tokenizer = transformers.BertTokenizerFast.from_pretrained(setup.model_dir)
    train = load_dataset_source(str(setup.sst2_dir), what="SST-2")["train"]
    train = train.map(lambda rows: tokenizer(rows["sentence"], truncation=True, max_length=setup.max_seq_length),
                      batched=True, remove_columns=[c for c in train.column_names if c != "label"])
    return train.rename_column("label", "labels"), tokenizer


def fixed_name(setup: FineTuneSetup) -> str:
    return f"transformers, padding to {setup.max_seq_length}"


def fixed_steps(setup: FineTuneSetup) -> int:
    return max(1, setup.steps // 4)


def transformers_measurements(setup: FineTuneSetup, train: datasets.Dataset,
                              tokenizer: transformers.PreTrainedTokenizerBase,
                              precision: str) -> dict[str, tuple[Measurement, int]]:
    """(measurement, timed steps) of the plain loop with random batches padded to their longest row,
    and padded to max_seq_length."""
    torch.manual_seed(setup.seed)
    model = transformers.BertForSequenceClassification.from_pretrained(setup.model_dir, num_labels=2)
    loop = TransformersLoop(model, setup.device, precision)

    def measurement(collator, steps: int) -> Measurement:
        def measure() -> float:
            batches = iter(DataLoader(train, batch_size=setup.batch_size, shuffle=True, collate_fn=collator,
                                      generator=torch.Generator().manual_seed(setup.seed)))
            return loop.run(lambda: next(batches), steps, setup.warmup)
        return measure

    fixed = transformers.DataCollatorWithPadding(tokenizer, padding="max_length", max_length=setup.max_seq_length)
    return {DYNAMIC: (measurement(transformers.DataCollatorWithPadding(tokenizer), setup.steps), setup.steps),
            fixed_name(setup): (measurement(fixed, fixed_steps(setup)), fixed_steps(setup))}


def compare(setup: FineTuneSetup, precisions: list[str], repeats: int) -> list[Result]:
    """Per precision, bertlab and transformers with each padding, in turns; ratios against dynamic padding."""
    datamodule, (train, tokenizer) = bertlab_data(setup), transformers_data(setup)
    setting = (f"SST-2 train, {setup.model_name}, batch {setup.batch_size}, {setup.steps} steps per repeat "
               f"({fixed_steps(setup)} with fixed padding) after {setup.warmup} untimed, data loading included")
    results = []
    for precision in precisions:
        measured = {"bertlab": (bertlab_measurement(setup, datamodule, precision), setup.steps),
                    **transformers_measurements(setup, train, tokenizer, precision)}
        timings = interleave({name: measurement for name, (measurement, _) in measured.items()}, repeats)
        results += [Result("fine-tuning", "sst2", setting, precision, name, "examples/s",
                           setup.batch_size * steps, timings[name], baseline=DYNAMIC, steps=steps)
                    for name, (_, steps) in measured.items()]
    return results
