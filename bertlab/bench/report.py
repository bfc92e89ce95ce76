"""Benchmark results: throughputs and ratios from the timings, as JSON and as Markdown tables (bertlab.tables)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bertlab.bench.clock import Timing
from bertlab.tables import markdown_table, write_markdown


@dataclass
class Result:
    """One system measured in one comparison (`section`, `case`); `work` units (tokens, examples,
    sentences) per repeat. `baseline` names the system of the comparison that ratios are taken
    against; `setting` says what was run, for the section's heading."""
    section: str
    case: str
    setting: str
    precision: str
    system: str
    unit: str
    work: float
    timing: Timing
    baseline: str
    steps: int = 1
    flops: float | None = None  # model FLOPs per repeat
    ratio: float | None = field(init=False, default=None)
    ratio_fp32_baseline: float | None = field(init=False, default=None)
    mfu: float | None = field(init=False, default=None)  # of the measured matmul peak
    mfu_datasheet: float | None = field(init=False, default=None)  # of the device's datasheet peak

    @property
    def throughput(self) -> float:
        return self.work / self.timing.median

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.timing.median

    def to_dict(self) -> dict:
        data = asdict(self)
        data.update(seconds=self.timing.seconds, median_seconds=self.timing.median, spread=self.timing.spread,
                    throughput=self.throughput, steps_per_second=self.steps_per_second)
        del data["timing"]
        return data


def add_ratios(results: list[Result], peaks: dict[str, float], datasheet: dict[str, float] | None = None) -> None:
    """Ratio to the baseline system of the same comparison, to the baseline's fp32 row of the same case,
    and, where FLOPs are known, the fraction of the measured matmul peak of the row's precision and of
    its `datasheet` peak (FLOP/s by precision), where given."""
    for result in results:
        same_case = [other for other in results if (other.section, other.case) == (result.section, result.case)]
        for other in same_case:
            if other.system == result.baseline:
                if other.precision == result.precision:
                    result.ratio = result.throughput / other.throughput
                if other.precision == "fp32":
                    result.ratio_fp32_baseline = result.throughput / other.throughput
        if result.flops is not None and result.precision in peaks:
            result.mfu = result.flops / result.timing.median / peaks[result.precision]
        if result.flops is not None and result.precision in (datasheet or {}):
            result.mfu_datasheet = result.flops / result.timing.median / datasheet[result.precision]


def _table(header: list[str], rows: list[list[str]]) -> str:
    return "\n".join(markdown_table(header, rows, rule="---"))


def _ratio(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}×"


def _spread(timing: Timing) -> str:
    return f"±{100 * timing.spread / 2:.0f}%"


def _percent(value: float | None) -> str:
    return "" if value is None else f"{100 * value:.0f}%"


def markdown(results: list[Result], peaks: dict[str, float], machine: dict[str, str],
             datasheet: dict[str, float] | None = None) -> str:
    datasheet = datasheet or {}
    parts = ["## Machine", _table(["", ""], [[key, str(value)] for key, value in machine.items()])]
    parts += ["## Matrix-multiply peak (measured)",
              _table(["precision", "GFLOP/s"], [[p, f"{peak / 1e9:,.0f}"] for p, peak in peaks.items()])]
    pretraining = [r for r in results if r.section == "pretraining"]
    if pretraining:
        mfu_header = ["MFU"] if datasheet else []
        parts += [f"## MLM pretraining step ({pretraining[0].setting})",
                  _table(["model", "precision", "system", "tokens/s", "spread", "× transformers (same precision)",
                          "× transformers fp32", "GFLOP/step", "% of matmul peak", *mfu_header],
                         [[r.case, r.precision, r.system, f"{r.throughput:,.0f}", _spread(r.timing), _ratio(r.ratio),
                           _ratio(r.ratio_fp32_baseline), f"{r.flops / r.steps / 1e9:,.3g}", _percent(r.mfu),
                           *([_percent(r.mfu_datasheet)] if datasheet else [])] for r in pretraining]),
                  "The headline is × transformers (same precision): both systems fp32, or both under the same "
                  "bf16 autocast. × transformers fp32 compares with what run_mlm.py runs by default. "
                  "% of matmul peak: model FLOPs (bertlab.lit.throughput: 3 × the forward's matmuls, sparse MLM "
                  "head for bertlab) per second over the measured peak of the row's precision."
                  + "".join(f" MFU: the same FLOPs per second over the datasheet's dense {p} peak, "
                            f"{peak / 1e12:,.0f} TFLOP/s." for p, peak in datasheet.items())]
    modernbert = [r for r in results if r.section == "modernbert"]
    if modernbert:
        parts += [f"## ModernBERT-shaped MLM pretraining step ({modernbert[0].setting})",
                  _table(["model", "precision", "system", "tokens/s", "spread", "× transformers ModernBERT (defaults)",
                          "GFLOP/step", "% of matmul peak"],
                         [[r.case, r.precision, r.system, f"{r.throughput:,.0f}", _spread(r.timing), _ratio(r.ratio),
                           f"{r.flops / r.steps / 1e9:,.3g}", _percent(r.mfu)] for r in modernbert]),
                  "transformers ModernBERT: stock ModernBertForMaskedLM of the same config (bertlab.checkpoint.modernbert) "
                  "at its defaults, and with sparse_prediction=True (its head and loss at the masked positions only)."]
    fine_tuning = [r for r in results if r.section == "fine-tuning"]
    for case in dict.fromkeys(r.case for r in fine_tuning):  # a table per task (SST-2, CoNLL-2003), in run order
        rows = [r for r in fine_tuning if r.case == case]
        parts += [f"## Fine-tuning ({rows[0].setting})",
                  _table(["precision", "system", "steps/s", "examples/s", "spread",
                          "× transformers (dynamic padding)"],
                         [[r.precision, r.system, f"{r.steps_per_second:.2f}", f"{r.throughput:,.1f}",
                           _spread(r.timing), _ratio(r.ratio)] for r in rows])]
    inference = [r for r in results if r.section == "inference"]
    if inference:
        parts += [f"## Inference ({inference[0].setting})",
                  _table(["precision", "system", "sentences/s", "spread", "× transformers pipeline"],
                         [[r.precision, r.system, f"{r.throughput:,.0f}", _spread(r.timing), _ratio(r.ratio)]
                          for r in inference])]
    return "\n\n".join(parts) + "\n"


def write(run_dir: Path, results: list[Result], peaks: dict[str, float], machine: dict[str, str],
          datasheet: dict[str, float] | None = None) -> str:
    """Writes results.json and results.md into `run_dir`; returns the Markdown."""
    run_dir.mkdir(parents=True, exist_ok=True)
    text = write_markdown(run_dir / "results.md", markdown(results, peaks, machine, datasheet))
    payload = {"machine": machine, "matmul_peak_flops": peaks, "datasheet_peak_flops": datasheet or {},
               "results": [r.to_dict() for r in results]}
    (run_dir / "results.json").write_text(json.dumps(payload, indent=2), encoding="utf-8")
    return text
