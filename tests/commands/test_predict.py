"""`bertlab predict`: pairs of texts, from the command line (`--pair`) and from a file's two columns, are
classified as pairs, as `bertlab.inference.predict` does with `text_pairs`."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from bertlab.inference import load_classifier, predict
from bertlab.tokenizer import load_tokenizer
from tests.bertlab_runs import run_in_process

TEXTS, PAIRS = ["a good film", "the plot is dull"], ["it was fun", "a great cast"]


def probabilities(lines: list[dict]) -> np.ndarray:
    return np.array([[row["probabilities"][name] for name in sorted(row["probabilities"])] for row in lines])


def test_pairs_from_the_command_line_and_from_a_file_are_classified_as_pairs(classifier_dir, tmp_path, capsys):
    model, tokenizer = load_classifier(str(classifier_dir)), load_tokenizer(classifier_dir)
    expected = predict(model, tokenizer, TEXTS, PAIRS)
    assert not np.allclose(expected, predict(model, tokenizer, TEXTS), atol=1e-6)  # the second texts matter
    outcome = run_in_process(["predict", str(classifier_dir), *TEXTS, "--pair", PAIRS[0], "--pair", PAIRS[1]], capsys)
    assert outcome.code == 0, outcome.err
    lines = [json.loads(line) for line in outcome.out.splitlines() if line.startswith("{")]
    assert [(row["text"], row["text_pair"]) for row in lines] == list(zip(TEXTS, PAIRS))
    names = [model.config.id2label[i] for i in range(model.config.num_labels)]
    np.testing.assert_allclose(probabilities(lines), expected[:, np.argsort(names)], atol=1e-6)
    pd.DataFrame({"premise": TEXTS, "hypothesis": PAIRS}).to_csv(tmp_path / "pairs.csv", index=False)
    outcome = run_in_process(["predict", str(classifier_dir), "--file", str(tmp_path / "pairs.csv"), "--column",
                              "premise", "--text-pair-column", "hypothesis"], capsys)
    assert outcome.code == 0, outcome.err
    assert [json.loads(line) for line in outcome.out.splitlines() if line.startswith("{")] == lines


def test_a_pair_for_some_texts_only_is_one_line(classifier_dir, capsys):
    outcome = run_in_process(["predict", str(classifier_dir), *TEXTS, "--pair", PAIRS[0]], capsys)
    assert outcome.code == 2
    assert outcome.error_lines == ["bertlab: error: --pair given 1 time(s) for 2 text(s): give one --pair per text"]
