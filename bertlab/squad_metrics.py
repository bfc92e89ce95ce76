"""SQuAD's exact match and F1, as its official evaluation script (evaluate-v1.1.py) computes them: both texts
normalised (lower case, punctuation removed, the articles a/an/the removed, whitespace collapsed), F1 over the
bag of normalised words, each question scored against the best of its gold answers, a split's scores the mean
over its questions. bertlab reports them as fractions (the script prints them ×100)."""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence

PUNCTUATION = frozenset(string.punctuation)
ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    without_punctuation = "".join(character for character in text.lower() if character not in PUNCTUATION)
    return " ".join(ARTICLES.sub(" ", without_punctuation).split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1(prediction: str, gold: str) -> float:
    predicted, expected = normalize_answer(prediction).split(), normalize_answer(gold).split()
    same = sum((Counter(predicted) & Counter(expected)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(expected)
    return 2 * precision * recall / (precision + recall)


def squad_scores(predictions: Mapping[str, str], answers: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """exact_match and f1 of `predictions` (question id: answer text) against `answers` (question id: its gold
    texts), over the questions of `answers`; one without a prediction scores 0, one without gold answers is not
    scored (SQuAD v1.1 has none)."""
    scored = [key for key, texts in answers.items() if texts]
    if not scored:
        return {"exact_match": 0.0, "f1": 0.0}
    totals = {"exact_match": 0.0, "f1": 0.0}
    for key in scored:
        prediction = predictions.get(key, "")
        totals["exact_match"] += max(exact_match(prediction, gold) for gold in answers[key])
        totals["f1"] += max(f1(prediction, gold) for gold in answers[key])
    return {name: total / len(scored) for name, total in totals.items()}
