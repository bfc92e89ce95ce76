"""TokenClassificationModule (bertlab.lit.token_classification): it learns a tag per token, validates on entities
(val/ and dev/ for two loaders, the per-type scores of the last), and EntityTable writes the best validation's
per-type table into the run folder."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

from bertlab.errors import ConfigError
from bertlab.lit.token_classification import TokenClassificationModule
from tests.lit.helpers import adamw, loader, small_config, trainer

TAGS = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC"}


def tagging_batch(seed: int) -> dict[str, torch.Tensor]:
    """Token 5 is B-PER, 6 (after it) I-PER, 7 B-LOC, the rest O; [CLS] and padding unlabelled."""
    ids = torch.randint(8, 100, (8, 12), generator=torch.Generator().manual_seed(seed))
    ids[:, 0] = 2
    ids[::2, 3], ids[::2, 4], ids[1::2, 6] = 5, 6, 7
    mask = torch.ones_like(ids)
    mask[1::3, 9:] = 0
    labels = torch.zeros_like(ids)
    labels[ids == 5], labels[ids == 6], labels[ids == 7] = 1, 2, 3
    labels[:, 0] = -100
    labels[mask == 0] = -100
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids), "labels": labels,
            "index": torch.arange(8)}


def test_it_learns_the_tags_and_writes_the_best_validations_table(tmp_path):
    config = small_config(num_labels=4, id2label=TAGS, label2id={v: k for k, v in TAGS.items()})
    module = TokenClassificationModule(config, optimizer=adamw(lr=1e-2))
    checkpoints = ModelCheckpoint(dirpath=tmp_path / "ckpt", monitor="val/f1", mode="max")
    run = trainer(tmp_path, max_steps=60, enable_checkpointing=True, callbacks=[checkpoints], val_check_interval=20,
                  check_val_every_n_epoch=None)
    batches = [tagging_batch(seed) for seed in range(4)]
    run.fit(module, loader(batches), [loader(batches[:2]), loader(batches[2:])])
    metrics = pd.read_csv(tmp_path / "logs" / "lightning_logs" / "version_0" / "metrics.csv")
    assert metrics["val/f1"].max() == 1.0 and metrics["dev/f1"].max() == 1.0
    table = pd.read_csv(tmp_path / "logs" / "lightning_logs" / "version_0" / "entities.csv")
    assert table["type"].tolist() == ["LOC", "PER"] and table["f1"].tolist() == [1.0, 1.0]
    persons = int(sum((b["input_ids"] == 5).sum() for b in batches[2:]))
    assert table.set_index("type").loc["PER", "support"] == persons  # the dev loader's, the last one's


def test_tags_that_are_no_tagging_scheme_are_refused():
    with pytest.raises(ConfigError, match="'LABEL_0' is not a tag"):
        TokenClassificationModule(small_config(num_labels=2))
