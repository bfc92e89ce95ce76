"""QuestionAnsweringModule (bertlab.lit.question_answering): a few steps of fine-tuning on made SQuAD data learn
where the answers are, and validation logs SQuAD's exact match and F1 of the decoded answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from lightning.pytorch.callbacks import ModelCheckpoint

from bertlab.errors import ConfigError
from bertlab.lit.question_answering import QuestionAnsweringModule
from bertlab.tokenizer import special_token_ids
from bertlab.tokenizer import save_tokenizer, train_tokenizer
from tests.data.test_question_answering import datamodule, squad_document, write_squad
from tests.lit.helpers import adamw, small_config, trainer

NAMES, CITIES = ["anna", "bert", "carla", "dora"], ["paris", "rome", "oslo", "lima"]


def people_document(rows: int) -> dict:
    """Contexts of two people and their cities; each question asks for one person's city."""
    rng = np.random.default_rng(0)
    paragraphs = []
    for row in range(rows):
        names, cities = rng.choice(NAMES, 2, replace=False), rng.choice(CITIES, 2, replace=False)
        context = f"{names[0]} lives in {cities[0]} . {names[1]} lives in {cities[1]} ."
        asked = int(rng.integers(2))
        paragraphs.append(squad_document(context, [(f"q{row}", f"where does {names[asked]} live ?", cities[asked])])
                          ["data"][0]["paragraphs"][0])
    return {"data": [{"title": "people", "paragraphs": paragraphs}]}


def test_it_learns_the_answers_and_logs_exact_match_and_f1(tmp_path):
    texts = [f"where does {name} live ? {name} lives in {city} ." for name in NAMES for city in CITIES]
    save_tokenizer(train_tokenizer(texts, vocab_size=60, min_frequency=1), tmp_path / "tokenizer")
    data = datamodule(write_squad(tmp_path / "squad", people_document(16)), tmp_path / "tokenizer", batch_size=8)
    data.setup("fit")
    config = small_config(vocab_size=data.tokenizer.get_vocab_size(),
                         pad_token_id=special_token_ids(data.tokenizer)["pad"], max_position_embeddings=64)
    module = QuestionAnsweringModule(config, optimizer=adamw(lr=1e-2), max_answer_length=4)
    run = trainer(tmp_path, max_steps=40, val_check_interval=10, check_val_every_n_epoch=None)
    run.fit(module, datamodule=data)
    metrics = pd.read_csv(tmp_path / "logs" / "lightning_logs" / "version_0" / "metrics.csv")
    scores = metrics.dropna(subset=["val/f1"])
    assert len(scores) == 4 and scores["val/exact_match"].between(0, 1).all()
    assert scores["val/exact_match"].max() >= 0.75  # naming the first city of each context scores about 0.5
    assert module.hparams["max_answer_length"] == 4 and module.hparams["config"]["num_labels"] == 2


def test_held_out_training_questions_are_scored_as_val_and_choose_the_checkpoint(tmp_path):
    texts = [f"where does {name} live ? {name} lives in {city} ." for name in NAMES for city in CITIES]
    save_tokenizer(train_tokenizer(texts, vocab_size=60, min_frequency=1), tmp_path / "tokenizer")
    data = datamodule(write_squad(tmp_path / "squad", people_document(16)), tmp_path / "tokenizer", batch_size=8,
                      selection_fraction=0.25)
    data.setup("fit")
    config = small_config(vocab_size=data.tokenizer.get_vocab_size(),
                         pad_token_id=special_token_ids(data.tokenizer)["pad"], max_position_embeddings=64)
    module = QuestionAnsweringModule(config, optimizer=adamw(lr=1e-2), max_answer_length=4)
    checkpoints = ModelCheckpoint(dirpath=tmp_path / "ckpt", monitor="val/f1", mode="max")
    run = trainer(tmp_path, max_steps=20, val_check_interval=5, check_val_every_n_epoch=None,
                  enable_checkpointing=True, callbacks=[checkpoints])
    run.fit(module, datamodule=data)
    metrics = pd.read_csv(tmp_path / "logs" / "lightning_logs" / "version_0" / "metrics.csv")
    scores = metrics.dropna(subset=["val/f1"])
    assert len(scores) == 4 and scores[["val/exact_match", "val/f1", "dev/exact_match", "dev/f1"]].notna().all().all()
    assert [len(questions) for questions in data.validation_questions()] == [4, 16]
    assert float(checkpoints.best_model_score) == pytest.approx(scores["val/f1"].max())  # on the held-out questions


def test_it_reloads_from_its_hyperparameters():
    module = QuestionAnsweringModule(small_config(num_labels=2), n_best=5)
    again = QuestionAnsweringModule(**module.hparams)
    assert again.n_best == 5 and again.model.config.to_dict() == module.model.config.to_dict()


def test_a_module_without_a_model_is_refused():
    with pytest.raises(ConfigError, match=r"^a fine-tuning module needs a model config \(config\) or a loaded model "
                                          r"\(model\); got neither$"):
        QuestionAnsweringModule()
