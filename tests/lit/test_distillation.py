"""Task distillation (bertlab.lit.distillation, bertlab.teacher): the teacher's outputs are computed
once per text and cached, α = 0 trains exactly as plain fine-tuning, a resumed distillation ends as an
uninterrupted one, the student exports as a plain classifier that `predict` reads, and a teacher that
does not fit the task is a one-line error."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf
from safetensors.torch import load_file

from bertlab.checkpoint.dispatch import read_config
from bertlab.data.classification import UNLABELLED
from bertlab.errors import CheckpointError, ConfigError
from bertlab.lit.distillation import DistillationModule, labelled_rows_loss, layer_pairs, soft_target_loss
from bertlab.model import BertForMaskedLM, BertForSequenceClassification
from bertlab.teacher import outputs as teacher_module
from bertlab.tokenizer import load_tokenizer, save_tokenizer, train_tokenizer
from bertlab.training.run import trial
from tests.bertlab_runs import fine_tuning, run_in_process, sentiment_tokenizer
from tests.lit.helpers import classification_batch, small_config
from tests.training.fake_clocks import FakeClock

# A validation and a checkpoint every 4 steps; no plots (slow to draw).
SCHEDULE = ["trainer.max_steps=8", "trainer.val_check_interval=4", "callbacks.artifacts=null"]
# The throughput monitor's columns: wall-clock speeds and counts of this process's batches.
THROUGHPUT = re.compile(r"per_sec|^(train|validate)/(time|batches|samples|lengths)$")
LABELS = {0: "negative", 1: "positive"}  # those of conf/data/sst2.yaml
TRANSFER_COPIES = 2
AVERAGED = "callbacks.weight_averaging={_target_:lightning.pytorch.callbacks.EMAWeightAveraging,decay:0.5}"


@pytest.fixture(scope="module")
def runs(tiny_data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Folders: "teacher" (plain fine-tuning), "alpha_0" (distilled from it with α = 0, the same settings
    otherwise), "student" (half the teacher's width, twice its depth, another vocabulary; α = 0.5,
    [CLS] matching through a projection, a transfer set of 2 augmented copies per sentence) and
    "resumed" (that run again from its step-4 checkpoint), "averaged" and "averaged_resumed" (the same two with
    an exponential moving average of the weights); "cache" holds the teacher's outputs and the transfer set."""
    root = tmp_path_factory.mktemp("distillation")
    tokenizer = sentiment_tokenizer(tiny_data_dir, root / "tokenizer")
    sentences = pd.read_parquet(tiny_data_dir / "sst2" / "train.parquet")["sentence"].tolist()
    save_tokenizer(train_tokenizer(sentences, vocab_size=40), root / "student_tokenizer")

    def run(name: str, *overrides: str) -> None:
        outcome = run_in_process(fine_tuning(tiny_data_dir, tokenizer, root / name, *SCHEDULE, *overrides))
        assert outcome.code == 0, f"{name}: {outcome.err}"

    run("teacher")
    distill = ["task=distill", f"task.teacher={root / 'teacher' / 'hf_model'}", f"task.cache_dir={root / 'cache'}"]
    run("alpha_0", *distill, "task.alpha=0")
    student = [*distill, f"data.tokenizer={root / 'student_tokenizer'}", "model.hidden_size=16",
               "model.num_hidden_layers=2", "model.intermediate_size=32", "task.alpha=0.5", "task.hidden_weight=1",
               f"data.transfer.copies={TRANSFER_COPIES}", f"data.cache_dir={root / 'cache'}",
               "callbacks.checkpoint.save_top_k=-1", "callbacks.checkpoint.filename='step={step}'"]
    run("student", *student)
    run("resumed", *student, f"resume='{root / 'student' / 'lightning_checkpoints' / 'step=4.ckpt'}'")
    run("averaged", *student, AVERAGED)
    run("averaged_resumed", *student, AVERAGED, f"resume='{root / 'averaged' / 'lightning_checkpoints' / 'step=4.ckpt'}'")
    return {"root": root, "teacher": root / "teacher" / "hf_model", "cache": root / "cache",
            **{name: root / name for name in ("alpha_0", "student", "resumed", "averaged", "averaged_resumed")}}


def final_weights(run: Path) -> dict[str, torch.Tensor]:
    return torch.load(run / "lightning_checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)["state_dict"]


def metrics(run: Path) -> list[dict[str, str]]:
    """The rows of metrics.csv that log more than throughput, which no rerun or resume repeats."""
    with (run / "metrics.csv").open(newline="") as handle:
        rows = [{key: value for key, value in row.items() if value and not THROUGHPUT.search(key)}
                for row in csv.DictReader(handle)]
    return [row for row in rows if set(row) - {"epoch", "step"}]


@pytest.mark.slow
def test_alpha_0_trains_bit_for_bit_as_plain_fine_tuning(runs):
    plain, distilled = final_weights(runs["root"] / "teacher"), final_weights(runs["alpha_0"])
    assert plain.keys() == distilled.keys()
    assert all(torch.equal(plain[key], distilled[key]) for key in plain)
    assert (runs["teacher"] / "model.safetensors").read_bytes() == \
        (runs["alpha_0"] / "hf_model" / "model.safetensors").read_bytes()
    assert metrics(runs["root"] / "teacher") == metrics(runs["alpha_0"])


@pytest.mark.slow
def test_a_resumed_distillation_ends_bit_for_bit_as_an_uninterrupted_one(runs):
    uninterrupted, resumed = final_weights(runs["student"]), final_weights(runs["resumed"])
    assert {"hidden_projection.weight", "hidden_projection.bias"} <= set(uninterrupted)
    assert uninterrupted.keys() == resumed.keys()
    assert all(torch.equal(uninterrupted[key], resumed[key]) for key in uninterrupted)
    assert metrics(runs["student"]) == metrics(runs["resumed"])
    logged = {key for row in metrics(runs["student"]) for key in row}
    assert {"train/loss", "train/label_loss", "train/teacher_loss", "train/hidden_loss", "val/accuracy"} <= logged


@pytest.mark.slow
def test_a_distillation_with_averaged_weights_resumes_bit_for_bit(runs):
    """The module's buffers hold the teacher's outputs, which the average (made before they are loaded) leaves out."""
    uninterrupted, resumed = (torch.load(runs[name] / "lightning_checkpoints" / "last.ckpt", map_location="cpu",
                                         weights_only=True) for name in ("averaged", "averaged_resumed"))
    for part in ("state_dict", "current_model_state"):
        assert uninterrupted[part].keys() == resumed[part].keys()
        assert all(torch.equal(uninterrupted[part][key], resumed[part][key]) for key in uninterrupted[part])
    assert metrics(runs["averaged"]) == metrics(runs["averaged_resumed"])
    plain = final_weights(runs["student"])
    assert uninterrupted["state_dict"].keys() == plain.keys()
    assert not all(torch.equal(uninterrupted["state_dict"][key], plain[key]) for key in plain)


@pytest.mark.slow
def test_the_teacher_labels_each_text_once_and_later_runs_load_its_outputs(runs, tiny_data_dir):
    first, resumed = (json.loads((runs[name] / "teacher.json").read_text()) for name in ("student", "resumed"))
    rows = sum(len(pd.read_parquet(tiny_data_dir / "sst2" / f"{split}.parquet")) for split in ("train", "validation"))
    (transfer_file,) = runs["cache"].glob("transfer-*.parquet")
    rows += len(pd.read_parquet(transfer_file))  # the transfer set's texts too, each once
    assert not first["from_cache"] and resumed["from_cache"]
    assert resumed["labelling"] == first["labelling"] and first["labelling"]["sentences"] == rows
    assert first["labelling"]["sentences_per_sec"] > 0 and set(first["validation"]) == {"accuracy", "f1", "mcc"}
    assert resumed["cache_file"] == first["cache_file"]
    assert len(list(runs["cache"].glob("teacher-*.safetensors"))) == 2  # without and with hidden states


@pytest.mark.slow
def test_the_transfer_set_follows_the_training_rows_unlabelled_and_is_made_once(runs, tiny_data_dir, monkeypatch):
    from bertlab.data import transfer_set
    from bertlab.data.classification import ClassificationDataModule

    sentences = pd.read_parquet(tiny_data_dir / "sst2" / "train.parquet")["sentence"].tolist()
    (transfer_file,) = runs["cache"].glob("transfer-*.parquet")
    transfer = pd.read_parquet(transfer_file)["sentence"].tolist()
    assert 0 < len(transfer) <= TRANSFER_COPIES * len(sentences) and not set(transfer) & set(sentences)
    monkeypatch.setattr(transfer_set, "augment", lambda *args, **kwargs: pytest.fail("augmented again"))
    data = ClassificationDataModule(str(tiny_data_dir / "sst2"), str(runs["teacher"]), cache_dir=str(runs["cache"]),
                                    transfer={"copies": TRANSFER_COPIES})
    data.setup("fit")
    assert data.texts("train") == (sentences + transfer, None)
    labels = data.datasets["train"]["labels"]
    assert UNLABELLED not in labels[:len(sentences)] and set(labels[len(sentences):]) == {UNLABELLED}


@pytest.mark.parametrize("transfer", ["data.transfer.copies=2", "data.transfer.joined=5"])
def test_a_transfer_set_without_a_teacher_is_a_one_line_error(tiny_data_dir, tmp_path, capsys, transfer):
    outcome = run_in_process(fine_tuning(tiny_data_dir, tmp_path / "tokenizer", tmp_path / "run", transfer), capsys)
    assert outcome.error_lines == ["bertlab: error: data.transfer: a transfer set has no labels, a teacher labels "
                                   "it; use task=distill (or +recipe=sst2_distill), or set data.transfer.copies=0, "
                                   "data.transfer.joined=0 and data.transfer.unlabelled=null"]
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_a_time_budget_leaves_the_teachers_labelling_out(runs, tiny_data_dir, tmp_path, monkeypatch):
    """The labelling happens once, in the calibration's trial; the run reads the cache. A budget that
    counted it would give a first run fewer steps than the same run with the cache already made."""
    run_teacher = teacher_module.run_teacher

    def ten_minutes_of_labelling(*args, **kwargs):
        trial.clock.time += 600  # the budget below is 3 s
        return run_teacher(*args, **kwargs)

    monkeypatch.setattr(teacher_module, "run_teacher", ten_minutes_of_labelling)
    steps = []
    for name in ("labelling", "cached"):
        monkeypatch.setattr(trial, "clock", FakeClock(0.08))
        argv = fine_tuning(tiny_data_dir, runs["root"] / "tokenizer", tmp_path / name, "task=distill",
                           f"task.teacher={runs['teacher']}", f"task.cache_dir={tmp_path / 'cache'}",
                           "budget_minutes=0.05", "trainer.val_check_interval=4", "callbacks.artifacts=null")
        outcome = run_in_process(argv)
        assert outcome.code == 0, f"{name}: {outcome.err}"
        steps.append(OmegaConf.load(tmp_path / name / "config.yaml").trainer.max_steps)
    assert json.loads((tmp_path / "cached" / "teacher.json").read_text())["from_cache"]
    assert steps[0] == steps[1] > 0


@pytest.mark.slow
def test_cached_teacher_outputs_equal_a_fresh_teacher_forward(runs, tiny_data_dir):
    (cache_file,) = [path for path in runs["cache"].glob("teacher-*.safetensors") if "train_hidden" in load_file(path)]
    cached = load_file(cache_file)
    teacher = BertForSequenceClassification.from_pretrained(runs["teacher"]).eval()
    tokenizer = load_tokenizer(runs["teacher"])
    sentences = pd.read_parquet(tiny_data_dir / "sst2" / "train.parquet")["sentence"].tolist()
    (transfer_file,) = runs["cache"].glob("transfer-*.parquet")
    sentences += pd.read_parquet(transfer_file)["sentence"].tolist()  # after the training rows
    assert cached["train_hidden"].shape == (len(sentences), 2, 32)  # both student layers map to the teacher's one
    with torch.no_grad():
        for row in (0, 1, 100, len(sentences) - 1):  # one at a time: no padding, no batch neighbours
            ids = torch.tensor([tokenizer.encode(sentences[row]).ids])
            fresh = teacher(ids, output_hidden_states=True)
            torch.testing.assert_close(cached["train_logits"][row], fresh.logits[0], rtol=1e-5, atol=1e-5)
            cls = fresh.hidden_states[1][0, 0].half()
            torch.testing.assert_close(cached["train_hidden"][row], torch.stack([cls, cls]), rtol=1e-3, atol=1e-3)


@pytest.mark.slow
def test_the_student_exports_as_a_plain_classifier_that_predict_reads(runs, capsys):
    export = runs["student"] / "hf_model"
    config = json.loads((export / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"]
    assert config["id2label"] == {"0": "negative", "1": "positive"} and config["hidden_size"] == 16
    plain = BertForSequenceClassification(read_config(export))
    assert set(load_file(export / "model.safetensors")) == set(plain.state_dict())  # no hidden_projection
    assert load_tokenizer(export).get_vocab_size() != load_tokenizer(runs["teacher"]).get_vocab_size()
    outcome = run_in_process(["predict", str(export), "a wonderful film", "a boring plot"], capsys)
    assert outcome.code == 0, outcome.err
    predictions = [json.loads(line) for line in outcome.out.splitlines()]
    assert [row["text"] for row in predictions] == ["a wonderful film", "a boring plot"]
    assert all(row["label"] in ("negative", "positive") for row in predictions)
    transformers = pytest.importorskip("transformers")
    model = transformers.BertForSequenceClassification.from_pretrained(export)
    assert model.config.id2label == {0: "negative", 1: "positive"}


@pytest.fixture(scope="module")
def three_label_teacher(runs) -> Path:
    folder = runs["root"] / "three_labels"
    BertForSequenceClassification(small_config(vocab_size=60,
                                               id2label={0: "a", 1: "b", 2: "c"})).save_pretrained(folder)
    save_tokenizer(load_tokenizer(runs["teacher"]), folder)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("teacher, overrides, predicts, task", [
    ("fine_tuned", ["data.label_names=[bad,good]"], "2 labels (negative, positive)", "2 labels (bad, good)"),
    ("three_labels", [], "3 labels (a, b, c)", "2 labels (negative, positive)"),
], ids=["other names", "other number"])
def test_a_teacher_with_other_labels_is_a_one_line_error(runs, three_label_teacher, tiny_data_dir, tmp_path, capsys,
                                                          teacher, overrides, predicts, task):
    folder = {"fine_tuned": runs["teacher"], "three_labels": three_label_teacher}[teacher]
    outcome = run_in_process(fine_tuning(tiny_data_dir, runs["root"] / "tokenizer", tmp_path / "run", *SCHEDULE,
                                         "task=distill", f"task.teacher={folder}", *overrides), capsys)
    assert outcome.code == 1
    assert outcome.error_lines == [f"bertlab: error: task.teacher={folder}: the teacher predicts {predicts} but the "
                                   f"task has {task}; distil from a teacher fine-tuned on the same labels"]


def student(hidden_size: int = 32, **options) -> DistillationModule:
    """A 2-layer student of the sentiment labels; the fine-tuned teacher has 1 layer, 32 wide."""
    model = BertForSequenceClassification(small_config(vocab_size=60, hidden_size=hidden_size, id2label=LABELS))
    return DistillationModule(model=model, **options)


@pytest.mark.slow
def test_distillation_settings_that_cannot_work_are_refused(runs, tmp_path):
    teacher = str(runs["teacher"])
    with pytest.raises(ConfigError, match=r"^task.teacher is not set"):
        student()
    with pytest.raises(CheckpointError, match=f"^task.teacher={tmp_path}/none: no such folder"):
        student(teacher=str(tmp_path / "none"))
    BertForMaskedLM(small_config(vocab_size=60)).save_pretrained(tmp_path / "mlm")
    with pytest.raises(CheckpointError, match=f"^task.teacher={tmp_path}/mlm: not a trained classifier, its "
                                              f"model.safetensors has no classifier.weight; distil from"):
        student(teacher=str(tmp_path / "mlm"))
    (tmp_path / "mlm" / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match=f"^task.teacher={tmp_path}/mlm: no readable model.safetensors"):
        student(teacher=str(tmp_path / "mlm"))
    with pytest.raises(ConfigError, match=r"^task.layer_map: \[3, 1\] names student layer 3, but the student has "
                                          r"layers 1-2$"):
        student(teacher=teacher, hidden_weight=1.0, layer_map=[[1, 1], [3, 1]])
    with pytest.raises(ConfigError, match=r"^task.layer_map is set but task.hidden_weight is 0"):
        student(teacher=teacher, layer_map=[[1, 1]])


@pytest.mark.slow
def test_the_projection_exists_only_where_hidden_states_are_matched_across_widths(runs):
    assert student(teacher=str(runs["teacher"])).hidden_projection is None
    assert student(teacher=str(runs["teacher"]), hidden_weight=1.0).hidden_projection is None  # both 32 wide
    module = student(hidden_size=16, teacher=str(runs["teacher"]), hidden_weight=1.0)
    assert (module.hidden_projection.in_features, module.hidden_projection.out_features) == (16, 32)
    assert module.hparams.config["hidden_size"] == 16 and module.hparams.teacher == str(runs["teacher"])


@pytest.mark.slow
def test_the_students_dropout_holds_for_the_run_and_its_export_keeps_the_configs(runs, tmp_path):
    module = student(teacher=str(runs["teacher"]), dropout=0.0)
    ids = torch.randint(5, 60, (3, 8), generator=torch.Generator().manual_seed(0))
    forwards = [module.model.train()(ids).logits for _ in range(2)]
    assert torch.equal(*forwards)
    module.model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["hidden_dropout_prob"] == 0.1
    exported = BertForSequenceClassification.from_pretrained(tmp_path).train()
    assert not torch.equal(exported(ids).logits, exported(ids).logits)


def test_uniform_layer_map_spreads_the_student_over_the_teacher():
    assert layer_pairs(None, 2, 6) == [(1, 3), (2, 6)]
    assert layer_pairs(None, 4, 6) == [(1, 2), (2, 3), (3, 5), (4, 6)]
    assert layer_pairs(None, 2, 1) == [(1, 1), (2, 1)]
    assert layer_pairs([[2, 5]], 2, 6) == [(2, 5)]


def test_soft_target_loss_is_hintons_tempered_kl():
    student_logits, teacher_logits = torch.randn(5, 3), torch.randn(5, 3)
    teacher_probabilities = (teacher_logits / 2).softmax(-1)
    expected = (teacher_probabilities * (teacher_probabilities.log() - (student_logits / 2).log_softmax(-1))).sum() / 5
    torch.testing.assert_close(soft_target_loss(student_logits, teacher_logits, 2.0), expected * 4)
    assert soft_target_loss(teacher_logits, teacher_logits, 3.0).abs() < 1e-6


def test_rows_without_a_gold_label_add_nothing_to_the_label_loss():
    logits = torch.randn(4, 2, requires_grad=True)
    labels = torch.tensor([1, UNLABELLED, 0, UNLABELLED])
    torch.testing.assert_close(labelled_rows_loss(logits, labels, regression=False),
                               F.cross_entropy(logits[[0, 2]], labels[[0, 2]]))
    labelled_rows_loss(logits, labels, regression=False).backward()
    assert logits.grad[[1, 3]].abs().sum() == 0
    values = torch.tensor([[0.5], [1.0]], requires_grad=True)
    torch.testing.assert_close(labelled_rows_loss(values, torch.tensor([1.5, float("nan")]), regression=True),
                               torch.tensor(1.0))
    nothing = labelled_rows_loss(values, torch.tensor([float("nan"), float("nan")]), regression=True)
    nothing.backward()
    assert nothing == 0 and torch.isfinite(values.grad).all()


@pytest.mark.filterwarnings("ignore:You are trying to `self.log\\(\\)`")  # a step outside a Trainer
@pytest.mark.parametrize("num_labels", [2, 1])
def test_rows_without_a_gold_label_learn_from_the_teacher_alone(tmp_path, num_labels):
    labels = {"id2label": LABELS} if num_labels == 2 else {"num_labels": 1}
    BertForSequenceClassification(small_config(**labels)).save_pretrained(tmp_path / "teacher")
    module = DistillationModule(model=BertForSequenceClassification(small_config(**labels)),
                                teacher=str(tmp_path / "teacher"), alpha=0.25)
    module.eval()  # no dropout: the logits below are the step's
    batch = classification_batch(num_labels)
    batch["labels"][8:] = float("nan") if num_labels == 1 else UNLABELLED  # transfer rows: the teacher's only
    module.teacher_logits = torch.randn(16, num_labels, generator=torch.Generator().manual_seed(2))
    module.every_row_labelled = False

    loss = module.training_step(batch, 0)
    logits = module.model(batch["input_ids"]).logits
    if num_labels == 1:
        label_loss = F.mse_loss(logits[:8, 0], batch["labels"][:8])
        teacher_loss = F.mse_loss(logits, module.teacher_logits)
    else:
        label_loss = F.cross_entropy(logits[:8], batch["labels"][:8])
        teacher_loss = soft_target_loss(logits, module.teacher_logits, 2.0)
    torch.testing.assert_close(loss, 0.75 * label_loss + 0.25 * teacher_loss)
