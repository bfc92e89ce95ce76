"""A sentence's attention maps (bertlab.interpret.attention_maps) are the model's attention probabilities (the
PNGs `bertlab attention` draws of them: tests/commands/test_attention.py)."""

from __future__ import annotations

import torch

from bertlab.interpret.attention_maps import sentence_attentions, token_attention
from bertlab.model import BertModel
from bertlab.tokenizer import load_tokenizer


def test_the_maps_are_the_models_attention_probabilities_for_a_pair(classifier_dir):
    model, tokenizer = BertModel.from_pretrained(classifier_dir), load_tokenizer(classifier_dir)
    tokens, attentions = sentence_attentions(model, tokenizer, "the movie was good", "a dull plot")
    encoding = tokenizer.encode("the movie was good", "a dull plot")
    assert tokens == encoding.tokens and tokens[0] == "[CLS]" and tokens.count("[SEP]") == 2
    with torch.inference_mode():
        expected = model(torch.tensor([encoding.ids]), token_type_ids=torch.tensor([encoding.type_ids]),
                         output_attentions=True).attentions
    assert len(attentions) == 2
    for ours, theirs in zip(attentions, expected):
        assert ours.shape == (4, len(tokens), len(tokens))
        torch.testing.assert_close(ours, theirs[0], rtol=0, atol=0)
        torch.testing.assert_close(ours.sum(-1), torch.ones(4, len(tokens)))
    across = token_attention(attentions, 2)
    torch.testing.assert_close(across[1], attentions[1][:, 2].mean(0))
