"""A pretraining run's plain-text measure (text/perplexity ratio to the unigram model) on the validation packing of
other data settings: the held-out sequences and their masks follow `data.max_seq_length`, `data.short_seq_prob` and
`data.nsp` (docs/pretraining_validation.md), so runs trained with different ones are compared on one packing.

    python experiments/text_measure.py RUN_DIR [KEY=VALUE …]     # e.g. data.short_seq_prob=0.1

Prints one JSON line: the run, the overrides and its text/ metrics."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import lightning as L
from omegaconf import OmegaConf

from bertlab.checkpoint.dispatch import load_into
from bertlab.training.run.modules import ModuleGroups, build


def main(run: Path, overrides: list[str]) -> dict:
    config = OmegaConf.load(run / "config.yaml")  # resolved when the run wrote it: `fastest` is a precision there
    config.merge_with_dotlist(overrides)
    config.model.init_from = None  # a fresh module of the run's architecture; the run's weights are loaded over it
    groups = ModuleGroups(command="train", data=config.data, task=config.task, model=config.model,
                          optimizer=config.optimizer, scheduler=config.scheduler, tokenizer=config.tokenizer,
                          seed=config.seed)
    module, datamodule = build(groups)
    print(load_into(module.model, run / "hf_model"), file=sys.stderr)
    trainer = L.Trainer(precision=config.trainer.precision, limit_val_batches=config.trainer.limit_val_batches,
                        logger=False, enable_progress_bar=False)
    metrics = trainer.validate(module, datamodule, verbose=False)[0]
    return {"run": str(run), "overrides": overrides,
            **{name: float(value) for name, value in metrics.items() if name.startswith("text/")}}


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), sys.argv[2:])))
