"""Answer spans from a span head's start and end logits: the n best start and end positions of each window,
paired into spans that lie in the context, end after they start and are at most `max_answer_length` pieces
long, scored by the sum of their two logits (as transformers' question-answering example and pipeline do);
a question's answer is the best span of all its windows, mapped back to characters of its context through
the pieces' offsets."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

OUTSIDE_CONTEXT = -1  # the character offset of a piece that is not the context's (question, special, padding)


@dataclass(frozen=True)
class Span:
    start: int  # the answer's first character in the context
    end: int  # one past its last character
    score: float  # start logit + end logit


@dataclass(frozen=True)
class Window:
    """One window of a question's context as the model read it."""
    example: int  # the question it reads, by row
    start_logits: np.ndarray  # [pieces]
    end_logits: np.ndarray
    offset_starts: np.ndarray  # each piece's first character in the context, OUTSIDE_CONTEXT off it
    offset_ends: np.ndarray  # one past each piece's last character


def window_spans(window: Window, n_best: int, max_answer_length: int) -> list[Span]:
    """The window's candidate spans, best first."""
    inside = window.offset_starts != OUTSIDE_CONTEXT
    starts = [i for i in np.argsort(-window.start_logits, kind="stable")[:n_best] if inside[i]]
    ends = [i for i in np.argsort(-window.end_logits, kind="stable")[:n_best] if inside[i]]
    spans = [Span(int(window.offset_starts[s]), int(window.offset_ends[e]),
                  float(window.start_logits[s] + window.end_logits[e]))
             for s in starts for e in ends if s <= e < s + max_answer_length]
    return sorted(spans, key=lambda span: -span.score)


def best_spans(windows: Iterable[Window], *, n_best: int = 20, max_answer_length: int = 30) -> dict[int, Span]:
    """Each question's best span over its windows (by row); a question none of whose windows has a valid span
    has none."""
    best: dict[int, Span] = {}
    for window in windows:
        spans = window_spans(window, n_best, max_answer_length)
        if spans and (window.example not in best or spans[0].score > best[window.example].score):
            best[window.example] = spans[0]
    return best
