"""Question answering data (bertlab.data.question_answering): SQuAD's nested JSON and the hub's flat schema,
answers found in their windows, long contexts read with a stride, and one-line refusals of bad rows."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from bertlab.data.question_answering import QuestionAnsweringDataModule, squad_splits
from bertlab.errors import DataError
from bertlab.span_decoding import OUTSIDE_CONTEXT
from bertlab.tokenizer import save_tokenizer, train_tokenizer

FILLER = "the river runs by the old town and the hills rise behind it ."
CONTEXT = "anna lives in paris . bert lives in rome ."
QUESTIONS = [("q0", "where does anna live ?", "paris"), ("q1", "where does bert live ?", "rome")]


def squad_document(context: str = CONTEXT, questions=QUESTIONS) -> dict:
    qas = [{"id": key, "question": question, "answers": [{"text": answer, "answer_start": context.index(answer)}]}
           for key, question, answer in questions]
    return {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}


def write_squad(folder: Path, document: dict | None = None, splits=("train", "dev")) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split in splits:
        (folder / f"{split}-v1.1.json").write_text(json.dumps(document or squad_document()))
    return folder


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("tokenizer")
    texts = [FILLER, CONTEXT, *(question for _, question, _ in QUESTIONS)] * 5
    save_tokenizer(train_tokenizer(texts, vocab_size=80, min_frequency=1), directory)
    return directory


def datamodule(source: Path, tokenizer_dir: Path, **options) -> QuestionAnsweringDataModule:
    return QuestionAnsweringDataModule(str(source), str(tokenizer_dir), **{
        "batch_size": 4, "eval_batch_size": 4, "max_seq_length": 64, "doc_stride": 16, **options})


def window_texts(data: QuestionAnsweringDataModule, split: str) -> list[str]:
    """Each window's labelled answer, read back from the context through its offsets ('' for [CLS])."""
    questions, rows = data.questions(split), data.datasets[split]
    texts = []
    for row in rows:
        start, end = int(row["start_positions"]), int(row["end_positions"])
        context = questions[int(row["example"])].context
        texts.append("" if start == 0 else context[int(row["offset_starts"][start]):int(row["offset_ends"][end])])
    return texts


def test_squad_json_and_the_flat_schema_read_alike(tmp_path):
    nested = squad_splits(str(write_squad(tmp_path / "nested")))
    assert sorted(nested) == ["train", "validation"]  # dev-v1.1.json is the validation split
    flat = tmp_path / "flat"
    flat.mkdir()
    pd.DataFrame(nested["train"].to_list()).to_parquet(flat / "train.parquet")
    assert squad_splits(str(flat))["train"].to_list() == nested["train"].to_list()
    assert nested["train"][0]["answers"] == {"text": ["paris"], "answer_start": [CONTEXT.index("paris")]}


def test_each_answer_is_labelled_on_its_pieces(tmp_path, tokenizer_dir):
    data = datamodule(write_squad(tmp_path / "squad"), tokenizer_dir)
    data.setup("fit")
    assert window_texts(data, "train") == ["paris", "rome"]
    row = data.datasets["train"][0]
    question_pieces = row["offset_starts"][:8]
    assert question_pieces[0] == OUTSIDE_CONTEXT  # [CLS] and the question are not the context's


def test_a_long_context_is_read_in_overlapping_windows_that_keep_the_answer(tmp_path, tokenizer_dir):
    context = " ".join([FILLER] * 6 + [CONTEXT] + [FILLER] * 6)
    data = datamodule(write_squad(tmp_path / "squad", squad_document(context)), tokenizer_dir)
    data.setup("fit")
    rows = data.datasets["train"]
    first = [int(e) for e in rows["example"]].count(0)
    assert first > 3 and max(rows["length"]) <= 64
    texts = window_texts(data, "train")
    assert "paris" in texts[:first] and set(texts[:first]) == {"", "paris"}  # windows without it point at [CLS]
    starts = [list(rows[i]["offset_starts"]) for i in range(2)]
    shared = set(starts[0]) & set(starts[1]) - {OUTSIDE_CONTEXT}
    assert len(shared) == 16  # consecutive windows overlap by doc_stride pieces


def test_an_answer_at_a_windows_edge_is_whole_in_the_next_window(tmp_path, tokenizer_dir):
    context = " ".join([FILLER] * 3) + " paris and rome ."
    data = datamodule(write_squad(tmp_path / "squad", squad_document(context, [("q", "where ?", "paris and rome")])),
                      tokenizer_dir, max_seq_length=40, doc_stride=8)
    data.setup("fit")
    texts = window_texts(data, "train")
    assert len(texts) > 1 and texts.count("paris and rome") >= 1 and texts[0] == ""


def test_a_context_too_long_without_a_stride_is_refused(tmp_path, tokenizer_dir):
    context = " ".join([FILLER] * 6 + [CONTEXT])
    data = datamodule(write_squad(tmp_path / "squad", squad_document(context)), tokenizer_dir, doc_stride=None)
    with pytest.raises(DataError, match="the context of question 'q0' does not fit in max_seq_length 64 .*doc_stride"):
        data.setup("fit")


@pytest.mark.parametrize("change, message", [
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][1]["answers"][0].update(answer_start=3),
     "the answer 'rome' of question 'q1' is not at its answer_start 3; the context there reads 'a li'"),
    (lambda d: d["data"][0]["paragraphs"][0].pop("context"), "article 0, paragraph 0 has no key 'context'"),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][0].pop("question"),
     "paragraph 0, question 0 has no key 'question'"),
])
def test_bad_rows_are_refused_in_one_line(tmp_path, tokenizer_dir, change, message):
    document = squad_document()
    change(document)
    with pytest.raises(DataError, match=message.replace("(", r"\(")) as error:
        datamodule(write_squad(tmp_path / "squad", document), tokenizer_dir).setup("fit")
    assert "\n" not in str(error.value)


def test_a_flat_split_without_a_column_is_refused(tmp_path, tokenizer_dir):
    folder = tmp_path / "flat"
    folder.mkdir()
    pd.DataFrame({"id": ["a"], "question": ["q"], "context": ["c"]}).to_parquet(folder / "train.parquet")
    with pytest.raises(DataError, match=r"no column\(s\) \['answers'\]"):
        datamodule(folder, tokenizer_dir).questions("train")


def paragraphs_document(contexts: int = 12, questions_per_context: int = 3) -> dict:
    """`contexts` paragraphs, each asked `questions_per_context` questions."""
    paragraphs = []
    for row in range(contexts):
        context = f"{CONTEXT} {' '.join(FILLER.split()[:row % 10 + 1])} {row} ."
        asked = [(f"c{row}q{i}", question, answer) for i, (_, question, answer) in
                 enumerate((QUESTIONS * questions_per_context)[:questions_per_context])]
        paragraphs.append(squad_document(context, asked)["data"][0]["paragraphs"][0])
    return {"data": [{"title": "t", "paragraphs": paragraphs}]}


def test_the_selection_split_holds_whole_paragraphs_out_of_training(tmp_path, tokenizer_dir):
    source = write_squad(tmp_path / "squad", paragraphs_document())
    data = datamodule(source, tokenizer_dir, selection_fraction=0.25, selection_seed=3)
    data.setup("fit")
    held_out, training = data.questions("selection"), data.questions("train")
    assert len(held_out) == 9 and len(training) == 27  # three paragraphs of the twelve
    every = squad_splits(str(source))["train"]["id"]
    assert sorted(q.id for q in held_out + training) == sorted(every) and len(every) == 36  # each on one side
    assert not {q.context for q in held_out} & {q.context for q in training}
    assert [len(loader) for loader in data.validation_questions()] == [9, 36]
    assert len(data.val_dataloader()) == 2 and set(data.datasets["selection"]["example"]) == set(range(9))
    again = datamodule(source, tokenizer_dir, selection_fraction=0.25, selection_seed=3)
    assert [q.id for q in again.questions("selection")] == [q.id for q in held_out]
    other = datamodule(source, tokenizer_dir, selection_fraction=0.25, selection_seed=4)
    assert [q.id for q in other.questions("selection")] != [q.id for q in held_out]
