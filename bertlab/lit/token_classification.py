"""`TokenClassificationModule`: fine-tunes `BertForTokenClassification` (named-entity recognition), scored on
entities (bertlab.ner_metrics), and `EntityTable`, the per-type table of the best checkpoint in the run folder."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import lightning as L
import torch
import torch.distributed as dist

from bertlab.argument_checks import checks_arguments
from bertlab.lit.fine_tuning import FineTuningModule, per_piece_forward_flops
from bertlab.losses import IGNORE_INDEX
from bertlab.metrics import best_point, read_metrics, series
from bertlab.model import BertForTokenClassification
from bertlab.ner_metrics import SCORINGS, TYPE_COLUMNS, entity_scores, tag_scheme
from bertlab.tables import markdown_table, write_csv, write_markdown
from bertlab.value_rules import OneOf

ENTITY_PREFIX = "entity/"  # metrics.csv's per-type scores of the reported split: entity/<TYPE>/<column>
TABLE_NAME = "entities"  # entities.csv and entities.md in the run folder


def word_tags(logits: torch.Tensor, labels: torch.Tensor, label_names: Sequence[str]):
    """(gold, predicted) tag names per row, at the scored positions (each word's first piece)."""
    scored = labels != IGNORE_INDEX
    predicted = logits.argmax(-1)
    gold_rows, predicted_rows = [], []
    for row in range(labels.shape[0]):
        gold_rows.append([label_names[i] for i in labels[row][scored[row]].tolist()])
        predicted_rows.append([label_names[i] for i in predicted[row][scored[row]].tolist()])
    return gold_rows, predicted_rows


def gathered(rows: list) -> list:
    """Every process's rows, in rank order (one process: its own)."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return rows
    parts: list = [None] * dist.get_world_size()
    dist.all_gather_object(parts, rows)
    return [row for part in parts for row in part]


@checks_arguments
class TokenClassificationModule(FineTuningModule):
    """A tag per word: `config` (BertConfig or its dict) builds a fresh model, or a command passes a loaded
    `model`; its `id2label` are the tags (O, B-PER, …). `scoring` reads the tags as conlleval does (papers'
    figure) or strictly (bertlab.ner_metrics). Validation logs entity precision, recall and F1 and word
    accuracy as val/… (and dev/… for a second loader), and the per-type scores of the last loader (the
    validation split) under entity/. The other arguments: FineTuningModule's."""

    model_class = BertForTokenClassification

    def __init__(self, *args: Any, scoring: Annotated[str, OneOf(*SCORINGS)] = "conlleval", **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.keep_options(scoring=scoring)
        config = self.model.config
        self.label_names = [(config.id2label or {}).get(i, f"LABEL_{i}") for i in range(config.num_labels)]
        self.scheme = tag_scheme(self.label_names)
        self.scoring = scoring
        self._rows: dict[int, tuple[list, list]] = {}  # per validation loader: (gold, predicted) tag rows

    def forward_flops(self, batch_size: int, length: int) -> float:
        return per_piece_forward_flops(self.model, batch_size, length)

    def on_validation_epoch_start(self) -> None:
        self._rows = {}

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        labels = batch["labels"]
        output = self._forward(batch, labels=labels)
        gold, predicted = word_tags(output.logits, labels, self.label_names)
        rows = self._rows.setdefault(dataloader_idx, ([], []))
        rows[0].extend(gold)
        rows[1].extend(predicted)
        prefix = "val/" if dataloader_idx == 0 else "dev/"
        self.log(f"{prefix}loss", output.loss, prog_bar=dataloader_idx == 0, batch_size=labels.shape[0],
                 add_dataloader_idx=False)

    def on_validation_epoch_end(self) -> None:
        for index, (gold, predicted) in sorted(self._rows.items()):
            gold, predicted = gathered(gold), gathered(predicted)
            scores, types = entity_scores(gold, predicted, self.scoring, self.scheme)
            words = sum(len(row) for row in gold)
            scores["accuracy"] = sum(g == p for a, b in zip(gold, predicted) for g, p in zip(a, b)) / max(words, 1)
            prefix = "val/" if index == 0 else "dev/"
            self.log_dict({f"{prefix}{name}": value for name, value in scores.items()}, prog_bar=index == 0)
            if index == max(self._rows):
                self.log_dict({f"{ENTITY_PREFIX}{row['type']}/{column}": float(row[column])
                               for row in types for column in TYPE_COLUMNS[1:]})

    def predict_step(self, batch: dict[str, torch.Tensor], batch_idx: int, dataloader_idx: int = 0) -> dict:
        """Tag probabilities per piece, with the batch's `index` so rows can be put back in dataset order."""
        return {"probabilities": self._forward(batch).logits.float().softmax(-1), "index": batch["index"]}

    def configure_callbacks(self) -> list[L.Callback]:
        return [EntityTable()]


class EntityTable(L.Callback):
    """At the end of fit: the per-type table (precision, recall, F1, support) of the validation split at the
    best validation of the checkpoint callback's monitor (the exported checkpoint), as entities.csv and
    entities.md in the run folder; read from metrics.csv, so a resumed run has it whole."""

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        checkpoints = trainer.checkpoint_callback
        if not trainer.is_global_zero or trainer.log_dir is None:
            return
        frame = read_metrics(Path(trainer.log_dir))
        columns = [name for name in frame.columns if name.startswith(ENTITY_PREFIX)]
        if not columns:
            return
        monitor = getattr(checkpoints, "monitor", None)
        if monitor in frame.columns:
            step, _ = best_point(series(frame, monitor), checkpoints.mode, monitor)
        else:
            step = int(frame.dropna(subset=columns, how="all")["step"].iloc[-1])
        row = frame[frame["step"] == step][columns].dropna(how="all").iloc[-1]
        types = sorted({name[len(ENTITY_PREFIX):].rsplit("/", 1)[0] for name in columns})
        table = [{"type": kind, **{column: float(row[f"{ENTITY_PREFIX}{kind}/{column}"])
                                   for column in TYPE_COLUMNS[1:]}} for kind in types]
        for entry in table:
            entry["support"] = int(entry["support"])
        directory = Path(trainer.log_dir)
        write_csv(directory / f"{TABLE_NAME}.csv", table, TYPE_COLUMNS)
        lines = [f"Entities of the validation split at step {step} (the exported checkpoint), "
                 f"{pl_module.scoring} scoring", "",
                 *markdown_table(TYPE_COLUMNS, [[entry["type"], *(f"{100 * entry[c]:.2f}" for c in TYPE_COLUMNS[1:4]),
                                                 entry["support"]] for entry in table])]
        write_markdown(directory / f"{TABLE_NAME}.md", "\n".join(lines) + "\n")
