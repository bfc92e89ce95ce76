"""Inference with a span head (bertlab.qa_inference) and the commands on one: evaluate scores a split as the
Lightning validation does, predict answers a question from its context, and a question without one is refused."""

from __future__ import annotations

import json

import lightning as L
import pytest
import torch

from bertlab.commands import predict
from bertlab.errors import UsageError
from bertlab.lit.question_answering import QuestionAnsweringModule
from bertlab.model import BertForQuestionAnswering
from bertlab.qa_inference import answer, is_span_head, split_squad_scores
from bertlab.tokenizer import save_tokenizer, train_tokenizer
from tests.data.test_question_answering import datamodule, write_squad
from tests.lit.helpers import adamw, small_config, trainer
from tests.lit.test_question_answering import CITIES, NAMES, people_document


@pytest.fixture(scope="module")
def span_head(tmp_path_factory):
    """A tiny span head fine-tuned a few steps on made questions, saved with its tokenizer; and its data."""
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("qa")
    texts = [f"where does {name} live ? {name} lives in {city} ." for name in NAMES for city in CITIES]
    save_tokenizer(train_tokenizer(texts, vocab_size=60, min_frequency=1), folder / "model")
    data = datamodule(write_squad(folder / "squad", people_document(16)), folder / "model", batch_size=8)
    data.setup("fit")
    config = small_config(vocab_size=data.tokenizer.get_vocab_size(), max_position_embeddings=64)
    module = QuestionAnsweringModule(config, optimizer=adamw(lr=1e-2))
    trainer(folder, max_steps=30, limit_val_batches=0).fit(module, datamodule=data)
    module.model.save_pretrained(folder / "model")
    return folder


def test_evaluate_scores_as_the_validation_loop_does(span_head):
    model = BertForQuestionAnswering.from_pretrained(span_head / "model")
    ours = split_squad_scores(str(span_head / "model"), model, str(span_head / "squad"), max_seq_length=64,
                              doc_stride=16, batch_size=3)
    data = datamodule(span_head / "squad", span_head / "model")
    run = L.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False)
    (lightning,) = run.validate(QuestionAnsweringModule(model=model), datamodule=data, verbose=False)
    assert ours["f1"] > 0.5
    for key in ("exact_match", "f1"):
        assert ours[key] == pytest.approx(float(lightning[f"val/{key}"]), abs=1e-6)


def test_predict_answers_from_the_context(span_head, capsys):
    assert is_span_head(str(span_head / "model"))
    context = "anna lives in oslo . bert lives in lima ."
    found = answer(BertForQuestionAnswering.from_pretrained(span_head / "model"), datamodule(
        span_head / "squad", span_head / "model").tokenizer, ["where does anna live ?"], [context])[0]
    assert context[found["start"]:found["end"]] == found["answer"] and found["answer"].strip()
    predict.main([str(span_head / "model"), "where does anna live ?", "--pair", context], "predict")
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert row["question"] == "where does anna live ?" and row["answer"] == found["answer"]


def test_a_question_without_its_context_is_refused(span_head):
    with pytest.raises(UsageError, match="give each question's context with --pair"):
        predict.main([str(span_head / "model"), "where does anna live ?"], "predict")
