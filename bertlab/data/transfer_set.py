"""A distillation's transfer set (`data.transfer`): the texts beyond the labelled training data that
the teacher alone labels — unlabelled in-domain text and augmented copies of the training examples
(bertlab.data.augment). Building it can take minutes (a masked LM predicts the replacements), so the
texts are cached as a parquet file named by a hash of everything they depend on; the runs of a seed
sweep then share them, and so the teacher's cached outputs on them too.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Annotated

import pandas as pd

from bertlab import atomic_files
from bertlab.argument_checks import NON_NEGATIVE, Count, Probability, Seed, checks_arguments
from bertlab.data.augment import Example, augment, joined, read_unlabelled
from bertlab.data.sources import cache_folder, content_hash
from bertlab.errors import ConfigError

log = logging.getLogger("bertlab")
CACHE_FORMAT = 1  # part of the cache key: raise it when the augmentation changes what it makes


@checks_arguments
@dataclass(frozen=True)
class TransferSettings:
    """`copies` augmented copies of each training example (0: none), made with `seed` and, for word
    replacement, the BertForMaskedLM folder `masked_lm`; `unlabelled`, a file or dataset of in-domain
    text with the task's text columns; the augmentation's probabilities (see augment.Probabilities);
    `joined`, how many texts join two training texts (augment.joined)."""
    copies: Annotated[int, NON_NEGATIVE] = 0
    joined: Annotated[int, NON_NEGATIVE] = 0
    seed: Seed = 0
    masked_lm: str | None = None
    unlabelled: str | None = None
    p_mask: Probability = 0.1
    p_replace: Probability = 0.2
    p_ngram: Probability = 0.25
    max_ngram: Count = 5

    @classmethod
    def from_config(cls, settings: Mapping) -> TransferSettings:
        known = {field.name for field in fields(cls)}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise ConfigError(f"data.transfer.{unknown[0]}: not a transfer set setting; expected one of "
                              f"{', '.join(sorted(known))}")
        return cls(**settings)

    @property
    def empty(self) -> bool:
        return self.copies == 0 and self.joined == 0 and not self.unlabelled


def transfer_examples(examples: Sequence[Example], settings: TransferSettings, text_columns: Sequence[str],
                      cache_dir: str | os.PathLike | None = None) -> list[Example]:
    """The transfer set of the training `examples` (tuples of their `text_columns`' texts): the
    unlabelled examples, then the augmented copies; from the cache when it has them."""
    if settings.empty:
        return []
    for key in ("masked_lm", "unlabelled"):
        path = getattr(settings, key)
        if path and not Path(path).exists():
            raise ConfigError(f"data.transfer.{key}={path}: no such file or folder")
    folder = cache_folder(cache_dir)
    cache_file = folder / f"transfer-{cache_key(examples, settings, text_columns)[:24]}.parquet"
    if atomic_files.is_committed(cache_file):
        log.info("Transfer set loaded from %s", cache_file)
        return list(pd.read_parquet(cache_file).itertuples(index=False, name=None))
    unlabelled = read_unlabelled(settings.unlabelled, list(text_columns)) if settings.unlabelled else []
    augmented = augment(examples, settings.copies, settings.seed, settings.masked_lm, p_mask=settings.p_mask,
                        p_replace=settings.p_replace, p_ngram=settings.p_ngram, max_ngram=settings.max_ngram)
    augmented += joined(examples, settings.joined, settings.seed)
    folder.mkdir(parents=True, exist_ok=True)
    partial = cache_file.with_name(f".{cache_file.name}.{os.getpid()}")
    pd.DataFrame(unlabelled + augmented, columns=list(text_columns)).to_parquet(partial)
    partial.replace(cache_file)
    atomic_files.commit(cache_file)
    log.info("Transfer set: %d unlabelled and %d augmented examples, cached in %s", len(unlabelled), len(augmented),
             cache_file)
    return unlabelled + augmented


def cache_key(examples: Sequence[Example], settings: TransferSettings, text_columns: Sequence[str]) -> str:
    named = asdict(settings)
    if not settings.joined:  # the key of a transfer set made before `joined` existed
        del named["joined"]
    digest = hashlib.sha256(json.dumps({"format": CACHE_FORMAT, "settings": named,
                                        "columns": list(text_columns)}, sort_keys=True).encode())
    for path in (settings.masked_lm, settings.unlabelled):
        if path:
            digest.update(content_hash(path).encode())
    for example in examples:
        digest.update("\t".join(example).encode("utf-8") + b"\0")
    return digest.hexdigest()

