"""Inference throughput: bertlab's `predict` vs a transformers text-classification pipeline, on the
same sentences with the same classifier-shaped checkpoint and the same batch size."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import torch
import transformers

from bertlab.bench.clock import Measurement, autocast, interleave, synchronize
from bertlab.bench.report import Result
from bertlab.bench.training import PRECISIONS
from bertlab.data.sources import load_dataset_source
from bertlab.inference import predict
from bertlab.model import BertForSequenceClassification
from bertlab.tokenizer import load_tokenizer

BATCH_SIZE = 64
WARMUP_TEXTS = 256


def _measurement(classify: Callable[[list[str]], object], texts: list[str], device: torch.device,
                 precision: str) -> Measurement:
    """Times classifying all `texts`, after a warm-up on the first WARMUP_TEXTS of them."""

    def run(batch: list[str]) -> float:
        synchronize(device)
        start = time.perf_counter()
        with autocast(device, PRECISIONS[precision][1]):
            classify(batch)
        synchronize(device)
        return time.perf_counter() - start

    run(texts[:WARMUP_TEXTS])
    return lambda: run(texts)


def bertlab_measurement(model_dir: str, texts: list[str], device: torch.device, precision: str,
                        seed: int = 0) -> Measurement:
    torch.manual_seed(seed)
    model = BertForSequenceClassification.from_pretrained(model_dir, num_labels=2).to(device)
    tokenizer = load_tokenizer(model_dir)
    return _measurement(lambda batch: predict(model, tokenizer, batch, batch_size=BATCH_SIZE), texts, device,
                        precision)


def transformers_measurement(model_dir: str, texts: list[str], device: torch.device, precision: str,
                             seed: int = 0) -> Measurement:
    torch.manual_seed(seed)
    model = transformers.BertForSequenceClassification.from_pretrained(model_dir, num_labels=2)
    tokenizer = transformers.BertTokenizerFast.from_pretrained(model_dir)
    classify = transformers.pipeline("text-classification", model=model, tokenizer=tokenizer, device=device,
                                     batch_size=BATCH_SIZE)
    return _measurement(lambda batch: classify(batch, truncation=True, max_length=128), texts, device, precision)


def validation_sentences(sst2_dir: Path, limit: int | None) -> list[str]:
    sentences = load_dataset_source(str(sst2_dir), what="SST-2")["validation"]["sentence"]
    return list(sentences[:limit])


def compare(model_dir: str, model_name: str, texts: list[str], device: torch.device, precisions: list[str],
            repeats: int) -> list[Result]:
    pipeline_name = "transformers pipeline"
    setting = f"SST-2 validation, {len(texts)} sentences, {model_name} with a 2-class head, batch {BATCH_SIZE}"
    results = []
    for precision in precisions:
        measurements = {"bertlab predict": bertlab_measurement(model_dir, texts, device, precision),
                        pipeline_name: transformers_measurement(model_dir, texts, device, precision)}
        results += [Result("inference", "sst2", setting, precision, name, "sentences/s", len(texts), timing,
                           baseline=pipeline_name)
                    for name, timing in interleave(measurements, repeats).items()]
    return results
