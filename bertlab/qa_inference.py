"""Inference with a span head (extractive question answering) — what `predict` and `evaluate` run on one: each
question read with its context in windows (bertlab.data.question_answering), its answer the best span over them
(bertlab.span_decoding), and a labelled split's SQuAD exact match and F1."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from bertlab.data.question_answering import OFFSETS, QuestionAnsweringDataModule, Question, encode_questions
from bertlab.errors import CheckpointError
from bertlab.checkpoint.dispatch import WEIGHTS_NAME, read_config
from bertlab.inference import length_sorted_batches
from bertlab.lit.question_answering import split_scores
from bertlab.model import BertForQuestionAnswering
from bertlab.span_decoding import Window, best_spans
from bertlab.tokenizer import special_token_ids

SPAN_HEAD = "BertForQuestionAnswering"


def is_span_head(path: str) -> bool:
    """Whether the checkpoint's config.json names a question-answering model."""
    config = Path(path) / "config.json"
    return config.is_file() and SPAN_HEAD in (read_config(Path(path)).architectures or ())


def load_span_head(path: str) -> BertForQuestionAnswering:
    """A fine-tuned span head; one without trained `qa_outputs` weights is refused in one line."""
    model = BertForQuestionAnswering.from_pretrained(path)
    untrained = [key for key in model.load_report.missing if key.startswith(("qa_outputs.", "head."))]
    if untrained:
        raise CheckpointError(f"{path}: no trained span head ({', '.join(untrained)} not in its {WEIGHTS_NAME})")
    return model


@torch.inference_mode()
def question_windows(model: BertForQuestionAnswering, tokenizer, questions: Sequence[Question], *,
                     max_seq_length: int = 384, doc_stride: int | None = 128, batch_size: int = 64) -> list[Window]:
    """Every window of the questions with the model's start and end logits."""
    model.eval()
    encoded = encode_questions(tokenizer, questions, max_seq_length, doc_stride)
    rows = [{"input_ids": ids, "token_type_ids": types, "index": index}
            for index, (ids, types) in enumerate(zip(encoded["input_ids"], encoded["token_type_ids"]))]
    device = next(model.parameters()).device
    windows = []
    for batch in length_sorted_batches(rows, encoded["length"], pad_token_id=special_token_ids(tokenizer)["pad"],
                                       batch_size=batch_size):
        output = model(*(batch[key].to(device) for key in ("input_ids", "attention_mask", "token_type_ids")))
        start, end = output.start_logits.float().cpu().numpy(), output.end_logits.float().cpu().numpy()
        for row, index in enumerate(batch["index"].tolist()):
            length = encoded["length"][index]
            windows.append(Window(encoded["example"][index], start[row, :length], end[row, :length],
                                  *(np.asarray(encoded[key][index]) for key in OFFSETS)))
    return windows


def answer(model: BertForQuestionAnswering, tokenizer, questions: Sequence[str], contexts: Sequence[str], *,
           max_seq_length: int = 384, doc_stride: int | None = 128, batch_size: int = 64, n_best: int = 20,
           max_answer_length: int = 30) -> list[dict]:
    """Each question's answer in its context: the text, its character span and its score (start + end logit);
    an empty answer where no window has a valid span."""
    asked = [Question(str(i), question, context, ()) for i, (question, context) in enumerate(zip(questions, contexts))]
    windows = question_windows(model, tokenizer, asked, max_seq_length=max_seq_length, doc_stride=doc_stride,
                               batch_size=batch_size)
    spans = best_spans(windows, n_best=n_best, max_answer_length=max_answer_length)
    return [{"answer": context[spans[i].start:spans[i].end], "start": spans[i].start, "end": spans[i].end,
             "score": round(spans[i].score, 6)} if i in spans else {"answer": "", "start": None, "end": None,
                                                                      "score": None}
            for i, context in enumerate(contexts)]


def split_squad_scores(checkpoint: str, model: BertForQuestionAnswering, data: str, *, split: str = "validation",
                       max_seq_length: int = 384, doc_stride: int | None = 128, batch_size: int = 64,
                       n_best: int = 20, max_answer_length: int = 30) -> dict[str, float]:
    """exact_match and f1 of the span head on `split` of `data` (SQuAD JSON or the hub's flat schema)."""
    datamodule = QuestionAnsweringDataModule(data, checkpoint, validation_split=split, max_seq_length=max_seq_length,
                                             doc_stride=doc_stride)
    questions = datamodule.questions(split)
    windows = question_windows(model, datamodule.tokenizer, questions, max_seq_length=max_seq_length,
                               doc_stride=doc_stride, batch_size=batch_size)
    return split_scores(questions, windows, n_best, max_answer_length)
