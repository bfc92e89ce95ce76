"""Weight selection (bertlab.weight_selection): selecting everything is the identity, selected layers compute
what those layers computed, merged heads keep each source head's score, and the residual dimensions kept are
those with the largest LayerNorm scales (the command, `bertlab shrink`: tests/commands/test_shrink.py)."""

from __future__ import annotations

import pytest
import torch

from bertlab.config import BertConfig
from bertlab.errors import ConfigError
from bertlab.model import BertForMaskedLM, BertForPreTraining, BertForSequenceClassification, BertModel
from bertlab.weight_selection import choose, select_weights, smaller_config

SOURCE = dict(vocab_size=50, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64,
              max_position_embeddings=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def shrink(model, **sizes):
    config = smaller_config(model.config, **sizes)
    state = model.state_dict()
    selection = choose(state, model.config, config)
    smaller = type(model)(config).eval()
    smaller.load_state_dict(select_weights(state, model.config, selection), strict=True)
    return smaller, selection


@pytest.fixture
def source() -> BertModel:
    torch.manual_seed(0)
    model = BertModel(BertConfig(**SOURCE)).eval()
    with torch.no_grad():  # distinct LayerNorm scales, so the residual dimensions kept are well defined
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.uniform_(0.5, 1.5)
    return model


def encode(model, input_ids):
    with torch.no_grad():
        return model(input_ids).last_hidden_state


@pytest.mark.parametrize("model_class", [BertModel, BertForMaskedLM, BertForPreTraining, BertForSequenceClassification])
def test_selecting_every_weight_is_the_identity(model_class):
    torch.manual_seed(0)
    source = model_class(BertConfig(**SOURCE)).eval()
    same, _ = shrink(source, layers=3, hidden=32, heads=4, intermediate=64)
    for key, tensor in source.state_dict().items():
        torch.testing.assert_close(same.state_dict()[key], tensor, rtol=0, atol=0, msg=key)


def test_fewer_layers_compute_what_the_selected_layers_did(source):
    smaller, selection = shrink(source, layers=2, hidden=32, heads=4, intermediate=64)
    assert selection.layers == [0, 2]
    source.encoder.layer = torch.nn.ModuleList([source.encoder.layer[0], source.encoder.layer[2]])
    input_ids = torch.randint(0, 50, (2, 9))
    torch.testing.assert_close(encode(smaller, input_ids), encode(source, input_ids), rtol=0, atol=0)


def test_a_merged_head_scores_the_sum_of_its_source_heads_scores(source):
    smaller, selection = shrink(source, layers=3, hidden=32, heads=2, intermediate=64)
    assert selection.heads == [0, 1, 2, 3] and selection.query_scale == pytest.approx(2 ** 0.5)
    x = torch.randn(5, 32)

    def scores(attention, heads):
        with torch.no_grad():
            q, k = attention.query(x).view(5, heads, -1), attention.key(x).view(5, heads, -1)
        return torch.einsum("ihd,jhd->hij", q, k) / q.shape[-1] ** 0.5

    wide = scores(smaller.encoder.layer[1].attention.self, 2)
    narrow = scores(source.encoder.layer[1].attention.self, 4)
    torch.testing.assert_close(wide, narrow[0::2] + narrow[1::2], rtol=1e-5, atol=1e-5)


def test_the_residual_dimensions_kept_have_the_largest_layer_norm_scales(source):
    total = sum(module.weight.detach() for module in source.modules() if isinstance(module, torch.nn.LayerNorm))
    smaller, selection = shrink(source, layers=2, hidden=16, heads=2, intermediate=24)
    expected = total.topk(16).indices.sort().values
    assert selection.hidden.tolist() == expected.tolist()
    torch.testing.assert_close(smaller.embeddings.word_embeddings.weight,
                               source.embeddings.word_embeddings.weight[:, expected], rtol=0, atol=0)
    assert selection.ffn.tolist() == torch.linspace(0, 63, 24).round().long().tolist()
    assert len(selection.heads) == 2  # 16 dimensions: two of the source's 8-wide heads


@pytest.mark.parametrize("sizes, message", [
    (dict(layers=4, hidden=32, heads=4, intermediate=64), "layers=4: must be from 1 to the source model's 3"),
    (dict(layers=2, hidden=24, heads=2, intermediate=64), "multiple of 8"),
    (dict(layers=2, hidden=32, heads=4, intermediate=65), "intermediate=65"),
])
def test_sizes_the_source_cannot_give_are_refused(source, sizes, message):
    with pytest.raises(ConfigError, match=message):
        smaller_config(source.config, **sizes)


def test_relative_positions_keep_the_head_width():
    config = BertConfig(**SOURCE, position_embedding_type="relative_key")
    smaller_config(config, layers=2, hidden=16, heads=2, intermediate=32)  # heads stay 8 wide: allowed
    with pytest.raises(ConfigError, match="heads must stay 8 wide"):
        smaller_config(config, layers=2, hidden=32, heads=2, intermediate=32)
