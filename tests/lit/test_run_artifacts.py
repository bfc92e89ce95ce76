"""The run's artefacts (bertlab.lit.run_artifacts): the Hugging Face export (of the last, the best or the averaged
weights) and the metric artefacts, metrics.json and metrics.png."""

from __future__ import annotations

import json

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import EMAWeightAveraging, ModelCheckpoint

from bertlab.errors import ConfigError
from bertlab.lit import run_artifacts
from bertlab.lit.classification import ClassificationModule
from bertlab.lit.run_artifacts import ExportPretrained, MetricsArtifacts
from bertlab.model import BertForMaskedLM, BertForSequenceClassification
from bertlab.tokenizer import load_tokenizer, train_tokenizer
from tests.lit.helpers import (adamw, classification_batch, loader, model_weights, pretraining_batch,
                               pretraining_module, small_config, trainer)


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
