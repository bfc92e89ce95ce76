"""The cache of a teacher's outputs: safetensors files in the cache folder named by a hash of all they
depend on (the teacher's weights, config and tokenizer, the texts, the truncation, the device type and
dtype) and the layers kept. A run takes the file of any layers that include its own (the logits alone:
any file). A file also records a hash of each of its texts, so that another set of texts (a transfer set
grown or changed) takes the outputs of the texts any file of the same teacher settings holds, and the
teacher reads only the others.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from bertlab import atomic_files
from bertlab.checkpoint.dispatch import CONFIG_NAME, WEIGHTS_NAME
from bertlab.data.sources import content_hash

CACHE_FORMAT = 2  # part of the cache key: raise it when the stored tensors change meaning


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
        if set(layers) <= set(kept) and atomic_files.is_committed(path):
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
        if not set(layers) <= set(kept) or not atomic_files.is_committed(path):
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


def write_cache(path: Path, tensors: dict[str, torch.Tensor], labelling: dict[str, Any],
                settings: str | None = None) -> None:
    """`settings`: the teacher settings' key (settings_digest), for later runs to find the file's texts by."""
    metadata = {"labelling": json.dumps(labelling), **({"settings": settings} if settings else {})}
    atomic_files.write_atomically(path, lambda temp: save_file(tensors, temp, metadata=metadata))
    atomic_files.commit(path)


def read_cache(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    with safe_open(path, framework="pt") as stored:
        return {name: stored.get_tensor(name) for name in stored.keys()}, json.loads(stored.metadata()["labelling"])
