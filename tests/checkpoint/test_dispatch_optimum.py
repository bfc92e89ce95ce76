"""A classifier export of each Hugging Face format (BERT, ModernBERT) goes to ONNX through Hugging Face optimum's
exporter (`optimum.exporters.onnx.main_export`, the `optimum-cli export onnx` command's function), and
onnxruntime then computes bertlab's own logits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertlab import BertForSequenceClassification
from bertlab.checkpoint.dispatch import export_pretrained, save_format
from bertlab.tokenizer import train_tokenizer
from tests.checkpoint.test_modernbert import MODERNBERT
from tests.factories import perturbed, small_config

SENTENCES = ["the cat sat on the mat", "a dog ran far away from the cat"]  # of two lengths: one row is padded
FORMATS = {"bert": {}, "modernbert": MODERNBERT}


@pytest.mark.slow
@pytest.mark.parametrize("name", FORMATS)
def test_optimum_exports_a_classifier_that_onnxruntime_runs_as_bertlab_does(name, tmp_path):
    onnxruntime = pytest.importorskip("onnxruntime")
    transformers = pytest.importorskip("transformers")
    exporter = pytest.importorskip("optimum.exporters.onnx", reason="optimum 2.x exports to ONNX from the separate "
                                                                     "package optimum-onnx (pip install optimum-onnx)")
    tokenizer = train_tokenizer(SENTENCES * 10, vocab_size=60)
    config = small_config(vocab_size=tokenizer.get_vocab_size(), num_hidden_layers=3, num_attention_heads=2,
                          num_labels=2, **FORMATS[name])
    torch.manual_seed(0)
    model = perturbed(BertForSequenceClassification(config), seed=3).eval()
    assert save_format(model).MODEL_TYPE == name
    export_pretrained(model, tokenizer, tmp_path / "hf_model")

    exporter.main_export(str(tmp_path / "hf_model"), output=tmp_path / "onnx", task="text-classification")
    session = onnxruntime.InferenceSession(tmp_path / "onnx" / "model.onnx")
    batch = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf_model")(SENTENCES, padding=True,
                                                                              return_tensors="np")
    inputs = {entry.name: batch[entry.name].astype(np.int64) for entry in session.get_inputs()}
    assert (inputs["attention_mask"] == 0).any()
    with torch.no_grad():
        expected = model(**{key: torch.from_numpy(value) for key, value in inputs.items()}).logits
    torch.testing.assert_close(torch.from_numpy(session.run(["logits"], inputs)[0]), expected, atol=1e-5, rtol=0)
