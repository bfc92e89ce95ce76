"""`bertlab predict`: pairs of texts, from the command line (`--pair`) and from a file's two columns, are
classified as pairs, as `bertlab.inference.predict` does with `text_pairs`; on a token classifier, the entities of
each sentence, as JSON lines or a CSV."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from bertlab.commands.predict import main
from bertlab.inference import load_classifier, predict
from bertlab.tokenizer import load_tokenizer
from tests.bertlab_runs import run_in_process
from tests.test_token_inference import tagger_dir

__all__ = ["tagger_dir"]  # the fixture, shared

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


def test_predict_prints_the_entities_of_each_sentence(tagger_dir, capsys):
    main([str(tagger_dir), "anna smith visited paris", "nothing here"], "predict")
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [[(e["entity_group"], e["word"], e["start"], e["end"]) for e in row["entities"]] for row in rows] == [
        [("PER", "anna smith", 0, 10), ("LOC", "paris", 19, 24)], []]
    assert all(0 < e["score"] <= 1 for e in rows[0]["entities"])


def test_predict_writes_the_entities_of_a_csv_row_as_json(tagger_dir, tmp_path):
    main([str(tagger_dir), "the city of oslo", "--output", str(tmp_path / "out.csv")], "predict")
    (entities,) = pd.read_csv(tmp_path / "out.csv")["entities"].map(json.loads)
    assert [(e["entity_group"], e["word"]) for e in entities] == [("LOC", "oslo")]
