"""`python -m bertlab tokenize`: the stage tables, --json, and bad input as one error line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bertlab.commands.tokenize import display_width, table
from bertlab.tokenizer import SPECIAL_TOKENS, load_tokenizer
from tests.bertlab_runs import run_in_process

SENTENCE = "Café naïve: 我爱 unbelievably!"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with an uncased vocab.txt (爱 missing) and nothing else."""
    folder = tmp_path_factory.mktemp("checkpoint")
    vocab = [*SPECIAL_TOKENS, "cafe", "naive", ":", "!", "我", "un", "##believ", "##ably", "second"]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return folder


def test_prints_every_stage_as_a_table(checkpoint, capsys):
    outcome = run_in_process(["tokenize", str(checkpoint), SENTENCE], capsys)
    assert outcome.code == 0, outcome.err
    lines = outcome.out.splitlines()
    assert "normaliser: clean-up, spaces around CJK characters, lower-casing, accent stripping" in lines[0]
    assert "  normalised  cafe naive:  我  爱  unbelievably!" in lines
    assert ["1", "5:10", "naïve", "naive", "naive", "6"] in [line.split() for line in lines]
    unknown = ("  4            13:14  爱            爱            [UNK]      1   "
               "cannot be spelt with the vocabulary's pieces")
    assert unknown in lines, "columns line up in terminal columns, a CJK character taking two"
    assert any(line.split() == ["##ably", "12"] for line in lines), "a continuation piece gets a row of its own"
    assert "final sequence: [CLS] A [SEP], 11 tokens" in lines
    assert any(line.split() == ["0", "[CLS]", "2", "0", "added"] for line in lines)


def test_pair_and_json(checkpoint, capsys):
    outcome = run_in_process(["tokenize", str(checkpoint / "vocab.txt"), SENTENCE, "Second", "--json"], capsys)
    assert outcome.code == 0, outcome.err
    stages = json.loads(outcome.out)
    expected = load_tokenizer(checkpoint).encode(SENTENCE, "Second")
    assert stages["final"]["input_ids"] == expected.ids
    assert stages["final"]["token_type_ids"] == expected.type_ids == [0] * 11 + [1, 1]
    first, second = stages["sentences"]
    assert first["basic_tokens"][0] == {"original": "Café", "span": [0, 4], "normalized": "cafe",
                                        "pieces": [{"token": "cafe", "id": 5}], "special": False, "unknown": None}
    assert second["normalized"] == "second"


def test_a_run_folder_stands_for_its_export(checkpoint, tmp_path, capsys):
    """Every command that takes a checkpoint (predict, evaluate, attention, heads, tokenize) reads a bertlab
    run folder's hf_model/, as `glue` does."""
    export = tmp_path / "run" / "hf_model"
    export.mkdir(parents=True)
    (export / "vocab.txt").write_bytes((checkpoint / "vocab.txt").read_bytes())
    from_run, from_export = (run_in_process(["tokenize", str(path), SENTENCE], capsys)
                             for path in (export.parent, export))
    assert from_run.code == 0, from_run.err
    assert from_run.out == from_export.out


def test_table_columns_line_up_in_terminal_columns():
    lines = table(["word", "id"], [["我爱", "1"], ["cafe", "22"], ["Cafe\u0301", "3"]], indent="")
    assert {display_width(line[: line.rindex(" ") + 1]) for line in lines} == {6}


@pytest.mark.parametrize(("arguments", "code", "message"), [
    (["{missing}", "text"], 1, "tokenizer path {missing} does not exist: expected a directory with tokenizer.json"),
    (["{empty}", "text"], 1, "no tokenizer in {empty}: expected tokenizer.json or vocab.txt there"),
    (["{checkpoint}", "  "], 2, "bertlab tokenize: the text is empty"),
    (["{checkpoint}", "text", ""], 2, "bertlab tokenize: the second text is empty"),
    (["{checkpoint}"], 2, "the following arguments are required: text"),
])
def test_bad_input_is_one_error_line(checkpoint, tmp_path, capsys, arguments, code, message):
    paths = {"missing": tmp_path / "missing", "empty": tmp_path, "checkpoint": checkpoint}
    outcome = run_in_process(["tokenize", *(argument.format(**paths) for argument in arguments)], capsys)
    assert outcome.code == code
    assert len(outcome.error_lines) == 1 and outcome.error_lines[0].startswith("bertlab: error: ")
    assert message.format(**paths) in outcome.error_lines[0]
