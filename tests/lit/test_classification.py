"""ClassificationModule (bertlab.lit.classification): training, evaluation, prediction, a given
model, frozen parameters."""

from __future__ import annotations


import pytest
import torch

from bertlab.config import BertConfig
from bertlab.errors import ConfigError
from bertlab.lit.classification import ClassificationModule
from bertlab.model import BertForSequenceClassification
from tests.lit.helpers import adamw, classification_batch, loader, small_config, trainer


pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # Lightning's hints about workers, logging


@pytest.mark.parametrize("num_labels", [2, 1])
def test_classification_trains_evaluates_and_predicts(tmp_path, num_labels):
    batch = classification_batch(num_labels)
    module = ClassificationModule(small_config(num_labels=num_labels), optimizer=adamw(lr=1e-2),
                                  layerwise_lr_decay=0.8)
    run = trainer(tmp_path, max_steps=10)
    before = run.validate(module, loader([batch]), verbose=False)[0]
    run.fit(module, loader([batch] * 10))
    after = run.validate(module, loader([batch]), verbose=False)[0]

    assert after["val/loss"] < before["val/loss"] / 2
    if num_labels == 2:
        assert set(after) == {"val/loss", "val/accuracy", "val/f1", "val/mcc"}
        assert after["val/accuracy"] == 1.0 and after["val/f1"] == 1.0 and after["val/mcc"] == pytest.approx(1.0)
    else:
        assert set(after) == {"val/loss", "val/pearson", "val/spearman", "val/mse"}
        assert after["val/pearson"] > 0.9 and after["val/mse"] == pytest.approx(after["val/loss"], rel=1e-4)
    head_lr, embedding_lr = (next(g["lr"] for g in run.optimizers[0].param_groups if g["name"] == name)
                             for name in ("head", "embeddings"))
    assert embedding_lr == pytest.approx(head_lr * 0.8 ** 3)

    shuffled = {key: value.flip(0) for key, value in batch.items()}
    (prediction,) = run.predict(module, loader([shuffled]))
    assert torch.equal(prediction["index"], torch.arange(16).flip(0))
    if num_labels == 2:
        assert prediction["probabilities"].shape == (16, 2)
        assert torch.allclose(prediction["probabilities"].sum(-1), torch.ones(16))
        assert torch.equal(prediction["probabilities"].argmax(-1), shuffled["labels"])
    else:
        assert prediction["predictions"].shape == (16,)


def test_classification_uses_a_given_model_and_stores_its_config():
    model = BertForSequenceClassification(small_config(num_labels=3, id2label={0: "a", 1: "b", 2: "c"}))
    module = ClassificationModule(model=model, optimizer=adamw())
    assert module.model is model
    assert BertConfig.from_dict(module.hparams.config) == model.config
    with pytest.raises(ConfigError, match=r"^a fine-tuning module needs a model config \(config\) or a loaded model "
                                          r"\(model\); got neither$"):
        ClassificationModule(optimizer=adamw())


def test_classification_freezes_the_named_parameters(tmp_path):
    module = ClassificationModule(small_config(), optimizer=adamw(lr=1e-2),
                                  freeze=["bert.embeddings.word_embeddings.*", "bert.encoder.layer.0.*"])
    before = {name: param.detach().clone() for name, param in module.model.named_parameters()}
    trainer(tmp_path, max_steps=3, logger=False).fit(module, loader([classification_batch()] * 3))

    changed = {name for name, param in module.model.named_parameters() if not torch.equal(param, before[name])}
    frozen = {name for name in before if name == "bert.embeddings.word_embeddings.weight"
              or name.startswith("bert.encoder.layer.0.")}
    assert len(frozen) == 17 and not changed & frozen
    assert {"bert.embeddings.position_embeddings.weight", "bert.encoder.layer.1.output.dense.weight",
            "classifier.weight"} <= changed
    with pytest.raises(ConfigError, match=r"task.freeze: 'bert.embedding.\*' matches no parameter"):
        ClassificationModule(small_config(), freeze=["bert.embedding.*"])
