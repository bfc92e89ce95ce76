"""`python -m bertlab evaluate CHECKPOINT --data SOURCE [--split validation] [--output F]`:
a fine-tuned checkpoint's metrics on a dataset split or a file, printed and written as JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import lightning as L

from bertlab.data.classification import ClassificationDataModule
from bertlab.lit.classification import ClassificationModule
from bertlab.model import BertForSequenceClassification


def evaluate(checkpoint: str, data: str, *, split: str = "validation", text_column: str = "sentence",
             text_pair_column: str | None = None, label_column: str = "label",
             batch_size: int = 256, max_seq_length: int = 128) -> dict[str, float]:
    model = BertForSequenceClassification.from_pretrained(checkpoint)
    config = model.config
    datamodule = ClassificationDataModule(
        data, checkpoint, text_column=text_column, text_pair_column=text_pair_column,
        label_column=label_column, num_labels=config.num_labels,
        label_names=[config.id2label[i] for i in range(config.num_labels)] if config.num_labels > 1 else None,
        validation_split=split, eval_batch_size=batch_size, max_seq_length=max_seq_length)
    trainer = L.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False, enable_model_summary=False)
    (metrics,) = trainer.validate(ClassificationModule(model=model), datamodule=datamodule, verbose=False)
    return {key.removeprefix("val/"): float(value) for key, value in metrics.items()}


def main(argv: list[str], prog: str) -> None:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("checkpoint", help="a fine-tuned checkpoint folder")
    parser.add_argument("--data", required=True,
                        help="a hub id (stanfordnlp/sst2), a folder of split files, or one file")
    parser.add_argument("--split", default="validation", help="the split to evaluate (a single file is 'train')")
    parser.add_argument("--text-column", default="sentence")
    parser.add_argument("--text-pair-column", default=None)
    parser.add_argument("--label-column", default="label")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--output", help="metrics JSON file (default: <checkpoint>/eval_<split>.json)")
    args = parser.parse_args(argv)
    metrics = evaluate(args.checkpoint, args.data, split=args.split, text_column=args.text_column,
                       text_pair_column=args.text_pair_column, label_column=args.label_column,
                       batch_size=args.batch_size, max_seq_length=args.max_seq_length)
    output = Path(args.output or Path(args.checkpoint) / f"eval_{args.split}.json")
    output.write_text(json.dumps({"checkpoint": args.checkpoint, "data": args.data, "split": args.split,
                                  **metrics}, indent=2) + "\n")
    for key, value in metrics.items():
        print(f"{key}: {value:.4f}")
    print(f"Metrics written to {output}")
