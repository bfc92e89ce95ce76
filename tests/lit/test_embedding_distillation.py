"""Sentence-embedding distillation (bertlab.lit.embedding_distillation, `train +recipe=embed_distill_tiny`):
training lowers the distance to the teacher's scaled embeddings, the run exports the student as a plain
BertModel with its trained pooler that a classifier and `fine-tune` take over, a resumed run ends as an
uninterrupted one without running the teacher again, and bad input is a one-line error."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from bertlab.lit.embedding_distillation import EmbeddingDistillationModule
from bertlab.model import BertForMaskedLM, BertForSequenceClassification
from bertlab.teacher import embeddings as embedding_teacher
from bertlab.tokenizer import load_tokenizer
from tests.bertlab_runs import FP32, QUIET, fine_tuning, run_in_process
from tests.conftest import write_sentence_corpus
from tests.lit.helpers import adamw, loader, save_tiny_bert, small_config, trainer

TEACHER_WIDTH = 48  # the student's is 32: the projection changes the width


@pytest.fixture(scope="module")
def folders(tiny_data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("embedding_distillation")
    corpus = write_sentence_corpus(root / "corpus.txt")
    texts = corpus.read_text().splitlines()
    return {"root": root, "corpus": corpus, "sst2": tiny_data_dir / "sst2", "data": tiny_data_dir,
            "student": save_tiny_bert(root / "student", texts, BertForMaskedLM),  # as a masked-LM run exports it
            "teacher": save_tiny_bert(root / "teacher", texts, hidden_size=TEACHER_WIDTH)}


def distillation(folders: dict[str, Path], run_dir: Path, *overrides: str) -> list[str]:
    return ["train", "+recipe=embed_distill_tiny", f"model.init_from={folders['student']}",
            f"data.source={folders['corpus']}", f"data.extra_source={folders['sst2']}",
            f"task.teacher={folders['teacher']}", f"task.cache_dir={folders['root'] / 'cache'}",
            "task.teacher_precision=null", "data.validation_size=16", "data.batch_size=8", "data.max_seq_length=32",
            "trainer.max_steps=6", "trainer.val_check_interval=3", "scheduler.warmup_steps=2",
            "callbacks.artifacts=null", "callbacks.checkpoint.save_top_k=-1", *FP32, *QUIET,
            f"hydra.run.dir={run_dir}", *overrides]


@pytest.fixture(scope="module")
def runs(folders) -> dict[str, Path]:
    """"distilled": 6 steps; "resumed": the same from its step-3 checkpoint, the teacher's passes counted."""
    distilled, resumed = folders["root"] / "distilled", folders["root"] / "resumed"
    outcome = run_in_process(distillation(folders, distilled))
    assert outcome.code == 0
    passes = []
    for_each_batch = embedding_teacher.for_each_batch
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(embedding_teacher, "for_each_batch", lambda *args, **kwargs: passes.append(1) or
                      for_each_batch(*args, **kwargs))
        outcome = run_in_process(distillation(folders, resumed,
                                              f"resume='{distilled / 'lightning_checkpoints' / 'step=3.ckpt'}'"))
    assert outcome.code == 0
    return {"distilled": distilled, "resumed": resumed, "teacher_passes_when_resumed": len(passes)}


def final_weights(run: Path) -> dict[str, torch.Tensor]:
    return torch.load(run / "lightning_checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)["state_dict"]


def test_a_few_steps_bring_the_projected_pooler_output_towards_the_teachers_embeddings(folders, tmp_path):
    module = EmbeddingDistillationModule(small_config(), teacher=str(folders["teacher"]), optimizer=adamw(lr=1e-2))
    ids = torch.randint(5, 100, (8, 12), generator=torch.Generator().manual_seed(1))
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids),
             "index": torch.arange(8)}
    module.train_targets = F.normalize(torch.randn(8, TEACHER_WIDTH), dim=-1).half()

    def loss() -> float:
        with torch.no_grad():
            return module._loss(module(batch), module.train_targets[batch["index"]]).item()

    before = loss()
    trainer(tmp_path, max_steps=20, limit_val_batches=0).fit(module, loader([batch]))
    assert loss() < 0.5 * before
    assert module.projection.out_features == TEACHER_WIDTH


def test_the_run_keeps_no_dropout_but_the_students_dropout_in_its_config(folders):
    module = EmbeddingDistillationModule(small_config(), teacher=str(folders["teacher"]))
    assert all(dropout.p == 0 for dropout in module.model.modules() if isinstance(dropout, torch.nn.Dropout))
    assert module.model.config.hidden_dropout_prob == small_config().hidden_dropout_prob > 0


@pytest.mark.slow
def test_train_distils_logs_and_exports_a_bertmodel_with_its_trained_pooler(runs, folders):
    with (runs["distilled"] / "metrics.csv").open(newline="") as handle:
        logged = {key for row in csv.DictReader(handle) for key, value in row.items() if value}
    assert {"train/loss", "val/loss", "val/cosine"} <= logged
    export = runs["distilled"] / "hf_model"
    assert json.loads((export / "config.json").read_text())["architectures"] == ["BertModel"]
    exported = load_file(export / "model.safetensors")
    assert "pooler.dense.weight" in exported and not any("projection" in key for key in exported)
    assert load_tokenizer(export).get_vocab() == load_tokenizer(folders["student"]).get_vocab()

    trained = final_weights(runs["distilled"])
    classifier = BertForSequenceClassification.from_pretrained(export, num_labels=2)
    assert not [key for key in classifier.load_report.missing if not key.startswith("classifier.")]
    for key, value in classifier.bert.state_dict().items():
        assert torch.equal(value, trained[f"model.{key}"]), key
    initial = BertForMaskedLM.from_pretrained(folders["student"]).bert.encoder.state_dict()
    assert any(not torch.equal(value, classifier.bert.encoder.state_dict()[key]) for key, value in initial.items())


@pytest.mark.slow
def test_fine_tune_starts_from_the_export(runs, folders, tmp_path, capsys):
    export = runs["distilled"] / "hf_model"
    outcome = run_in_process(fine_tuning(folders["data"], export, tmp_path / "sst2", f"model.init_from={export}",
                                         "trainer.max_steps=2", "trainer.val_check_interval=2"), capsys)
    assert outcome.code == 0, outcome.err
    assert (tmp_path / "sst2" / "hf_model" / "model.safetensors").is_file()


@pytest.mark.slow
def test_a_resumed_run_ends_as_the_uninterrupted_one_and_reads_the_teachers_cache(runs):
    assert runs["teacher_passes_when_resumed"] == 0
    uninterrupted, resumed = final_weights(runs["distilled"]), final_weights(runs["resumed"])
    assert {"projection.weight", "projection.bias"} <= set(uninterrupted) and uninterrupted.keys() == resumed.keys()
    assert all(torch.equal(uninterrupted[key], resumed[key]) for key in uninterrupted)


@pytest.mark.parametrize("override, message", [
    ("task.teacher={root}/none", "task.teacher={root}/none: no such folder; expected a BertModel folder"),
    ("model.init_from=null", "model.init_from is not set: sentence-embedding distillation trains a pretrained"),
    ("data.min_words=30", "data.source={root}/corpus.txt: no sentence of 30-40 words (data.min_words, data.max_words)"),
])
def test_bad_input_is_a_one_line_error(folders, tmp_path, capsys, override, message):
    root = folders["root"]
    outcome = run_in_process(distillation(folders, tmp_path / "run", override.format(root=root)), capsys)
    assert outcome.code == 1 and len(outcome.error_lines) == 1
    assert outcome.error_lines[0].startswith(f"bertlab: error: {message.format(root=root)}"), outcome.error_lines


def test_prepare_data_says_a_sentence_distillation_has_nothing_to_prepare(folders, tmp_path, capsys):
    outcome = run_in_process(["prepare-data", *distillation(folders, tmp_path / "run")[1:]], capsys)
    assert outcome.code == 1 and len(outcome.error_lines) == 1
    assert "this config's data is SentenceDataModule, which has nothing to prepare" in outcome.error_lines[0]
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_a_distillation_checkpoint_is_not_resumed_by_fine_tune(runs, folders, tmp_path, capsys):
    checkpoint = runs["distilled"] / "lightning_checkpoints" / "last.ckpt"
    outcome = run_in_process(fine_tuning(folders["data"], runs["distilled"] / "hf_model", tmp_path / "run",
                                         f"resume='{checkpoint}'"), capsys)
    assert outcome.code == 1 and len(outcome.error_lines) == 1
    assert "was saved by EmbeddingDistillationModule (train), not by this run's ClassificationModule" \
        in outcome.error_lines[0]
