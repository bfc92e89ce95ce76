"""`QuestionAnsweringModule`: fine-tunes `BertForQuestionAnswering` on extractive question answering (SQuAD),
scored on SQuAD's exact match and F1 (bertlab.squad_metrics) of the best span of each question's windows."""

from __future__ import annotations

from typing import Annotated, Any

import torch

from bertlab.argument_checks import Count, checks_arguments
from bertlab.data.question_answering import OFFSETS, TARGETS, Question
from bertlab.lit.fine_tuning import FineTuningModule, per_piece_forward_flops
from bertlab.lit.token_classification import gathered
from bertlab.model import BertForQuestionAnswering
from bertlab.span_decoding import Window, best_spans
from bertlab.squad_metrics import squad_scores
from bertlab.value_rules import Interval


def answer_texts(questions: list[Question], windows: list[Window], n_best: int,
                 max_answer_length: int) -> dict[str, str]:
    """Each question's predicted answer (by id): its best span's text in the context."""
    spans = best_spans(windows, n_best=n_best, max_answer_length=max_answer_length)
    return {questions[row].id: questions[row].context[span.start:span.end] for row, span in spans.items()}


def split_scores(questions: list[Question], windows: list[Window], n_best: int,
                 max_answer_length: int) -> dict[str, float]:
    """exact_match and f1 of the windows' answers against the questions' gold texts."""
    predicted = answer_texts(questions, windows, n_best, max_answer_length)
    return squad_scores(predicted, {q.id: [text for text, _ in q.answers] for q in questions})


@checks_arguments
class QuestionAnsweringModule(FineTuningModule):
    """Answer spans: FineTuningModule's arguments, and `n_best` (the start and end positions of each window
    paired into spans) and `max_answer_length` (in pieces) of the decoding (bertlab.span_decoding). Validation
    logs val/exact_match and val/f1 of the trainer's data module's `validation_questions` (a
    QuestionAnsweringDataModule's), and dev/… of a second loader's (the validation split beside a selection split)."""

    model_class = BertForQuestionAnswering
    targets = TARGETS

    def __init__(self, *args: Any, n_best: Count = 20, max_answer_length: Annotated[int, Interval("[1, inf)")] = 30,
                 **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.keep_options(n_best=n_best, max_answer_length=max_answer_length)
        self.n_best, self.max_answer_length = n_best, max_answer_length
        self._windows: dict[int, list[Window]] = {}  # per validation loader

    def forward_flops(self, batch_size: int, length: int) -> float:
        return per_piece_forward_flops(self.model, batch_size, length)

    def on_validation_epoch_start(self) -> None:
        self._windows = {}

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        output = self._forward(batch, **{key: batch[key] for key in TARGETS})
        self._windows.setdefault(dataloader_idx, []).extend(batch_windows(batch, output))
        prefix = "val/" if dataloader_idx == 0 else "dev/"
        self.log(f"{prefix}loss", output.loss, prog_bar=dataloader_idx == 0, batch_size=batch["input_ids"].shape[0],
                 add_dataloader_idx=False)

    def on_validation_epoch_end(self) -> None:
        loaders = self.trainer.datamodule.validation_questions()
        for index, windows in sorted(self._windows.items()):
            scores = split_scores(loaders[index], gathered(windows), self.n_best, self.max_answer_length)
            prefix = "val/" if index == 0 else "dev/"
            self.log_dict({f"{prefix}{name}": value for name, value in scores.items()}, prog_bar=index == 0)


def batch_windows(batch: dict[str, torch.Tensor], output) -> list[Window]:
    """The batch's windows with their logits, cut to their length."""
    lengths = batch["attention_mask"].sum(-1).tolist()
    start, end = output.start_logits.float().cpu().numpy(), output.end_logits.float().cpu().numpy()
    offsets = [batch[key].cpu().numpy() for key in OFFSETS]
    return [Window(int(example), start[row, :length], end[row, :length], offsets[0][row, :length],
                   offsets[1][row, :length])
            for row, (example, length) in enumerate(zip(batch["example"].tolist(), lengths))]
