"""The teacher of a distillation (bertlab.lit.distillation): its folder checked against the student's
task, and its outputs on every training and validation text, computed once and cached.

The teacher reads the texts with its own tokenizer, so it need not share the student's vocabulary:
what it hands over is per sentence (class logits, the [CLS] hidden state after some of its layers),
never per token. It runs in eval mode, without gradients, over batches sorted by length, under the
run's autocast dtype. Its outputs go to a safetensors file in the cache folder named by a hash of all
they depend on (the teacher's weights, config and tokenizer, the texts, the truncation, the device
type and dtype) and the layers kept, so that a rerun or a resumed run loads them instead of running
the teacher again; a run takes the file of any layers that include its own (the logits alone: any file).
A file also records a hash of each of its texts, so that another set of texts (a transfer set grown or
changed) takes the outputs of the texts any file of the same teacher settings holds, and the teacher
reads only the others.
The pass over the texts (`for_each_batch`), the cache key and the cache file serve the teacher of a
sentence-embedding distillation too (bertlab.lit.embedding_teacher).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from tokenizers import Tokenizer

from bertlab.config import CONFIG_NAME, BertConfig
from bertlab.data import cache_entries
from bertlab.data.batches import length_sorted_dataloader
from bertlab.data.encoding import tokenize_dataset
from bertlab.data.sources import cache_folder, content_hash
from bertlab.errors import CheckpointError, ConfigError
from bertlab.hf_format import WEIGHTS_NAME, write_atomically
from bertlab.model import BertForSequenceClassification
from bertlab.tokenizer import load_tokenizer, special_token_ids

log = logging.getLogger("bertlab")
CACHE_FORMAT = 2  # part of the cache key: raise it when the stored tensors change meaning
PROGRESS_EVERY_SECONDS = 10.0
REPORT = "teacher.json"
AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "16": torch.float16}  # by the prefix of Lightning's precision
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


def teacher_config(teacher: str | None) -> BertConfig:
    """The config of the classifier folder `teacher` (task.teacher), or a one-line error."""
    folder = teacher_folder(teacher, "a classifier folder (a fine-tune run's hf_model, or a Hugging Face "
                                     "BertForSequenceClassification folder)", "outputs/sst2/latest/hf_model")
    config = BertConfig.from_json_file(folder)
    try:
        with safe_open(folder / WEIGHTS_NAME, framework="pt") as weights:
            names = set(weights.keys())
    except (OSError, SafetensorError) as error:
        raise CheckpointError(f"task.teacher={teacher}: no readable {WEIGHTS_NAME} ({error})") from None
    # What a masked-LM or encoder-only checkpoint lacks: its classifier would be random.
    head = [name for name in ("pooler.dense.weight", "classifier.weight")
            if not any(key.endswith(name) for key in names)]
    if head:
        raise CheckpointError(f"task.teacher={teacher}: not a trained classifier, its {WEIGHTS_NAME} has no "
                              f"{head[-1]}; distil from a fine-tuned BertForSequenceClassification")
    return config


def teacher_folder(teacher: str | None, expected: str, example: str) -> Path:
    """The folder `teacher` (task.teacher) names, or a one-line error saying what was `expected`."""
    if not teacher:
        raise ConfigError(f"task.teacher is not set: name the teacher, {expected}")
    folder = Path(teacher)
    if not folder.is_dir():
        raise CheckpointError(f"task.teacher={teacher}: no such folder; expected {expected} with its "
                              f"{CONFIG_NAME}, {WEIGHTS_NAME} and tokenizer, such as {example}")
    return folder


def autocast_dtype(precision: str) -> torch.dtype | None:
    """The autocast dtype of a Lightning precision ("bf16-mixed": bfloat16); None: float32."""
    return next((dtype for prefix, dtype in AUTOCAST_DTYPES.items() if precision.startswith(prefix)), None)


def label_names(config: BertConfig) -> list[str]:
    return [(config.id2label or {}).get(i, f"LABEL_{i}") for i in range(config.num_labels)]


def check_labels(teacher: str, teacher_labels: BertConfig, student: BertConfig) -> None:
    """The teacher predicts the student's labels: as many, with the same names in the same order
    (regression: one value each)."""
    def described(config: BertConfig) -> str:
        return "1 value (regression)" if config.num_labels == 1 else \
            f"{config.num_labels} labels ({', '.join(label_names(config))})"

    names_differ = student.num_labels > 1 and label_names(teacher_labels) != label_names(student)
    if teacher_labels.num_labels != student.num_labels or names_differ:
        raise ConfigError(f"task.teacher={teacher}: the teacher predicts {described(teacher_labels)} but the task "
                          f"has {described(student)}; distil from a teacher fine-tuned on the same labels")


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


def cache_key(teacher: Path, tokenizer: str, texts: list[str], pairs: list[str] | None, train_rows: int,
              max_seq_length: int, device: torch.device, dtype: torch.dtype | None) -> str:
    """A hash of everything the teacher's outputs depend on but the layers kept, which name the file."""
    digest = settings_digest(teacher, tokenizer, pairs is not None, max_seq_length, device, dtype,
                             rows=[train_rows, len(texts)])
    for text in texts + (pairs or []):
        digest.update(text.encode("utf-8") + b"\0")
    return digest.hexdigest()


def settings_digest(teacher: Path, tokenizer: str, paired: bool, max_seq_length: int, device: torch.device,
                    dtype: torch.dtype | None, **more: Any) -> Any:
    """A sha256 of the teacher's weights and of the settings the outputs of each text depend on (and `more`),
    open for more to be added; its hex digest alone names the files whose texts another run may take."""
    digest = hashlib.sha256(content_hash(teacher / WEIGHTS_NAME).encode())
    settings = {"format": CACHE_FORMAT, "config": (teacher / CONFIG_NAME).read_text(encoding="utf-8"),
                "tokenizer": tokenizer, "paired": paired, "max_seq_length": max_seq_length, "device": device.type,
                "dtype": str(dtype), **more}
    digest.update(json.dumps(settings, sort_keys=True).encode())
    return digest


def text_hashes(texts: list[str], pairs: list[str] | None) -> torch.Tensor:
    """A 64-bit hash of each text with its pair (int64 [N]): how a cache file's rows are found again."""
    rows = texts if pairs is None else (f"{text}\0{pair}" for text, pair in zip(texts, pairs))
    return torch.tensor([int.from_bytes(hashlib.blake2b(row.encode("utf-8"), digest_size=8).digest(), "little",
                                        signed=True) for row in rows], dtype=torch.int64)


def kept_layers(path: Path) -> list[int]:
    """The teacher layers whose [CLS] states the cache file `path` kept, in its order."""
    return [int(layer) for layer in path.stem.rpartition("-layers")[2].split("-") if layer]


def cached_file(folder: Path, key: str, layers: Sequence[int]) -> tuple[Path, list[int]] | None:
    """A cache file of `key` that kept every one of `layers` (any file, for the logits alone), and where
    each of `layers` sits among the layers it kept."""
    for path in sorted(folder.glob(f"teacher-{key[:24]}-layers*.safetensors")):
        kept = kept_layers(path)
        if set(layers) <= set(kept) and cache_entries.is_committed(path):
            return path, [kept.index(layer) for layer in layers]
    return None


def reuse_outputs(folder: Path, family: str, hashes: torch.Tensor, train_rows: int, layers: Sequence[int],
                  logits: torch.Tensor, hidden: torch.Tensor | None) -> torch.Tensor:
    """Fills `logits` and `hidden` (the first `train_rows` rows are training texts, which need the [CLS]
    states of `layers`) from the cache files of the teacher settings `family`, wherever one holds the text
    of the same hash; returns the rows it filled (bool [N])."""
    found = torch.zeros(len(hashes), dtype=torch.bool)
    needs_hidden = torch.arange(len(hashes)) < train_rows if layers else torch.zeros(len(hashes), dtype=torch.bool)
    for path in sorted(folder.glob("teacher-*-layers*.safetensors"), key=lambda path: -path.stat().st_mtime):
        kept = kept_layers(path)
        if not set(layers) <= set(kept) or not cache_entries.is_committed(path):
            continue
        with safe_open(path, framework="pt") as stored:
            if (stored.metadata() or {}).get("settings") != family or "text_hashes" not in stored.keys():
                continue
            stored_hashes = stored.get_tensor("text_hashes")
            if not len(stored_hashes):
                continue
            order = stored_hashes.argsort()
            position = torch.searchsorted(stored_hashes[order], hashes).clamp(max=len(order) - 1)
            row = order[position]
            stored_train_rows = stored.get_slice("train_logits").get_shape()[0]
            usable = ~found & (stored_hashes[row] == hashes) & (~needs_hidden | (row < stored_train_rows))
            if not usable.any():
                continue
            stored_logits = torch.cat([stored.get_tensor("train_logits"), stored.get_tensor("validation_logits")])
            logits[usable] = stored_logits[row[usable]]
            if hidden is not None:
                rows = usable & needs_hidden
                positions = [kept.index(layer) for layer in layers]
                hidden[rows] = stored.get_tensor("train_hidden")[row[rows]][:, positions].to(hidden.dtype)
        found |= usable
        if found.all():
            break
    return found


def labelling_record(sentences: int, seconds: float, device: torch.device, dtype: torch.dtype | None) -> dict[str, Any]:
    """How a teacher's pass went, as teacher.json and the cache file record it."""
    return {"sentences": sentences, "seconds": round(seconds, 3),
            "sentences_per_sec": round(sentences / seconds, 1) if sentences else None,
            "device": str(device), "dtype": str(dtype or torch.float32).removeprefix("torch.")}


def write_cache(path: Path, tensors: dict[str, torch.Tensor], labelling: dict[str, Any],
                settings: str | None = None) -> None:
    """`settings`: the teacher settings' key (settings_digest), for later runs to find the file's texts by."""
    metadata = {"labelling": json.dumps(labelling), **({"settings": settings} if settings else {})}
    write_atomically(path, lambda temp: save_file(tensors, temp, metadata=metadata))
    cache_entries.commit(path)


def read_cache(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    with safe_open(path, framework="pt") as stored:
        return {name: stored.get_tensor(name) for name in stored.keys()}, json.loads(stored.metadata()["labelling"])


def run_teacher(model: BertForSequenceClassification, tokenizer: Tokenizer, texts: list[str], pairs: list[str] | None,
                layers: Sequence[int], logits: torch.Tensor, hidden: torch.Tensor | None, rows: torch.Tensor, *,
                max_seq_length: int, batch_size: int, device: torch.device, dtype: torch.dtype | None) -> None:
    """Writes the logits (float32) and the [CLS] states after `layers` (`hidden`: None without layers) of
    `texts[i]` into row `rows[i]` of `logits` and `hidden`, each text read once."""

    def keep(inputs: list[torch.Tensor], batch_rows: torch.Tensor) -> None:
        output = model(*inputs, output_hidden_states=bool(layers))
        logits[rows[batch_rows]] = output.logits.float().cpu()
        if hidden is not None:
            cls = torch.stack([output.hidden_states[layer][:, 0] for layer in layers], dim=1)
            hidden[rows[batch_rows]] = cls.to(hidden.dtype).cpu()

    for_each_batch(model, tokenizer, texts, pairs, keep, max_seq_length=max_seq_length, batch_size=batch_size,
                   device=device, dtype=dtype)


@torch.no_grad()
def for_each_batch(model: torch.nn.Module, tokenizer: Tokenizer, texts: list[str], pairs: list[str] | None,
                   step: Callable[[list[torch.Tensor], torch.Tensor], None], *, max_seq_length: int, batch_size: int,
                   device: torch.device, dtype: torch.dtype | None) -> None:
    """Calls `step(inputs, rows)` on every batch of the texts, tokenized by the teacher's `tokenizer` and sorted
    by length: `inputs` (input_ids, attention_mask, token_type_ids) on `device`, `rows` the texts' positions.
    The teacher `model` runs in eval mode, under autocast to `dtype` (None: float32); progress is logged."""
    columns = {"text": texts} if pairs is None else {"text": texts, "pair": pairs}
    tokenized = tokenize_dataset(datasets.Dataset.from_dict(columns), tokenizer, text_column="text",
                                 text_pair_column=None if pairs is None else "pair", name="the teacher's texts",
                                 max_seq_length=min(max_seq_length, model.config.max_position_embeddings))
    model.to(device).eval()
    started = reported = time.perf_counter()
    done = 0
    with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
        for batch in length_sorted_dataloader(tokenized, batch_size, pad_token_id=special_token_ids(tokenizer)["pad"]):
            step([batch[key].to(device) for key in ("input_ids", "attention_mask", "token_type_ids")], batch["index"])
            done += len(batch["index"])
            if time.perf_counter() - reported >= PROGRESS_EVERY_SECONDS:
                reported = time.perf_counter()
                rate = done / (reported - started)
                log.info("Teacher: %d/%d sentences, %.0f/s, %.0f s to go", done, len(texts), rate,
                         (len(texts) - done) / rate)


def write_report(run_dir: Path, teacher: str, outputs: TeacherOutputs, validation: dict[str, float]) -> None:
    """teacher.json in the run folder: the teacher, its validation metrics and its labelling speed."""
    report = {"teacher": teacher, "validation": validation, "labelling": outputs.labelling,
              "cache_file": str(outputs.cache_file), "from_cache": outputs.from_cache}
    text = json.dumps(report, indent=2) + "\n"
    write_atomically(run_dir / REPORT, lambda temp: Path(temp).write_text(text))
