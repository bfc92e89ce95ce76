"""`python -m bertlab evaluate CHECKPOINT --data SOURCE [--split validation] [--output F]`:
a fine-tuned checkpoint's metrics on a dataset split or a file, printed and written as JSON."""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F

from bertlab.commands.arguments import ArgumentParser, output_file, positive_int
from bertlab.data.classification import ClassificationDataModule, column_values
from bertlab.hf_format import write_atomically
from bertlab.inference import classifier_logits, load_classifier
from bertlab.lit.classification import validation_metrics
from bertlab.tokenizer import special_token_ids


def evaluate(checkpoint: str, data: str, *, split: str = "validation", text_column: str = "sentence",
             text_pair_column: str | None = None, label_column: str = "label",
             batch_size: int = 256, max_seq_length: int = 128) -> dict[str, float]:
    model = load_classifier(checkpoint)
    config = model.config
    datamodule = ClassificationDataModule(
        data, checkpoint, text_column=text_column, text_pair_column=text_pair_column,
        label_column=label_column, num_labels=config.num_labels,
        label_names=[config.id2label[i] for i in range(config.num_labels)] if config.num_labels > 1 else None,
        validation_split=split, eval_batch_size=batch_size, max_seq_length=max_seq_length)
    datamodule.setup("validate")
    dataset = datamodule.datasets[split]
    rows = [dict(row, index=position) for position, row in enumerate(dataset)]
    logits = classifier_logits(model, rows, column_values(dataset, "length"), batch_size=batch_size,
                               pad_token_id=special_token_ids(datamodule.tokenizer)["pad"])
    labels = torch.as_tensor(column_values(dataset, "labels"))
    if config.num_labels == 1:
        predictions, loss = logits.squeeze(-1), F.mse_loss(logits.squeeze(-1), labels.float())
    else:
        predictions, loss = logits.argmax(-1), F.cross_entropy(logits, labels)
    metrics = {"loss": loss, **validation_metrics(config)(predictions, labels)}
    return {key.removeprefix("val/"): float(value) for key, value in metrics.items()}


def main(argv: list[str], prog: str) -> None:
    parser = ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("checkpoint", help="a fine-tuned checkpoint folder")
    parser.add_argument("--data", required=True,
                        help="a hub id (stanfordnlp/sst2), a folder of split files, or one file")
    parser.add_argument("--split", default="validation", help="the split to evaluate (a single file is 'train')")
    parser.add_argument("--text-column", default="sentence")
    parser.add_argument("--text-pair-column", default=None)
    parser.add_argument("--label-column", default="label")
    parser.add_argument("--batch-size", type=positive_int, default=256)
    parser.add_argument("--max-seq-length", type=positive_int, default=128)
    parser.add_argument("--output", type=output_file(".json"), help="metrics JSON file (default: <checkpoint>/eval_<split>.json)")
    args = parser.parse_args(argv)
    metrics = evaluate(args.checkpoint, args.data, split=args.split, text_column=args.text_column,
                       text_pair_column=args.text_pair_column, label_column=args.label_column,
                       batch_size=args.batch_size, max_seq_length=args.max_seq_length)
    output = Path(args.output or Path(args.checkpoint) / f"eval_{args.split}.json")
    report = json.dumps({"checkpoint": args.checkpoint, "data": args.data, "split": args.split, **metrics}, indent=2)
    write_atomically(output, lambda temp: Path(temp).write_text(report + "\n"))
    for key, value in metrics.items():
        print(f"{key}: {value:.4f}")
    print(f"Metrics written to {output}")
