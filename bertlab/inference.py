"""Batched, length-sorted inference with a sequence classifier — what `predict`, `evaluate` and the
benchmark run: rows are batched longest first, so that little compute goes to padding, and the
results come back in row order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from bertlab.data.classification import collate, encode_texts
from bertlab.data.sampling import length_sorted_order
from bertlab.errors import CheckpointError
from bertlab.hf_format import WEIGHTS_NAME
from bertlab.model import BertForSequenceClassification
from bertlab.tokenizer import special_token_ids


def load_classifier(path: str) -> BertForSequenceClassification:
    """A fine-tuned classifier. A checkpoint without trained head weights (a masked-LM export, a
    classifier whose head tensors are missing or renamed) is refused: its head would be random."""
    model = BertForSequenceClassification.from_pretrained(path)
    report = model.load_report
    untrained = [key for key in (*report.missing, *(key for key, _, _ in report.mismatched))
                 if key.startswith(("classifier.", "bert.pooler."))]
    if untrained:
        raise CheckpointError(f"{path}: no trained classifier head ({', '.join(untrained)} not in its "
                              f"{WEIGHTS_NAME}); fine-tune it first: python -m bertlab fine-tune model.init_from={path}")
    return model


@torch.inference_mode()
def classifier_logits(model: BertForSequenceClassification, rows: Sequence[Mapping], lengths: Sequence[int], *,
                      pad_token_id: int, batch_size: int = 64) -> torch.Tensor:
    """Logits [N, num_labels] (float32, on the CPU) of `rows` — dicts with input_ids, token_type_ids
    and `index`, the row's position — in row order, computed on the model's device."""
    model.eval()
    device = next(model.parameters()).device
    order = length_sorted_order(np.asarray(lengths))
    outputs = torch.zeros(len(rows), model.config.num_labels)
    for start in range(0, len(order), batch_size):
        batch = collate([rows[i] for i in order[start:start + batch_size]], pad_token_id=pad_token_id)
        inputs = [batch[key].to(device) for key in ("input_ids", "attention_mask", "token_type_ids")]
        outputs[batch["index"]] = model(*inputs).logits.float().cpu()
    return outputs


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
