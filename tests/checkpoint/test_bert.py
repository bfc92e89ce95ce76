"""The BERT format (bertlab.checkpoint.bert): old checkpoints' buffers, TensorFlow's LayerNorm names and the decoder
bias's alias read back into the same weights."""

from __future__ import annotations

import torch
from safetensors.torch import load_file

from bertlab import BertForPreTraining
from tests.checkpoint.test_dispatch import rewrite_weights, saved, small_config


def test_old_buffers_tf_names_and_decoder_bias_alias_are_understood(tmp_path):
    original = BertForPreTraining(small_config())
    with torch.no_grad():
        original.cls.predictions.bias.normal_()
    saved(original, tmp_path)

    def to_old_style(state):
        renamed = {}
        for key, tensor in state.items():
            key = key.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
            key = key.replace("cls.predictions.bias", "cls.predictions.decoder.bias")
            renamed[key] = tensor
        renamed["bert.embeddings.position_ids"] = torch.arange(32)[None]
        renamed["bert.embeddings.token_type_ids"] = torch.zeros(1, 32, dtype=torch.long)
        renamed["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"].clone()
        return renamed

    rewrite_weights(tmp_path, to_old_style)
    assert any(k.endswith("LayerNorm.gamma") for k in load_file(tmp_path / "model.safetensors"))
    model = BertForPreTraining.from_pretrained(tmp_path)
    assert model.load_report.complete, str(model.load_report)
    for key, tensor in original.state_dict().items():
        assert torch.equal(model.state_dict()[key], tensor), key
