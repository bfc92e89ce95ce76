"""The inference rows of the bench (bertlab.bench.inference): a warm-up on the first sentences, then all of them
timed under the precision's autocast; bertlab's `predict` and transformers' pipeline classify with the same
checkpoint alike; the validation sentences read; a row per system against the pipeline."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from bertlab.bench import inference
from bertlab.bench.clock import Timing
from bertlab.bench.inference import WARMUP_TEXTS, validation_sentences

CPU = torch.device("cpu")


def test_a_measurement_warms_up_on_the_first_texts_then_times_classifying_all(monkeypatch):
    now, classified = [0.0], []
    monkeypatch.setattr(inference, "time", SimpleNamespace(perf_counter=lambda: now[0]))

    def classify(batch):  # a (fake) second per text
        classified.append(batch)
        now[0] += len(batch)

    texts = [f"sentence {i}" for i in range(WARMUP_TEXTS + 44)]
    measure = inference._measurement(classify, texts, CPU, "fp32")
    assert classified == [texts[:WARMUP_TEXTS]]
    assert measure() == WARMUP_TEXTS + 44
    assert classified[1:] == [texts]


@pytest.mark.parametrize("precision, autocast", [("fp32", False), ("bf16", True)])
def test_texts_are_classified_under_the_autocast_of_the_precision(precision, autocast):
    seen = []
    measure = inference._measurement(lambda batch: seen.append(torch.is_autocast_enabled("cpu")), ["a", "b"], CPU,
                                     precision)
    measure()
    assert seen == [autocast, autocast]  # the warm-up and the timed run


def test_both_systems_classify_alike_with_the_same_checkpoint(monkeypatch, classifier_dir, tiny_data_dir):
    pytest.importorskip("transformers")
    classifiers = []
    monkeypatch.setattr(inference, "_measurement", lambda classify, texts, device, precision: classifiers.append(
        classify))
    texts = validation_sentences(tiny_data_dir / "sst2", 12)
    inference.bertlab_measurement(str(classifier_dir), texts, CPU, "fp32")
    inference.transformers_measurement(str(classifier_dir), texts, CPU, "fp32")
    ours, pipeline = (classify(texts) for classify in classifiers)
    assert [row["label"] for row in pipeline] == [("negative", "positive")[label] for label in ours.argmax(-1)]
    assert [row["score"] for row in pipeline] == pytest.approx(ours.max(-1).tolist(), abs=1e-5)


def test_validation_sentences_are_the_first_of_the_validation_split(tiny_data_dir):
    sentences = pd.read_parquet(tiny_data_dir / "sst2" / "validation.parquet")["sentence"].tolist()
    assert validation_sentences(tiny_data_dir / "sst2", 5) == sentences[:5]
    assert validation_sentences(tiny_data_dir / "sst2", None) == sentences and len(sentences) == 64


def test_each_precision_gives_a_row_per_system_against_the_pipeline(monkeypatch):
    built = []
    for name in ("bertlab_measurement", "transformers_measurement"):
        monkeypatch.setattr(inference, name, lambda model_dir, texts, device, precision, name=name: built.append(
            (name, precision)))
    seconds = {"bertlab predict": [0.5, 0.25, 1.0], "transformers pipeline": [2.0, 1.0, 4.0]}
    monkeypatch.setattr(inference, "interleave", lambda measurements, repeats: {
        name: Timing(seconds[name][:repeats]) for name in measurements})
    results = inference.compare("model", "a tiny BERT", ["a", "b", "c", "d"], CPU, ["fp32", "bf16"], repeats=3)
    assert built == [("bertlab_measurement", "fp32"), ("transformers_measurement", "fp32"),
                     ("bertlab_measurement", "bf16"), ("transformers_measurement", "bf16")]
    systems = ("bertlab predict", "transformers pipeline")
    assert [(r.precision, r.system) for r in results] == [(p, system) for p in ("fp32", "bf16") for system in systems]
    assert all(r.section == "inference" and r.baseline == "transformers pipeline" for r in results)
    assert [r.throughput for r in results] == [8.0, 2.0, 8.0, 2.0]  # 4 sentences over the median seconds
    assert "4 sentences, a tiny BERT" in results[0].setting
