"""The benchmark's report (bertlab.bench.report): ratios to the baseline and the fraction of the peak."""

from __future__ import annotations

import pytest

from bertlab.bench.clock import Timing
from bertlab.bench.report import Result, add_ratios, markdown


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


def test_each_fine_tuning_task_has_its_own_table_under_its_setting():
    def result(case, setting, system, seconds):
        return Result("fine-tuning", case, setting, "fp32", system, "examples/s", work=32, timing=Timing(seconds),
                      baseline="transformers, dynamic padding")

    results = [result("sst2", "SST-2 train", "bertlab", [0.5]),
               result("sst2", "SST-2 train", "transformers, dynamic padding", [1.0]),
               result("conll2003", "CoNLL-2003 train", "bertlab", [0.25]),
               result("conll2003", "CoNLL-2003 train", "transformers, dynamic padding", [1.0])]
    add_ratios(results, peaks={})
    text = markdown(results, peaks={}, machine={})
    sst2, conll = text.index("## Fine-tuning (SST-2 train)"), text.index("## Fine-tuning (CoNLL-2003 train)")
    assert sst2 < text.index("2.00×") < conll < text.index("4.00×")
