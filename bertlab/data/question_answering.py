"""Extractive question answering data (SQuAD): a question, its context and the answers' texts with their
character starts in the context.

A question and its context become one sequence pair; a context too long for `max_seq_length` is read in
windows that overlap by `doc_stride` pieces (transformers' `stride`), each window with the whole question, so
an answer cut by one window's edge is whole in the next. A window is labelled with the piece positions of the
question's first answer, or with position 0 ([CLS]) where the answer is not wholly inside it, as BERT's
SQuAD recipe and transformers' example do. Each window keeps its pieces' character offsets in the context,
which take a predicted span back to the context's text (bertlab.span_decoding).

Sources: the hub's flat schema (`rajpurkar/squad`: id, title, context, question, answers {text,
answer_start}) in any format bertlab.data.sources reads, or SQuAD's own JSON files ({data: [{paragraphs:
[{context, qas: [{id, question, answers: [{text, answer_start}]}]}]}]}), a file or a folder of train/dev
files.

A selection split (`selection_fraction` > 0, bertlab.data.selection) holds training questions out to choose the
checkpoint on, whole paragraphs at a time: the questions on one context go to the same side, so no held-out
context is read in training. Validation then scores it first (val/…) and the validation split second (dev/…),
as for sequence classification (bertlab.data.classification).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import datasets
import numpy as np
import torch
from tokenizers import Tokenizer

from bertlab.argument_checks import Count, Seed, SequenceLength, Workers, checks_arguments
from bertlab.data.batches import collate
from bertlab.data.classification import SELECTION_SPLIT, ClassificationDataModule
from bertlab.data.sources import SPLIT_NAMES, load_dataset_source, require_columns
from bertlab.errors import DataError
from bertlab.span_decoding import OUTSIDE_CONTEXT
from bertlab.value_rules import OPEN_PROBABILITY

COLUMNS = ("id", "question", "context", "answers")
TARGETS = ("start_positions", "end_positions")
OFFSETS = ("offset_starts", "offset_ends")
SPAN_LABELS = ["LABEL_0", "LABEL_1"]  # the span head's two outputs, named as transformers names them


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    context: str
    answers: tuple[tuple[str, int], ...]  # (text, answer_start) each; empty for an unlabelled question


def questions_of(dataset: datasets.Dataset, name: str) -> list[Question]:
    """The questions of a split in the flat schema, checked: every column there, each answer's text at its
    answer_start in the context."""
    require_columns(dataset, COLUMNS, name)
    questions = []
    for row, (key, question, context, answers) in enumerate(zip(*(dataset[column] for column in COLUMNS))):
        if not isinstance(answers, Mapping) or not {"text", "answer_start"} <= set(answers):
            raise DataError(f"{name}: question {key!r} (row {row}) has answers {answers!r}; expected "
                            f"{{'text': [...], 'answer_start': [...]}}")
        texts, starts = list(answers["text"]), list(answers["answer_start"])
        if len(texts) != len(starts):
            raise DataError(f"{name}: question {key!r} (row {row}) has {len(texts)} answer texts and {len(starts)} "
                            f"answer_start values; expected one start per text")
        for text, start in zip(texts, starts):
            if not isinstance(start, int) or context[start:start + len(text)] != text:
                found = context[start:start + len(text)] if isinstance(start, int) else start
                raise DataError(f"{name}: the answer {text!r} of question {key!r} is not at its answer_start "
                                f"{start!r}; the context there reads {found!r}")
        questions.append(Question(str(key), question, context, tuple(zip(texts, starts))))
    return questions


def squad_splits(source: str) -> datasets.DatasetDict:
    """The splits of `source` in the flat schema: SQuAD JSON files (a file, or a folder's train/dev files)
    flattened, anything else as bertlab.data.sources loads it."""
    path = Path(source).expanduser()
    files = [path] if path.is_file() else sorted(path.glob("*.json")) if path.is_dir() else []
    nested = {file: document for file in files if isinstance(document := _json(file), dict) and "data" in document}
    if not nested:
        return load_dataset_source(source, what="question-answering dataset")
    return datasets.DatasetDict({_split_of(file): datasets.Dataset.from_list(_flat_rows(document, file))
                                 for file, document in nested.items()})


def _json(file: Path) -> Any:
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):  # JSON lines, or not JSON: bertlab.data.sources reads or refuses it
        return None


def _split_of(file: Path) -> str:
    for split, names in SPLIT_NAMES.items():
        if any(file.stem == name or file.stem.startswith((f"{name}-", f"{name}_")) for name in names):
            return split
    return "train"


def _flat_rows(document: dict, file: Path) -> list[dict]:
    """SQuAD's nested articles → paragraphs → questions as rows of the hub's flat schema."""
    rows = []
    for article_index, article in enumerate(_field(document, "data", list, f"SQuAD file {file}")):
        article_at = f"SQuAD file {file}, article {article_index}"
        for paragraph_index, paragraph in enumerate(_field(article, "paragraphs", list, article_at)):
            paragraph_at = f"{article_at}, paragraph {paragraph_index}"
            context = _field(paragraph, "context", str, paragraph_at)
            for question_index, qa in enumerate(_field(paragraph, "qas", list, paragraph_at)):
                question_at = f"{paragraph_at}, question {question_index}"
                answers = [(_field(answer, "text", str, f"{question_at}, answer {i}"),
                            _field(answer, "answer_start", int, f"{question_at}, answer {i}"))
                           for i, answer in enumerate(_field(qa, "answers", list, question_at))]
                rows.append({"id": str(_field(qa, "id", (str, int), question_at)), "title": article.get("title", ""),
                             "context": context, "question": _field(qa, "question", str, question_at),
                             "answers": {"text": [text for text, _ in answers],
                                         "answer_start": [start for _, start in answers]}})
    if not rows:
        raise DataError(f"SQuAD file {file} holds no questions")
    return rows


def _field(node: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(node, dict) or key not in node:
        raise DataError(f"{where} has no key {key!r}")
    if not isinstance(node[key], kind) or isinstance(node[key], bool):
        raise DataError(f"{where}: {key!r} is {node[key]!r}; expected {getattr(kind, '__name__', 'a string')}")
    return node[key]


def encode_questions(tokenizer: Tokenizer, questions: Sequence[Question], max_seq_length: int,
                     doc_stride: int | None) -> dict[str, list]:
    """The windows of each question: input_ids, token_type_ids, length, the question's row (`example`), the
    context offsets of its pieces (OFFSETS, OUTSIDE_CONTEXT off the context) and the answer's piece positions
    (TARGETS). With `doc_stride` None a context that does not fit in one window is refused."""
    special = tokenizer.num_special_tokens_to_add(True)
    tokenizer.no_padding()
    tokenizer.no_truncation()
    question_pieces = [len(e.ids) for e in tokenizer.encode_batch([q.question for q in questions],
                                                                   add_special_tokens=False)]
    room = max_seq_length - special - max(question_pieces, default=0)
    if room <= (doc_stride or 0):
        longest = questions[int(np.argmax(question_pieces))]
        raise DataError(f"question {longest.id!r} has {max(question_pieces)} pieces: with max_seq_length "
                        f"{max_seq_length} and doc_stride {doc_stride} no window has room for its context; raise "
                        f"max_seq_length, lower doc_stride or shorten the question")
    tokenizer.enable_truncation(max_length=max_seq_length, stride=doc_stride or 0, strategy="only_second")
    encodings = tokenizer.encode_batch([(q.question, q.context) for q in questions])
    encoded: dict[str, list] = {key: [] for key in ("input_ids", "token_type_ids", "length", "example", *OFFSETS,
                                                    *TARGETS)}
    for row, (question, encoding) in enumerate(zip(questions, encodings)):
        if doc_stride is None and encoding.overflowing:
            raise DataError(f"the context of question {question.id!r} does not fit in max_seq_length "
                            f"{max_seq_length} with its question; set data.doc_stride to read it in windows")
        for window in [encoding, *encoding.overflowing]:
            in_context = [sequence == 1 for sequence in window.sequence_ids]
            starts = [start if inside else OUTSIDE_CONTEXT for (start, _), inside in zip(window.offsets, in_context)]
            ends = [end if inside else OUTSIDE_CONTEXT for (_, end), inside in zip(window.offsets, in_context)]
            start_position, end_position = answer_positions(starts, ends, question.answers)
            for key, value in (("input_ids", window.ids), ("token_type_ids", window.type_ids),
                               ("length", len(window.ids)), ("example", row), ("offset_starts", starts),
                               ("offset_ends", ends), ("start_positions", start_position),
                               ("end_positions", end_position)):
                encoded[key].append(value)
    return encoded


def answer_positions(starts: Sequence[int], ends: Sequence[int],
                     answers: Sequence[tuple[str, int]]) -> tuple[int, int]:
    """The first and last piece of the first answer in a window (pieces' context offsets `starts`, `ends`);
    (0, 0), [CLS], where there is no answer or it is not wholly inside the window."""
    context = [i for i, start in enumerate(starts) if start != OUTSIDE_CONTEXT]
    if not answers or not context:
        return 0, 0
    text, answer_start = answers[0]
    answer_end = answer_start + len(text)
    if starts[context[0]] > answer_start or ends[context[-1]] < answer_end:
        return 0, 0
    first = next(i for i in context if ends[i] > answer_start)
    last = next(i for i in reversed(context) if starts[i] < answer_end)
    return first, last


def collate_spans(rows: Sequence[Mapping[str, Any]], *, pad_token_id: int = 0) -> dict[str, torch.Tensor]:
    """`collate`'s batch with the question of each window (`example`), its answer's positions and the context
    offsets of its pieces ([B, L], OUTSIDE_CONTEXT on padding)."""
    batch = collate(rows, pad_token_id=pad_token_id)
    mask = batch["attention_mask"].numpy().astype(bool)
    for key in OFFSETS:
        values = np.full(mask.shape, OUTSIDE_CONTEXT, dtype=np.int64)
        values[mask] = np.concatenate([row[key] for row in rows])
        batch[key] = torch.from_numpy(values)
    for key in ("example", *TARGETS):
        batch[key] = torch.tensor([int(row[key]) for row in rows], dtype=torch.long)
    return batch


@checks_arguments
class QuestionAnsweringDataModule(ClassificationDataModule):
    """Train and validation splits of questions with their contexts and answers (see the module's text);
    `doc_stride`: the pieces each window of a long context shares with the next (null: a context must fit
    whole). Batching, the selection split and the resumable training order are ClassificationDataModule's;
    validation is scored on the questions of each validation loader (`validation_questions`)."""

    collate_rows = staticmethod(collate_spans)

    def __init__(self, source: str, tokenizer: str | Tokenizer, *, train_split: str = "train",
                 validation_split: str = "validation", test_split: str | None = None,
                 max_seq_length: SequenceLength = 384, doc_stride: Count | None = 128, batch_size: Count = 32,
                 eval_batch_size: Count = 128, num_workers: Workers = 0, seed: int = 0,
                 limit_train_samples: Count | None = None, limit_eval_samples: Count | None = None,
                 selection_fraction: Annotated[float, OPEN_PROBABILITY] = 0.0, selection_max_rows: Count = 1000,
                 selection_seed: Seed = 0) -> None:
        super().__init__(source, tokenizer, text_column="question", text_pair_column="context",
                         label_column="answers", num_labels=len(SPAN_LABELS), label_names=SPAN_LABELS,
                         train_split=train_split, validation_split=validation_split, test_split=test_split,
                         max_seq_length=max_seq_length, batch_size=batch_size, eval_batch_size=eval_batch_size,
                         num_workers=num_workers, seed=seed, limit_train_samples=limit_train_samples,
                         limit_eval_samples=limit_eval_samples, selection_fraction=selection_fraction,
                         selection_max_rows=selection_max_rows, selection_seed=selection_seed)
        self.doc_stride = doc_stride
        self._questions: dict[str, list[Question]] = {}

    def questions(self, split: str) -> list[Question]:
        """A split's questions, in row order (the windows' `example`)."""
        if split not in self._questions:
            self._questions[split] = questions_of(self._raw_split(split), f"split {split!r} of {self.source}")
        return self._questions[split]

    def validation_questions(self) -> list[list[Question]]:
        """The questions of each validation loader, in loader order (the selection split's first, if any)."""
        splits = [SELECTION_SPLIT] * (SELECTION_SPLIT in self.datasets) + [self.validation_split]
        return [self.questions(split) for split in splits]

    def _selection_strata_and_texts(self, dataset: datasets.Dataset) -> tuple[np.ndarray, list[list[str]]]:
        """One stratum; a question's text is its context, so the questions on one paragraph are one unit. Only the
        contexts are read: each question is checked once, when its split is prepared."""
        require_columns(dataset, COLUMNS, f"split {self.train_split!r} of {self.source}")
        contexts = dataset["context"]
        return np.zeros(len(contexts), dtype=np.int64), [[context] for context in contexts]

    def _loaded_split(self, split: str) -> datasets.Dataset:
        if self._raw is None:
            self._raw = squad_splits(self.source)
        return super()._loaded_split(split)

    def _prepare_split(self, split: str) -> datasets.Dataset:
        encoded = encode_questions(self.tokenizer, self.questions(split), self.max_seq_length, self.doc_stride)
        encoded["index"] = list(range(len(encoded["input_ids"])))
        integers = datasets.List(datasets.Value("int64"))
        features = {"input_ids": datasets.List(datasets.Value("int32")),
                    "token_type_ids": datasets.List(datasets.Value("int8")), "length": datasets.Value("int32"),
                    "example": datasets.Value("int64"), "index": datasets.Value("int64"),
                    **{key: integers for key in OFFSETS}, **{key: datasets.Value("int64") for key in TARGETS}}
        return datasets.Dataset.from_dict(encoded, features=datasets.Features(features)).with_format("numpy")
