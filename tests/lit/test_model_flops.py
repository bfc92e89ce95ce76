"""`flops_per_batch` of the LightningModules (bertlab.lit.model_flops; the MFU logged from it:
tests/lit/test_throughput.py)."""

from __future__ import annotations

import pytest
import torch

from bertlab.flops import classification_forward_flops, mlm_forward_flops
from bertlab.lit.classification import ClassificationModule
from bertlab.lit.masking import masking_generator
from tests.lit.helpers import classification_batch, pretraining_batch, pretraining_module, small_config


def test_a_training_batch_counts_forward_and_backward_an_evaluation_batch_the_forward():
    module = pretraining_module()  # mlm_probability 0.3
    assert module.flops_per_batch is None  # before any batch
    module.count_batch(pretraining_batch())  # 8 rows of 16 tokens, [CLS] and [SEP] never masked
    forward = mlm_forward_flops(module.model.config, batch_size=8, length=16, predicted=8 * 14 * 0.3)
    assert module.train().flops_per_batch == pytest.approx(3 * forward)
    assert module.eval().flops_per_batch == pytest.approx(forward)
    classifier = ClassificationModule(config=small_config(num_labels=2))
    classifier.count_batch(classification_batch())  # 16 × 12
    assert classifier.eval().flops_per_batch == classification_forward_flops(classifier.model.config, 16, 12)


def test_a_sampled_softmax_step_counts_the_decoder_over_its_candidates_alone():
    module = pretraining_module(softmax_samples=8).train()
    batch = pretraining_batch()  # the targets are tokens 10 to 17
    module.set_unigram(torch.bincount(batch["input_ids"].flatten(), minlength=module.model.config.vocab_size).numpy())
    module._sampled_mlm_loss(batch, masking_generator(7, 0))
    candidates = module._scored_tokens
    assert 8 < candidates <= 8 + 8  # the targets and the tokens drawn, each once: far fewer than the vocabulary
    config, predicted = module.model.config, 8 * 14 * 0.3
    forward = mlm_forward_flops(config, batch_size=8, length=16, predicted=predicted)
    decoder_saved = 2 * predicted * config.hidden_size * (config.vocab_size - candidates)
    assert module.flops_per_batch == pytest.approx(3 * (forward - decoder_saved))
    assert module.eval().flops_per_batch == pytest.approx(forward)  # validation keeps the full softmax
