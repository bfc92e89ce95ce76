"""Shared fixtures: the real data folder (skipped when absent) and a tiny synthetic text corpus."""

from __future__ import annotations

import os
import random
import string
from pathlib import Path

import pytest

# Each synthetic document writes its words with its own four letters, so any token (or "##" piece)
# tells which document it came from.
CORPUS_ALPHABETS = tuple(string.ascii_lowercase[start : start + 4] for start in range(0, 24, 4))


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    """The folder laid out like shared/data: $BERTLAB_DATA_DIR, else ../shared/data beside the checkout."""
    path = Path(os.environ.get("BERTLAB_DATA_DIR") or Path(__file__).resolve().parents[2] / "shared" / "data")
    if not path.is_dir():
        pytest.skip(f"real data folder {path} is absent; set BERTLAB_DATA_DIR to a folder laid out like shared/data")
    return path


def write_synthetic_corpus(path: Path, *, seed: int, paragraphs_per_document: int) -> None:
    """WikiText-like text: per alphabet in CORPUS_ALPHABETS, a " = Title = " line, then paragraphs
    (one per line, sentences ending in " ."), sections under " = = Sub = = " and blank lines."""
    rng = random.Random(seed)
    lines = []
    for alphabet in CORPUS_ALPHABETS:
        words = ["".join(rng.choices(alphabet, k=rng.randint(2, 6))) for _ in range(30)]

        def sentence() -> str:
            return " ".join(rng.choices(words, k=rng.randint(3, 12))) + " ."

        lines += ["", f" = {' '.join(rng.choices(words, k=3))} = ", ""]
        for index in range(paragraphs_per_document):
            if index % 4 == 3:
                lines += ["", f" = = {words[index % len(words)]} = = ", ""]
            lines.append(" " + " ".join(sentence() for _ in range(rng.randint(2, 6))))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture(scope="session")
def corpus_alphabets() -> tuple[str, ...]:
    """The letters of each document of `tiny_corpus`, in order."""
    return CORPUS_ALPHABETS


@pytest.fixture
def tiny_corpus(tmp_path: Path) -> Path:
    """A folder with train.txt and validation.txt, six documents each (see CORPUS_ALPHABETS)."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    write_synthetic_corpus(folder / "train.txt", seed=0, paragraphs_per_document=40)
    write_synthetic_corpus(folder / "validation.txt", seed=1, paragraphs_per_document=4)
    return folder
