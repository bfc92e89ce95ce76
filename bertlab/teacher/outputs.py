"""A classifier teacher's outputs on a distillation's training and validation texts: class logits and the
[CLS] state after some of its layers, computed once (bertlab.teacher.inference) and cached
(bertlab.teacher.cache); and teacher.json, the run's record of the teacher."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bertlab.atomic_files import write_atomically
from bertlab.data.sources import cache_folder
from bertlab.model import BertForSequenceClassification
from bertlab.teacher.cache import (cache_key, cached_file, read_cache, reuse_outputs, settings_digest, text_hashes,
                                   write_cache)
from bertlab.teacher.inference import labelling_record, run_teacher
from bertlab.tokenizer import load_tokenizer

log = logging.getLogger("bertlab")
REPORT = "teacher.json"
Texts = tuple[list[str], list[str] | None]  # texts and their pairs (None for single sentences)


@dataclass
class TeacherOutputs:
    """Per training row (the batches' `index`): `train_logits` [N, num_labels] in float32 and, when
    layers were asked for, `train_hidden` [N, layers, teacher hidden size], the [CLS] state after each
    layer, in fp16 (bf16 under bf16 autocast); `validation_logits` per validation row; `labelling`,
    how the run that computed them went (sentences, seconds, sentences_per_sec, device, dtype)."""
    train_logits: torch.Tensor
    train_hidden: torch.Tensor | None
    validation_logits: torch.Tensor
    labelling: dict[str, Any]
    cache_file: Path
    from_cache: bool


def teacher_outputs(teacher: str, train: Texts, validation: Texts, *, layers: Sequence[int], max_seq_length: int,
                    batch_size: int, device: torch.device, dtype: torch.dtype | None,
                    cache_dir: str | Path | None) -> TeacherOutputs:
    """The teacher's outputs on the `train` and `validation` texts (see TeacherOutputs): from the cache,
    or computed in one pass and cached. `layers`: the teacher layers (1 = the first) whose [CLS] state
    is kept, in this order; `dtype`: the autocast dtype (None: float32); `cache_dir`: by default the
    `datasets` cache folder + /bertlab, as the pretraining data's."""
    tokenizer = load_tokenizer(teacher)
    texts = train[0] + validation[0]
    pairs = None if train[1] is None else train[1] + validation[1]
    key = cache_key(Path(teacher), tokenizer.to_str(), texts, pairs, len(train[0]), max_seq_length, device, dtype)
    folder = cache_folder(cache_dir)
    cached = cached_file(folder, key, layers)
    if cached:
        cache_file, positions = cached
        tensors, labelling = read_cache(cache_file)
        if layers:
            tensors["train_hidden"] = tensors["train_hidden"][:, positions]  # a copy, in the order asked
        else:
            tensors.pop("train_hidden", None)
        from_cache = True
        log.info("Teacher outputs of %s loaded from %s", teacher, cache_file)
    else:
        with torch.random.fork_rng(devices=[]):  # building the model draws initial weights: not the run's draws
            model = BertForSequenceClassification.from_pretrained(teacher)
        family = settings_digest(Path(teacher), tokenizer.to_str(), pairs is not None, max_seq_length, device,
                                 dtype).hexdigest()
        hashes = text_hashes(texts, pairs)
        logits = torch.empty(len(texts), model.config.num_labels)
        hidden_dtype = torch.bfloat16 if dtype == torch.bfloat16 else torch.float16  # halves the memory it takes
        hidden = torch.empty(len(texts), len(layers), model.config.hidden_size, dtype=hidden_dtype) if layers else None
        found = reuse_outputs(folder, family, hashes, len(train[0]), layers, logits, hidden)
        missing = (~found).nonzero().flatten()
        started = time.perf_counter()
        if len(missing):
            unread_pairs = None if pairs is None else [pairs[row] for row in missing]
            run_teacher(model, tokenizer, [texts[row] for row in missing], unread_pairs, layers, logits, hidden,
                        missing, max_seq_length=max_seq_length, batch_size=batch_size, device=device, dtype=dtype)
        seconds = time.perf_counter() - started
        labelling = {**labelling_record(len(missing), seconds, device, dtype), "reused": int(found.sum())}
        tensors = {"train_logits": logits[:len(train[0])], "validation_logits": logits[len(train[0]):],
                   "text_hashes": hashes}
        if hidden is not None:
            tensors["train_hidden"] = hidden[:len(train[0])].contiguous()
        cache_file = folder / f"teacher-{key[:24]}-layers{'-'.join(map(str, layers))}.safetensors"
        write_cache(cache_file, tensors, labelling, family)
        from_cache = False
        log.info("Teacher %s labelled %d sentences in %.1f s on %s and took %d from earlier runs' caches; "
                 "cached in %s", teacher, len(missing), seconds, device, labelling["reused"], cache_file)
    return TeacherOutputs(tensors["train_logits"], tensors.get("train_hidden"), tensors["validation_logits"],
                          labelling, cache_file, from_cache)


def write_report(run_dir: Path, teacher: str, outputs: TeacherOutputs, validation: dict[str, float]) -> None:
    """teacher.json in the run folder: the teacher, its validation metrics and its labelling speed."""
    report = {"teacher": teacher, "validation": validation, "labelling": outputs.labelling,
              "cache_file": str(outputs.cache_file), "from_cache": outputs.from_cache}
    text = json.dumps(report, indent=2) + "\n"
    write_atomically(run_dir / REPORT, lambda temp: Path(temp).write_text(text))
