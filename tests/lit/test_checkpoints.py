"""The checkpoint plugin (bertlab.lit.checkpoints.AtomicCheckpointIO): a save stopped by a signal or a full disk
leaves the previous checkpoint whole and loadable."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
import torch

from bertlab.lit.checkpoints import AtomicCheckpointIO
from tests.data.test_cache_entries import SEED


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
