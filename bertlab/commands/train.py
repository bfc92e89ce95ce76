"""`python -m bertlab train +recipe=mlm_tiny [overrides…]`: pretraining, by masked LM (+ NSP) or by a
teacher's sentence embeddings (`+recipe=embed_distill_tiny`, task=embedding_distill: a pretrained student learns
them before fine-tuning).

Writes into the run folder: config.yaml (resolved), metrics.csv, metrics.json, metrics.png,
lightning_checkpoints/ (for resuming) and hf_model/ (Hugging Face format with the tokenizer);
then points outputs/<name>/latest at the run. The route: bertlab.training.run.fit.run_training.
"""

from __future__ import annotations

from bertlab.training.launch.app import launch
from bertlab.training.run.fit import prepare_training, run_training


def main(argv: list[str], prog: str) -> None:
    launch("train", run_training, argv, prog, prepare=prepare_training)
