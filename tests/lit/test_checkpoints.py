"""The checkpoint plugin (bertlab.lit.checkpoints.AtomicCheckpointIO): a save stopped by a signal or a full disk
leaves the previous checkpoint whole and loadable; RunCheckpoint writes last.ckpt at every validation; a bertlab
LightningModule records its class in every checkpoint it saves (RecordsTask)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import lightning as L
import pytest
import torch
from lightning.pytorch.demos.boring_classes import BoringModel

from bertlab.lit.checkpoints import SAVED_BY, AtomicCheckpointIO, RunCheckpoint
from bertlab.lit.classification import ClassificationModule
from bertlab.training.run.run_folder import checkpoint_step
from tests.data.test_cache_entries import SEED
from tests.lit.helpers import pretraining_module, small_config


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

    from bertlab.lit.checkpoints import AtomicCheckpointIO

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
