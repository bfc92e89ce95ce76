"""`bertlab evaluate` (batched length-sorted inference) scores exactly as Lightning's validation loop does."""

from __future__ import annotations

import lightning as L
import pytest

from bertlab.commands.evaluate import evaluate
from bertlab.config import BertConfig
from bertlab.data.classification import ClassificationDataModule
from bertlab.lit import ClassificationModule
from bertlab.model import BertForSequenceClassification
from tests.commands.test_fine_tune import save, tokenizer

__all__ = ["tokenizer"]  # the fixture, shared


def test_evaluate_scores_as_the_lightning_validation_loop(tokenizer, tiny_data_dir, tmp_path):
    L.seed_everything(3)
    config = BertConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                        id2label={0: "negative", 1: "positive"})
    classifier = save(BertForSequenceClassification(config), tokenizer, tmp_path / "classifier")
    ours = evaluate(str(classifier), str(tiny_data_dir / "sst2"), batch_size=7)
    datamodule = ClassificationDataModule(str(tiny_data_dir / "sst2"), str(classifier), label_names=["negative", "positive"],
                                          eval_batch_size=16)
    model = BertForSequenceClassification.from_pretrained(classifier)
    trainer = L.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    (lightning,) = trainer.validate(ClassificationModule(model=model), datamodule=datamodule, verbose=False)
    assert set(ours) == {key.removeprefix("val/") for key in lightning}
    for key, value in lightning.items():
        assert ours[key.removeprefix("val/")] == pytest.approx(float(value), abs=1e-5), key
