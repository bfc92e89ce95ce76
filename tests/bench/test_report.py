"""The benchmark's report (bertlab.bench.report): ratios to the baseline and the fraction of the peak."""

from __future__ import annotations

import pytest

from bertlab.bench.clock import Timing
from bertlab.bench.report import Result, add_ratios


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
