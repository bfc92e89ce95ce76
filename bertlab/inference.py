"""Batched, length-sorted inference with a sequence classifier — what `predict`, `evaluate`, `heads`
and the benchmark run: rows are batched longest first, so that little compute goes to padding, and
the results come back in row order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from bertlab.checkpoint.dispatch import WEIGHTS_NAME, read_config
from bertlab.data.batches import collate, length_sorted_order
from bertlab.data.classification import ClassificationDataModule
from bertlab.data.encoding import column_values, encode_texts
from bertlab.errors import CheckpointError
from bertlab.lit.classification import validation_metrics
from bertlab.model import BertForSequenceClassification
from bertlab.tokenizer import special_token_ids


def load_classifier(path: str) -> BertForSequenceClassification:
    """A fine-tuned classifier. A checkpoint without trained head weights (a masked-LM export, a
    classifier whose head tensors are missing or renamed) is refused: its head would be random."""
    config = Path(path) / "config.json"  # a folder without one: from_pretrained says what is missing
    if config.is_file() and "BertForTokenClassification" in (read_config(config).architectures or ()):
        raise CheckpointError(f"{path}: a token classifier (BertForTokenClassification), not a sentence classifier; "
                              f"`predict` and `evaluate` tag its words, the other commands need sentence labels")
    model = BertForSequenceClassification.from_pretrained(path)
    report = model.load_report
    untrained = [key for key in (*report.missing, *(key for key, _, _ in report.mismatched))
                 if key.startswith(("classifier.", "bert.pooler."))]
    if untrained:
        raise CheckpointError(f"{path}: no trained classifier head ({', '.join(untrained)} not in its "
                              f"{WEIGHTS_NAME}); fine-tune it first: python -m bertlab fine-tune model.init_from={path}")
    return model


def length_sorted_batches(rows: Sequence[Mapping], lengths: Sequence[int], *, pad_token_id: int, batch_size: int):
    """Padded batches of `rows` (dicts with input_ids, token_type_ids, `index` and maybe labels),
    longest first."""
    order = length_sorted_order(np.asarray(lengths))
    for start in range(0, len(order), batch_size):
        yield collate([rows[i] for i in order[start:start + batch_size]], pad_token_id=pad_token_id)


@torch.inference_mode()
def classifier_logits(model: BertForSequenceClassification, rows: Sequence[Mapping], lengths: Sequence[int], *,
                      pad_token_id: int, batch_size: int = 64, head_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Logits [N, num_labels] (float32, on the CPU) of `rows` — dicts with input_ids, token_type_ids
    and `index`, the row's position — in row order, computed on the model's device."""
    model.eval()
    device = next(model.parameters()).device
    outputs = torch.zeros(len(rows), model.config.num_labels)
    for batch in length_sorted_batches(rows, lengths, pad_token_id=pad_token_id, batch_size=batch_size):
        inputs = [batch[key].to(device) for key in ("input_ids", "attention_mask", "token_type_ids")]
        outputs[batch["index"]] = model(*inputs, head_mask=head_mask).logits.float().cpu()
    return outputs


@dataclass
class LabelledSplit:
    """A tokenized, labelled dataset split, ready for `classifier_logits`."""
    rows: list[dict]
    lengths: np.ndarray
    labels: torch.Tensor
    pad_token_id: int


def load_labelled_split(checkpoint: str, model: BertForSequenceClassification, data: str, *,
                        split: str = "validation", text_column: str = "sentence", text_pair_column: str | None = None,
                        label_column: str = "label", max_seq_length: int = 128) -> LabelledSplit:
    """`split` of `data` (a hub id, a folder of split files or a file), read with the checkpoint's
    tokenizer and its classifier's label names."""
    config = model.config
    datamodule = ClassificationDataModule(
        data, checkpoint, text_column=text_column, text_pair_column=text_pair_column,
        label_column=label_column, num_labels=config.num_labels,
        label_names=[config.id2label[i] for i in range(config.num_labels)] if config.num_labels > 1 else None,
        validation_split=split, max_seq_length=max_seq_length)
    datamodule.setup("validate")
    dataset = datamodule.datasets[split]
    return LabelledSplit(rows=[dict(row, index=position) for position, row in enumerate(dataset)],
                         lengths=column_values(dataset, "length"),
                         labels=torch.as_tensor(column_values(dataset, "labels")),
                         pad_token_id=special_token_ids(datamodule.tokenizer)["pad"])


def split_metrics(model: BertForSequenceClassification, data: LabelledSplit, *, batch_size: int = 256,
                  head_mask: torch.Tensor | None = None) -> dict[str, float]:
    """Loss and validation metrics (accuracy, F1, MCC; or Pearson, Spearman, MSE) of the classifier
    on a labelled split, with `head_mask` applied when given."""
    logits = classifier_logits(model, data.rows, data.lengths, pad_token_id=data.pad_token_id,
                               batch_size=batch_size, head_mask=head_mask)
    if model.config.num_labels == 1:
        predictions, loss = logits.squeeze(-1), F.mse_loss(logits.squeeze(-1), data.labels.float())
    else:
        predictions, loss = logits.argmax(-1), F.cross_entropy(logits, data.labels)
    metrics = {"loss": loss, **validation_metrics(model.config)(predictions, data.labels)}
    return {key.removeprefix("val/"): float(value) for key, value in metrics.items()}


def predict(model: BertForSequenceClassification, tokenizer, texts: Sequence[str],
            text_pairs: Sequence[str] | None = None, *, batch_size: int = 64, max_seq_length: int = 128) -> np.ndarray:
    """Class probabilities [N, num_labels] (or regression values [N, 1]) of texts (or text pairs),
    in input order."""
    encoded = encode_texts(tokenizer, texts, text_pairs, max_seq_length=max_seq_length)
    rows = [{"input_ids": ids, "token_type_ids": types, "index": index}
            for index, (ids, types) in enumerate(zip(encoded["input_ids"], encoded["token_type_ids"]))]
    logits = classifier_logits(model, rows, encoded["length"], pad_token_id=special_token_ids(tokenizer)["pad"],
                               batch_size=batch_size)
    return (logits if model.config.num_labels == 1 else logits.softmax(-1)).numpy()
