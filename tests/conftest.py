"""Shared fixtures: the real data folder (skipped when absent), a tiny synthetic text corpus and SST-2, and a
tiny classifier of that SST-2 (the interpret tests and their commands read it)."""

from __future__ import annotations

import os
import random
import string
from pathlib import Path

import pytest

# Each synthetic document writes its words with its own four letters, so any token (or "##" piece)
# tells which document it came from.
CORPUS_ALPHABETS = tuple(string.ascii_lowercase[start : start + 4] for start in range(0, 24, 4))


@pytest.fixture(scope="session", autouse=True)
def bertlab_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bertlab's own cache folder (`trainer.precision: fastest`'s decisions) in a temporary folder, for the
    tests and the commands they start: no test writes to the user's ~/.cache/bertlab."""
    folder = tmp_path_factory.mktemp("bertlab_cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BERTLAB_CACHE_DIR", str(folder))
        yield folder


@pytest.fixture(scope="module")
def config_module():
    """Hydra initialised on bertlab's config module (its structured schemas registered), for `compose`; imported
    here, as most tests need no Hydra."""
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from bertlab.training.launch.config_tree import register_configs

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_module("bertlab.conf", version_base="1.3"):
        yield


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


def write_sentence_corpus(path: Path, lines: int = 60) -> Path:
    """`lines` paragraphs of three sentences: 'Line i opens here with words.' (6 words), a 2-word one, and a
    7-word question; for sentence-embedding distillation (bertlab.data.sentences)."""
    path.write_text("".join(f"Line {i} opens here with words. Too short! Does line {i} end with a question?\n"
                            for i in range(lines)), encoding="utf-8")
    return path


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


def write_sentiment_split(path: Path, *, rows: int, seed: int) -> None:
    """SST-2-shaped parquet (idx, sentence, label): label 1 sentences carry a positive word."""
    import pandas as pd

    rng = random.Random(seed)
    filler = ["the", "movie", "plot", "actors", "was", "quite", "story", "film", "really", "and"]
    positive, negative = ["good", "great", "wonderful", "moving"], ["bad", "dull", "awful", "boring"]
    records = []
    for index in range(rows):
        label = index % 2
        words = rng.choices(filler, k=rng.randint(3, 12)) + [rng.choice(positive if label else negative)]
        rng.shuffle(words)
        records.append({"idx": index, "sentence": " ".join(words), "label": label})
    pd.DataFrame(records).to_parquet(path)


@pytest.fixture(scope="session")
def tiny_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder laid out like shared/data (corpus/, sst2/) with tiny synthetic data."""
    root = tmp_path_factory.mktemp("data")
    (root / "corpus").mkdir()
    write_synthetic_corpus(root / "corpus" / "train.txt", seed=0, paragraphs_per_document=40)
    write_synthetic_corpus(root / "corpus" / "validation.txt", seed=1, paragraphs_per_document=4)
    (root / "sst2").mkdir()
    write_sentiment_split(root / "sst2" / "train.parquet", rows=256, seed=0)
    write_sentiment_split(root / "sst2" / "validation.parquet", rows=64, seed=1)
    return root


@pytest.fixture(scope="module")
def classifier_dir(tiny_data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny classifier (random weights, 2 layers × 4 heads) saved with a tokenizer of the synthetic SST-2."""
    import pandas as pd
    import torch

    from bertlab.model import BertForSequenceClassification
    from bertlab.tokenizer import save_tokenizer, train_tokenizer
    from tests.factories import small_config

    sentences = pd.read_parquet(tiny_data_dir / "sst2" / "train.parquet")["sentence"].tolist()
    tokenizer = train_tokenizer(sentences, vocab_size=60)
    torch.manual_seed(0)
    config = small_config(vocab_size=tokenizer.get_vocab_size(), id2label={0: "negative", 1: "positive"})
    directory = tmp_path_factory.mktemp("classifier") / "hf_model"
    BertForSequenceClassification(config).save_pretrained(directory)
    save_tokenizer(tokenizer, directory)
    return directory
