"""What a run leaves in its folder (bertlab.lit.run_artifacts): the checkpoint plugin (AtomicCheckpointIO) — a save
stopped by a signal or a full disk leaves the previous checkpoint whole and loadable; RunCheckpoint writes last.ckpt
at every validation; a bertlab LightningModule records its class in every checkpoint it saves (RecordsTask); the
Hugging Face export (of the last, the best or the averaged weights) and the metric artefacts, metrics.json and
metrics.png."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import EMAWeightAveraging, ModelCheckpoint
from lightning.pytorch.demos.boring_classes import BoringModel

from bertlab.errors import ConfigError
from bertlab.lit import run_artifacts
from bertlab.lit.classification import ClassificationModule
from bertlab.lit.run_artifacts import SAVED_BY, AtomicCheckpointIO, ExportPretrained, MetricsArtifacts, RunCheckpoint
from bertlab.model import BertForMaskedLM, BertForSequenceClassification
from bertlab.tokenizer import load_tokenizer, train_tokenizer
from bertlab.training.run.run_folder import checkpoint_step
from tests.test_atomic_files import SEED
from tests.lit.helpers import (adamw, classification_batch, loader, model_weights, pretraining_batch,
                               pretraining_module, small_config, trainer)


def test_interrupted_checkpoint_save_leaves_the_previous_file_whole(tmp_path, monkeypatch):
    path = tmp_path / "lightning_checkpoints" / "last.ckpt"
    io = AtomicCheckpointIO()
    io.save_checkpoint({"global_step": 1, "weights": torch.ones(1000)}, path)
    good = path.read_bytes()

    def killed_while_writing(obj, file, *args, **kwargs):
        Path(file).write_bytes(good[: len(good) // 3])
        raise KeyboardInterrupt  # what a signal does mid-write

    monkeypatch.setattr(torch, "save", killed_while_writing)
    with pytest.raises(KeyboardInterrupt):
        io.save_checkpoint({"global_step": 2, "weights": torch.zeros(1000)}, path)
    assert path.read_bytes() == good
    assert os.listdir(path.parent) == ["last.ckpt"]
    monkeypatch.undo()
    assert torch.load(path, weights_only=True)["global_step"] == 1


def test_a_checkpoint_save_that_runs_out_of_disk_space_leaves_the_previous_checkpoint_loadable(tmp_path,
                                                                                              monkeypatch):
    import errno

    from bertlab.lit.run_artifacts import AtomicCheckpointIO

    path = tmp_path / "lightning_checkpoints" / "last.ckpt"
    io = AtomicCheckpointIO()
    io.save_checkpoint({"global_step": 1, "weights": torch.ones(4096)}, path)
    good = path.read_bytes()
    rng = random.Random(SEED)
    original = torch.save
    for _ in range(5):
        offset = rng.randrange(len(good))

        def disk_full(obj, file, *args, _offset=offset, **kwargs):
            original(obj, file, *args, **kwargs)
            with open(file, "r+b") as handle:  # what reached the disk before it was full
                handle.truncate(_offset)
            raise OSError(errno.ENOSPC, "No space left on device", str(file))

        monkeypatch.setattr(torch, "save", disk_full)
        with pytest.raises(OSError, match="No space left"):
            io.save_checkpoint({"global_step": 2, "weights": torch.zeros(4096)}, path)
        monkeypatch.undo()
        assert path.read_bytes() == good and os.listdir(path.parent) == ["last.ckpt"]
        assert torch.load(path, weights_only=True)["global_step"] == 1


class LastCheckpointReader(L.Callback):
    """Reads, at the start of every batch after a validation, the step last.ckpt was saved at."""

    def __init__(self, checkpoints: Path):
        self.checkpoints, self.last_steps = checkpoints, []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step and trainer.global_step % trainer.val_check_interval == 0:
            self.last_steps.append(checkpoint_step(self.checkpoints / RunCheckpoint.LAST))


class ScoredModel(BoringModel):
    def validation_step(self, batch, batch_idx):
        self.log("val/accuracy", 0.5)  # never improves after the first validation


def test_last_checkpoint_is_written_at_every_validation_when_the_best_is_kept_by_a_metric(tmp_path):
    """A fine-tune keeps its best checkpoint by val/accuracy; a kill after a validation that did not improve it
    must still resume from that validation (Lightning alone writes last.ckpt only beside a new best)."""
    checkpoints = tmp_path / RunCheckpoint.FOLDER
    reader = LastCheckpointReader(checkpoints)
    trainer = L.Trainer(max_steps=7, val_check_interval=2, check_val_every_n_epoch=None, limit_val_batches=1,
                        logger=False, enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path,
                        callbacks=[RunCheckpoint(monitor="val/accuracy", mode="max", save_top_k=1, filename="best",
                                                 save_last=True), reader])
    trainer.fit(ScoredModel())
    assert reader.last_steps == [2, 4, 6]
    assert checkpoint_step(checkpoints / "best.ckpt") == 2 and checkpoint_step(checkpoints / RunCheckpoint.LAST) == 7


def test_a_module_records_its_class_in_the_checkpoints_it_saves():
    for module in (pretraining_module(), ClassificationModule(small_config())):
        checkpoint = {"global_step": 3}
        module.on_save_checkpoint(checkpoint)
        assert checkpoint == {"global_step": 3, SAVED_BY: type(module).__name__}


pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # Lightning's hints about workers, logging


@pytest.fixture(scope="module")
def tokenizer():
    texts = ["the cat sat on the mat", "a dog ate the bone", "the bird sang a song"] * 5
    return train_tokenizer(texts, vocab_size=60, min_frequency=1)


def test_export_writes_a_loadable_directory_atomically(tmp_path, tokenizer):
    export_dir = tmp_path / "export"
    export_dir.mkdir()
    (export_dir / "stale.txt").write_text("from an earlier export")
    module = pretraining_module()
    run = trainer(tmp_path, max_steps=2, logger=False,
                  callbacks=[ExportPretrained(str(export_dir), tokenizer=tokenizer)])
    run.fit(module, loader([pretraining_batch()] * 2))

    loaded = BertForMaskedLM.from_pretrained(export_dir)
    assert loaded.load_report.complete
    trained = model_weights(module)
    assert all(torch.equal(value, trained[key]) for key, value in loaded.state_dict().items())
    assert load_tokenizer(export_dir).get_vocab() == tokenizer.get_vocab()
    assert not (export_dir / "stale.txt").exists()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["export"]  # no temporary siblings left


def test_export_of_the_best_checkpoint_reloads_itsmodel_weights(tmp_path, tokenizer):
    batch = classification_batch()
    module = ClassificationModule(small_config(), optimizer=adamw(lr=5e-3))
    # "Best" = highest validation loss, i.e. an early checkpoint that differs from the final weights.
    checkpoint = ModelCheckpoint(dirpath=tmp_path / "ckpt", monitor="val/loss", mode="max")
    export = ExportPretrained(str(tmp_path / "best"), weights="best", tokenizer=tokenizer)
    run = trainer(tmp_path, max_steps=6, enable_checkpointing=True, val_check_interval=2,
                  callbacks=[checkpoint, export])
    run.fit(module, loader([batch] * 6), loader([batch]))

    best = torch.load(checkpoint.best_model_path, weights_only=True)["state_dict"]
    exported = BertForSequenceClassification.from_pretrained(tmp_path / "best").state_dict()
    assert all(torch.equal(value, best[f"model.{key}"]) for key, value in exported.items())
    final = model_weights(module)
    assert not all(torch.equal(value, final[key]) for key, value in exported.items())


class RecordWeights(L.Callback):
    def __init__(self):
        self.steps = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.steps.append(model_weights(pl_module))


def test_weight_averaging_validates_checkpoints_and_exports_the_average(tmp_path, tokenizer):
    batch = classification_batch()
    module = ClassificationModule(small_config(), optimizer=adamw(lr=5e-3))
    record = RecordWeights()
    checkpoint = ModelCheckpoint(dirpath=tmp_path / "ckpt", monitor="val/loss", mode="min")
    export = ExportPretrained(str(tmp_path / "best"), weights="best", tokenizer=tokenizer)
    run = trainer(tmp_path, max_steps=6, enable_checkpointing=True, val_check_interval=3,
                  callbacks=[EMAWeightAveraging(decay=0.5), record, checkpoint, export])
    run.fit(module, loader([batch] * 6), loader([batch]))

    average = dict(record.steps[0])
    for weights in record.steps[1:]:
        average = {key: 0.5 * value + 0.5 * weights[key] for key, value in average.items()}
    exported = BertForSequenceClassification.from_pretrained(tmp_path / "best").state_dict()
    assert checkpoint.best_model_path.endswith("step=6.ckpt")  # the loss falls: the last validation is best
    for key, value in exported.items():
        torch.testing.assert_close(value, average[key], msg=key)
    assert not all(torch.equal(value, record.steps[-1][key]) for key, value in exported.items())


def test_metrics_artifacts_require_a_csv_logger(tmp_path):
    run = trainer(tmp_path, max_steps=1, logger=False, callbacks=[MetricsArtifacts()])
    with pytest.raises(ConfigError, match="CSVLogger"):
        run.fit(pretraining_module(), loader([pretraining_batch()]))


@pytest.mark.parametrize(("plot_every_seconds", "drawn_at"), [(0, [9, 19, 29, 39, 39]), (3600, [9, 39])])
def test_metrics_png_is_redrawn_at_most_every_plot_every_seconds(tmp_path, monkeypatch, plot_every_seconds,
                                                                  drawn_at):
    drawn = []
    monkeypatch.setattr(run_artifacts, "plot_metrics", lambda frame, path: drawn.append(int(frame["step"].max())))
    run = trainer(tmp_path, max_steps=40, log_every_n_steps=5, val_check_interval=10,
                  callbacks=[MetricsArtifacts(plot_every_seconds=plot_every_seconds)])
    run.fit(pretraining_module(), loader([pretraining_batch()] * 40), loader([pretraining_batch()]))
    assert drawn == drawn_at  # the first validation's (step 9), then by the clock; the end of fit's always
    summary = json.loads((tmp_path / "logs" / "lightning_logs" / "version_0" / "metrics.json").read_text())
    assert summary["step"] == 39  # metrics.json at every validation and at the end
