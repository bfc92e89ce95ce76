"""Span decoding (bertlab.span_decoding): the best valid span of a window, back in characters, and a question's
best over its windows."""

from __future__ import annotations

import numpy as np

from bertlab.span_decoding import OUTSIDE_CONTEXT, Window, best_spans, window_spans

# Pieces: [CLS] q q [SEP] c0 c1 c2 c3 [SEP]; the context pieces start at characters 0, 4, 8, 12 and are 3 long.
STARTS = np.array([OUTSIDE_CONTEXT] * 4 + [0, 4, 8, 12] + [OUTSIDE_CONTEXT])
ENDS = np.where(STARTS == OUTSIDE_CONTEXT, OUTSIDE_CONTEXT, STARTS + 3)


def window(start_logits, end_logits, example=0) -> Window:
    return Window(example, np.asarray(start_logits, dtype=float), np.asarray(end_logits, dtype=float), STARTS, ENDS)


def test_the_best_span_is_in_the_context_and_maps_to_characters():
    # [CLS] and the question score highest, but they are not the context's
    spans = window_spans(window([9, 8, 0, 0, 1, 3, 0, 0, 0], [9, 0, 8, 0, 0, 0, 2, 1, 0]), 20, 30)
    assert (spans[0].start, spans[0].end, spans[0].score) == (4, 11, 5.0)  # c1..c2


def test_an_end_before_its_start_or_a_span_too_long_is_not_a_candidate():
    logits = window([0, 0, 0, 0, 0, 0, 0, 5, 0], [0, 0, 0, 0, 5, 0, 0, 1, 0])
    assert (window_spans(logits, 20, 30)[0].start, window_spans(logits, 20, 30)[0].end) == (12, 15)  # c3..c3
    wide = window([0, 0, 0, 0, 5, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0, 5, 0])
    assert window_spans(wide, 20, 4)[0].end == 15 and window_spans(wide, 20, 3)[0].end != 15


def test_a_question_takes_its_best_window():
    weak = window([0, 0, 0, 0, 1, 0, 0, 0, 0], [0, 0, 0, 0, 1, 0, 0, 0, 0])
    strong = window([0, 0, 0, 0, 0, 0, 4, 0, 0], [0, 0, 0, 0, 0, 0, 4, 0, 0])
    other = window([0, 0, 0, 0, 0, 0, 0, 9, 0], [0, 0, 0, 0, 0, 0, 0, 9, 0], example=1)
    best = best_spans([weak, strong, other])
    assert (best[0].start, best[0].score) == (8, 8.0) and best[1].start == 12
