"""Fitting a checkpoint's weights to a model (bertlab.checkpoint.fitting): a base checkpoint into a head model and
back, load reports grouped per layer, a classifier re-initialised for other labels, and configs that disagree with
the weights refused naming the folder."""

from __future__ import annotations

import pytest

from bertlab import BertForMaskedLM, BertForPreTraining, BertForSequenceClassification, BertModel
from bertlab.errors import CheckpointError
from tests.checkpoint.test_dispatch import assert_same_encoder, edit_config, saved, small_config


def test_report_groups_per_layer_keys(tmp_path):
    saved(BertForPreTraining(small_config(num_hidden_layers=4)), tmp_path)
    model = BertForPreTraining.from_pretrained(tmp_path, num_hidden_layers=2)
    text = str(model.load_report)
    assert "  ignored (in the checkpoint, not used by this model):" in text
    assert "    bert.encoder.layer.{2-3}.attention.self.query.weight" in text
    assert "layer.2." not in text and "layer.3." not in text
    assert len(model.load_report.unexpected) == 2 * 16


def test_base_checkpoint_without_prefix_loads_into_head_model(tmp_path):
    base = BertModel(small_config())
    model = BertForMaskedLM.from_pretrained(saved(base, tmp_path))
    assert sorted(model.load_report.unexpected) == ["bert.pooler.dense.bias", "bert.pooler.dense.weight"]
    assert all(key.startswith("cls.predictions.") for key in model.load_report.missing)
    assert_same_encoder(base, model.bert)


def test_prefixed_checkpoint_loads_into_base_model(tmp_path):
    full = BertForPreTraining(small_config())
    model = BertModel.from_pretrained(saved(full, tmp_path))
    assert model.load_report.missing == []
    assert model.load_report.unexpected and all(k.startswith("cls.") for k in model.load_report.unexpected)
    assert_same_encoder(full.bert, model)


def test_relative_config_with_absolute_weights_is_an_error(tmp_path):
    saved(BertModel(small_config()), tmp_path)
    edit_config(tmp_path, position_embedding_type="relative_key")
    with pytest.raises(CheckpointError, match="relative_key.*no distance_embedding.*absolute positions") as error:
        BertModel.from_pretrained(tmp_path)
    assert str(tmp_path) in str(error.value)


def test_absolute_config_with_relative_weights_is_an_error(tmp_path):
    saved(BertForMaskedLM(small_config(position_embedding_type="relative_key_query")), tmp_path)
    edit_config(tmp_path, position_embedding_type="absolute")
    with pytest.raises(CheckpointError, match="'absolute' but the weights contain relative distance_embedding"):
        BertForMaskedLM.from_pretrained(tmp_path)


@pytest.mark.parametrize("change", [dict(intermediate_size=48), dict(hidden_size=64), dict(vocab_size=100)])
def test_weights_that_do_not_fit_the_config_are_an_error(tmp_path, change):
    saved(BertForSequenceClassification(small_config()), tmp_path)
    edit_config(tmp_path, **change)
    with pytest.raises(CheckpointError, match="do not fit the model config.*checkpoint.*vs model") as error:
        BertForSequenceClassification.from_pretrained(tmp_path)
    assert str(tmp_path) in str(error.value)


def test_classifier_with_other_num_labels_is_reinitialised_not_an_error(tmp_path):
    original = BertForSequenceClassification(small_config(id2label={0: "neg", 1: "pos"}))
    saved(original, tmp_path)
    model = BertForSequenceClassification.from_pretrained(tmp_path, num_labels=5)
    report = model.load_report
    assert sorted(key for key, _, _ in report.mismatched) == ["classifier.bias", "classifier.weight"]
    assert ("classifier.weight", (2, 32), (5, 32)) in report.mismatched
    assert report.missing == [] and report.unexpected == []
    assert "re-initialised (shape in checkpoint differs from this model):" in str(report)
    assert "classifier.weight: checkpoint (2, 32) vs model (5, 32)" in str(report)
    assert model.config.num_labels == 5 and model.config.id2label is None  # old names dropped
    assert model.classifier.weight.std() > 0
    assert_same_encoder(original.bert, model.bert)


def test_same_num_labels_override_keeps_label_names(tmp_path):
    saved(BertForSequenceClassification(small_config(id2label={0: "neg", 1: "pos"})), tmp_path)
    model = BertForSequenceClassification.from_pretrained(tmp_path, num_labels=2)
    assert model.config.id2label == {0: "neg", 1: "pos"} and model.load_report.complete


@pytest.mark.parametrize(("pruned_in", "pruned_heads"), [("weights", {}), ("config", {"0": [1]})])
def test_pruned_heads_in_only_the_weights_or_only_the_config_are_an_error(tmp_path, pruned_in, pruned_heads):
    model = BertModel(small_config())
    if pruned_in == "weights":
        model.prune_heads({0: [1]})
    saved(model, tmp_path)
    edit_config(tmp_path, pruned_heads=pruned_heads)
    message = r"7 tensor\(s\) do not fit the model config, e.g. encoder.layer.0.attention.*weights disagree"
    with pytest.raises(CheckpointError, match=message):  # query, key, value (weights, biases), output.dense
        BertModel.from_pretrained(tmp_path)
