"""SQuAD's exact match and F1 (bertlab.squad_metrics) against values worked out by hand from the official
script's normalisation."""

from __future__ import annotations

import pytest

from bertlab.squad_metrics import exact_match, f1, normalize_answer, squad_scores


@pytest.mark.parametrize("text, normalised", [
    ("The Eiffel Tower!", "eiffel tower"),          # lower case, punctuation and the article out
    ("  an   apple, a pear ", "apple pear"),       # whitespace collapsed
    ("Theater of an era", "theater of era"),       # articles as whole words only
    ("U.S.A.", "usa"),
])
def test_normalisation(text, normalised):
    assert normalize_answer(text) == normalised


def test_exact_match_after_normalisation():
    assert exact_match("the Eiffel tower.", "Eiffel Tower") == 1.0
    assert exact_match("Eiffel", "Eiffel Tower") == 0.0


def test_f1_counts_shared_words():
    # prediction "denver broncos won" (3 words), gold "broncos" (1): 1 shared → p 1/3, r 1, F1 2·(1/3)/(4/3) = 0.5
    assert f1("Denver Broncos won", "the Broncos") == pytest.approx(0.5)
    # repeated words count as often as both have them: "a b b" vs "b b c" share 2 → p 2/3, r 2/3
    assert f1("x y y", "y y z") == pytest.approx(2 / 3)
    assert f1("nothing", "alike") == 0.0
    assert f1("", "Broncos") == 0.0


def test_a_question_scores_its_best_gold_answer_and_the_split_is_the_mean():
    scores = squad_scores({"q1": "Denver Broncos", "q2": "in 1990"},
                          {"q1": ["Broncos", "Denver Broncos"], "q2": ["1990 season"], "q3": ["missing"]})
    # q1: exact on its second answer; q2: "in 1990" vs "1990 season" share 1 word, p 1/2 r 1/2 → F1 1/2; q3: 0
    assert scores["exact_match"] == pytest.approx(1 / 3)
    assert scores["f1"] == pytest.approx((1 + 0.5 + 0) / 3)
