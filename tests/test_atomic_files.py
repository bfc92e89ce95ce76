"""Caches a kill or a disk left half-written are detected and built again, never read
(bertlab.atomic_files) — seeded fault injection, so every run of these tests injects the same
faults: a real SIGKILL of a child process at the Nth call of a write step (a row or batch written, a
rename, a commit record, a file of a vocabulary), an exception at the Nth write in this process, and
cache files truncated, corrupted or stripped of their record on disk. After each fault the next build
must equal a build from a clean cache, bit for bit: its rows, its tokenizer and every cache file."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from bertlab import atomic_files
from bertlab.data.pretraining import PretrainingDataModule
from bertlab.data.transfer_set import TransferSettings, transfer_examples
from bertlab.model import BertForSequenceClassification
from bertlab.teacher import embeddings as embedding_teacher
from bertlab.teacher import outputs as teacher
from bertlab.tokenizer import save_tokenizer, train_tokenizer
from tests.factories import small_config

SEED = 63
REPO_ROOT = Path(__file__).resolve().parents[1]
# The write steps a kill can land in: (module, attribute) of the function called once per step.
WRITE_STEPS = [("datasets.arrow_writer", "ArrowWriter.write"), ("datasets.arrow_writer", "ArrowWriter.write_batch"),
               ("datasets.arrow_writer", "ArrowWriter.write_table"), ("os", "replace"), ("os", "rename"),
               ("bertlab.atomic_files", "commit"), ("pathlib", "Path.write_text")]


def data_options(cache: Path) -> dict:
    # One text file: its lines, documents, a held-out validation split, a trained vocabulary, token ids and
    # packed sequences are all cache entries; two processes map the token ids in shards.
    return {"vocab_size": 300, "max_seq_length": 32, "batch_size": 8, "cache_dir": str(cache), "num_proc": 2}


def build(source: Path, cache: Path) -> str:
    """Builds the pretraining data into `cache`; returns a digest of everything a run reads from it."""
    module = PretrainingDataModule(str(source), **data_options(cache))
    module.setup("fit")
    digest = hashlib.sha256(module.tokenizer.to_str().encode())
    for split in ("train", "validation"):
        for row in module.datasets[split]:
            digest.update(json.dumps(row, sort_keys=True, default=lambda value: value.tolist()).encode())
    return digest.hexdigest()


def cache_files(cache: Path) -> dict[str, str]:
    """sha256 of every committed entry's files and records (temporary files of killed writes left out)."""
    listed = {}
    for record in cache.glob(f"*{atomic_files.RECORD_SUFFIX}"):
        listed[record.name] = hashlib.sha256(record.read_bytes()).hexdigest()
        for name in json.loads(record.read_text())["files"]:
            listed[name] = hashlib.sha256((cache / name).read_bytes()).hexdigest()
    return listed


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.conftest import write_synthetic_corpus

    path = tmp_path_factory.mktemp("corpus") / "train.txt"
    write_synthetic_corpus(path, seed=0, paragraphs_per_document=20)
    return path


@pytest.fixture(scope="module")
def clean(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict[str, str]]:
    cache = tmp_path_factory.mktemp("clean")
    digest = build(corpus, cache)
    assert build(corpus, cache) == digest  # and read back from the cache as it was built
    return cache, digest, cache_files(cache)


def test_every_pretraining_cache_is_a_committed_entry(clean):
    cache, _, files = clean
    kinds = {name.split("-")[0] for name in files if not name.endswith(atomic_files.RECORD_SUFFIX)}
    assert kinds == {"lines", "documents", "holdout", "tokenizer", "tokens", "sequences"}
    assert any("_of_00002" in name for name in files)  # the shards of a map in two processes


def damage(cache: Path, rng: random.Random) -> str:
    """Truncates, corrupts or removes the record of one cache file chosen by `rng`; says what it did."""
    records = sorted(cache.glob(f"*{atomic_files.RECORD_SUFFIX}"))
    record = rng.choice(records)
    name = rng.choice(sorted(json.loads(record.read_text())["files"]))
    path = cache / name
    data = path.read_bytes()
    how = rng.choice(["truncate", "flip", "no record", "truncate record"])
    offset = rng.randrange(len(data))
    if how == "truncate":
        path.write_bytes(data[:offset])
    elif how == "flip":
        path.write_bytes(data[:offset] + bytes([data[offset] ^ 0x20]) + data[offset + 1:])
    elif how == "no record":
        record.unlink()
    else:
        text = record.read_bytes()
        record.write_bytes(text[:rng.randrange(len(text))])
    return f"{how} {name} at {offset}"


def test_cache_files_truncated_or_corrupted_on_disk_are_rebuilt_bit_identical(clean, corpus, tmp_path, caplog):
    reference_cache, reference, reference_files = clean
    rng = random.Random(SEED)
    for trial in range(8):
        cache = tmp_path / f"trial{trial}"
        shutil.copytree(reference_cache, cache)
        what = damage(cache, rng)
        caplog.clear()
        assert build(corpus, cache) == reference, what
        assert cache_files(cache) == reference_files, what
        assert "building it again" in caplog.text, what


class Killed(BaseException):
    """What the injected fault raises: like a signal, past every `except Exception`."""


def call_counts(corpus: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> dict[tuple[str, str], int]:
    """How often a clean build calls each write step."""
    counts = dict.fromkeys(WRITE_STEPS, 0)
    for step in WRITE_STEPS:
        owner, original = resolve(step)

        def counting(*args, _step=step, _original=original, **kwargs):
            counts[_step] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(owner, original.__name__, counting)
    build(corpus, cache)
    monkeypatch.undo()
    return counts


def resolve(step: tuple[str, str]):
    module = __import__(step[0], fromlist=["_"])
    owner, _, name = step[1].rpartition(".")
    holder = getattr(module, owner) if owner else module
    return holder, getattr(holder, name)


def kill_points(counts: dict[tuple[str, str], int], how_many: int) -> list[tuple[tuple[str, str], int]]:
    """`how_many` (step, N) pairs drawn with SEED: the write steps a clean build takes in turn, in a seeded
    order, each at a call N drawn among the calls the clean build makes of it."""
    rng = random.Random(SEED)
    steps = sorted((step for step, count in counts.items() if count), key=lambda step: rng.random())
    return [(step, rng.randint(1, counts[step])) for step in (steps * how_many)[:how_many]]


def test_an_exception_at_a_seeded_write_leaves_a_cache_the_next_build_rebuilds_bit_identical(
        clean, corpus, tmp_path, monkeypatch):
    _, reference, reference_files = clean
    points = kill_points(call_counts(corpus, tmp_path / "counting", monkeypatch), 6)
    for index, (step, n) in enumerate(points):
        cache = tmp_path / f"fault{index}"
        owner, original = resolve(step)
        calls = [0]

        def faulty(*args, _original=original, **kwargs):
            calls[0] += 1
            if calls[0] == n:
                raise Killed
            return _original(*args, **kwargs)

        monkeypatch.setattr(owner, original.__name__, faulty)
        with pytest.raises(Killed):
            build(corpus, cache)
        monkeypatch.undo()
        assert build(corpus, cache) == reference, (step, n)
        assert cache_files(cache) == reference_files, (step, n)


CHILD = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from tests.test_atomic_files import build, resolve
    step, n = ({module!r}, {attribute!r}), {n}
    owner, original = resolve(step)
    calls = [0]
    def faulty(*args, **kwargs):
        calls[0] += 1
        if calls[0] == n:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)
    setattr(owner, original.__name__, faulty)
    build(Path({corpus!r}), Path({cache!r}))
""")


@pytest.mark.slow
def test_a_sigkill_at_a_seeded_write_leaves_a_cache_the_next_build_rebuilds_bit_identical(
        clean, corpus, tmp_path, monkeypatch):
    _, reference, reference_files = clean
    points = kill_points(call_counts(corpus, tmp_path / "counting", monkeypatch), 8)
    for index, (step, n) in enumerate(points):
        cache = tmp_path / f"killed{index}"
        code = CHILD.format(root=str(REPO_ROOT), module=step[0], attribute=step[1], n=n, corpus=str(corpus),
                            cache=str(cache))
        child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                               env={**os.environ, "OMP_NUM_THREADS": "1", "HF_DATASETS_OFFLINE": "1"})
        assert child.returncode == -signal.SIGKILL, (step, n, child.stderr[-2000:])
        assert build(corpus, cache) == reference, (step, n)
        assert cache_files(cache) == reference_files, (step, n)


# The caches of a distillation: teacher outputs, sentence embeddings, the transfer set.

@pytest.fixture(scope="module")
def classifier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    texts = [f"sentence number {i} is {'good' if i % 2 else 'bad'}" for i in range(40)]
    tokenizer = train_tokenizer(texts, vocab_size=60)
    torch.manual_seed(0)
    config = small_config(vocab_size=tokenizer.get_vocab_size(), num_attention_heads=2, num_labels=2)
    folder = tmp_path_factory.mktemp("teacher")
    BertForSequenceClassification(config).save_pretrained(folder)
    save_tokenizer(tokenizer, folder)
    return folder


TEXTS = [f"sentence number {i} is {'good' if i % 3 else 'bad'}" for i in range(24)]


def labelled(folder: Path, cache: Path):
    return teacher.teacher_outputs(str(folder), (TEXTS[:16], None), (TEXTS[16:], None), layers=[1, 2],
                                   max_seq_length=16, batch_size=8, device=torch.device("cpu"), dtype=None,
                                   cache_dir=cache)


def embedded(folder: Path, cache: Path):
    return embedding_teacher.teacher_embeddings(str(folder), TEXTS, max_seq_length=16, batch_size=8,
                                                device=torch.device("cpu"), dtype=None, cache_dir=cache)


def transfer(folder: Path, cache: Path):
    examples = [(text,) for text in TEXTS]
    return transfer_examples(examples, TransferSettings(copies=2, joined=3, seed=1), ["sentence"], cache)


def distillation_caches(folder: Path, cache: Path) -> dict[str, object]:
    outputs, embeddings = labelled(folder, cache), embedded(folder, cache)
    return {"teacher": (outputs.train_logits, outputs.train_hidden, outputs.validation_logits, outputs.from_cache),
            "embeddings": (embeddings.embeddings, embeddings.from_cache), "transfer": transfer(folder, cache)}


def contents(caches: dict[str, object]) -> list:
    """What a run reads from the caches, without whether it came from them."""
    return [caches["teacher"][:3], caches["embeddings"][0], caches["transfer"]]


def stored(cache: Path) -> dict[str, object]:
    """Each committed distillation cache file: a safetensors file as its tensors (its metadata records the
    labelling's time, which differs between two builds), any other as its sha256."""
    return {name: load_file(cache / name) if name.endswith(".safetensors") else digest
            for name, digest in cache_files(cache).items() if not name.endswith(atomic_files.RECORD_SUFFIX)}


def same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[key], b[key]) for key in a)
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def test_distillation_caches_left_half_written_or_damaged_are_rebuilt_bit_identical(classifier, tmp_path,
                                                                                   monkeypatch):
    reference_cache = tmp_path / "clean"
    first = distillation_caches(classifier, reference_cache)
    assert not first["teacher"][3] and not first["embeddings"][1]
    again = distillation_caches(classifier, reference_cache)
    assert again["teacher"][3] and again["embeddings"][1]  # read from the cache the next time
    reference_files = stored(reference_cache)
    assert {name.split("-")[0] for name in reference_files} == {"teacher", "embeddings", "transfer"}
    rng = random.Random(SEED)
    for trial in range(6):  # damaged on disk
        cache = tmp_path / f"damaged{trial}"
        shutil.copytree(reference_cache, cache)
        what = damage(cache, rng)
        rebuilt = distillation_caches(classifier, cache)
        assert same(contents(rebuilt), contents(again)), what
        assert same(stored(cache), reference_files), what
    for n in (1, 2, 3):  # stopped between a file's rename and its commit record: the Nth entry
        cache = tmp_path / f"uncommitted{n}"
        calls = [0]
        original = atomic_files.commit

        def faulty(*args, **kwargs):
            calls[0] += 1
            if calls[0] == n:
                raise Killed
            return original(*args, **kwargs)

        monkeypatch.setattr(atomic_files, "commit", faulty)
        with pytest.raises(Killed):
            distillation_caches(classifier, cache)
        monkeypatch.undo()
        rebuilt = distillation_caches(classifier, cache)
        assert same(contents(rebuilt), contents(again)), n
        assert same(stored(cache), reference_files), n
