"""One pass of a teacher over texts: tokenized by its own tokenizer, batches sorted by length, in eval
mode, without gradients, under the run's autocast dtype, with its progress logged."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import datasets
import torch
from tokenizers import Tokenizer

from bertlab.data.batches import length_sorted_dataloader
from bertlab.data.encoding import tokenize_dataset
from bertlab.model import BertForSequenceClassification
from bertlab.tokenizer import special_token_ids

log = logging.getLogger("bertlab")
PROGRESS_EVERY_SECONDS = 10.0
AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "16": torch.float16}  # by the prefix of Lightning's precision


def autocast_dtype(precision: str) -> torch.dtype | None:
    """The autocast dtype of a Lightning precision ("bf16-mixed": bfloat16); None: float32."""
    return next((dtype for prefix, dtype in AUTOCAST_DTYPES.items() if precision.startswith(prefix)), None)


def labelling_record(sentences: int, seconds: float, device: torch.device, dtype: torch.dtype | None) -> dict[str, Any]:
    """How a teacher's pass went, as teacher.json and the cache file record it."""
    return {"sentences": sentences, "seconds": round(seconds, 3),
            "sentences_per_sec": round(sentences / seconds, 1) if sentences else None,
            "device": str(device), "dtype": str(dtype or torch.float32).removeprefix("torch.")}


def run_teacher(model: BertForSequenceClassification, tokenizer: Tokenizer, texts: list[str], pairs: list[str] | None,
                layers: Sequence[int], logits: torch.Tensor, hidden: torch.Tensor | None, rows: torch.Tensor, *,
                max_seq_length: int, batch_size: int, device: torch.device, dtype: torch.dtype | None) -> None:
    """Writes the logits (float32) and the [CLS] states after `layers` (`hidden`: None without layers) of
    `texts[i]` into row `rows[i]` of `logits` and `hidden`, each text read once."""

    def keep(inputs: list[torch.Tensor], batch_rows: torch.Tensor) -> None:
        output = model(*inputs, output_hidden_states=bool(layers))
        logits[rows[batch_rows]] = output.logits.float().cpu()
        if hidden is not None:
            cls = torch.stack([output.hidden_states[layer][:, 0] for layer in layers], dim=1)
            hidden[rows[batch_rows]] = cls.to(hidden.dtype).cpu()

    for_each_batch(model, tokenizer, texts, pairs, keep, max_seq_length=max_seq_length, batch_size=batch_size,
                   device=device, dtype=dtype)


@torch.no_grad()
def for_each_batch(model: torch.nn.Module, tokenizer: Tokenizer, texts: list[str], pairs: list[str] | None,
                   step: Callable[[list[torch.Tensor], torch.Tensor], None], *, max_seq_length: int, batch_size: int,
                   device: torch.device, dtype: torch.dtype | None) -> None:
    """Calls `step(inputs, rows)` on every batch of the texts, tokenized by the teacher's `tokenizer` and sorted
    by length: `inputs` (input_ids, attention_mask, token_type_ids) on `device`, `rows` the texts' positions.
    The teacher `model` runs in eval mode, under autocast to `dtype` (None: float32); progress is logged."""
    columns = {"text": texts} if pairs is None else {"text": texts, "pair": pairs}
    tokenized = tokenize_dataset(datasets.Dataset.from_dict(columns), tokenizer, text_column="text",
                                 text_pair_column=None if pairs is None else "pair", name="the teacher's texts",
                                 max_seq_length=min(max_seq_length, model.config.max_position_embeddings))
    model.to(device).eval()
    started = reported = time.perf_counter()
    done = 0
    with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
        for batch in length_sorted_dataloader(tokenized, batch_size, pad_token_id=special_token_ids(tokenizer)["pad"]):
            step([batch[key].to(device) for key in ("input_ids", "attention_mask", "token_type_ids")], batch["index"])
            done += len(batch["index"])
            if time.perf_counter() - reported >= PROGRESS_EVERY_SECONDS:
                reported = time.perf_counter()
                rate = done / (reported - started)
                log.info("Teacher: %d/%d sentences, %.0f/s, %.0f s to go", done, len(texts), rate,
                         (len(texts) - done) / rate)
