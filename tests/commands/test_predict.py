"""`bertlab predict` on a token classifier: the entities of each sentence, as JSON lines or a CSV."""

from __future__ import annotations

import json

import pandas as pd

from bertlab.commands.predict import main
from tests.test_token_inference import tagger_dir

__all__ = ["tagger_dir"]  # the fixture, shared


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
