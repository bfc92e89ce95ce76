"""The cache of a teacher's outputs (bertlab.teacher.cache): a key that changes with everything the outputs
depend on and with nothing else, files found again by the layers they kept, entries read back as written and
never while half-written, and the outputs of single texts taken from any file of the same teacher settings."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from bertlab import atomic_files
from bertlab.checkpoint.dispatch import CONFIG_NAME, WEIGHTS_NAME
from bertlab.teacher import cache
from bertlab.teacher.cache import (cache_key, cached_file, kept_layers, read_cache, reuse_outputs, settings_digest,
                                   text_hashes, write_cache)

TOKENIZER = '{"model": "a tokenizer\'s json"}'
TEXTS = ["a good movie", "the plot was dull", "great"]
CPU = torch.device("cpu")


@pytest.fixture
def teacher(tmp_path) -> Path:
    """A teacher folder as the cache key reads it: the weights' bytes and the config's text."""
    folder = tmp_path / "teacher"
    folder.mkdir()
    (folder / WEIGHTS_NAME).write_bytes(b"the teacher's weights")
    (folder / CONFIG_NAME).write_text('{"hidden_size": 32, "num_labels": 2}', encoding="utf-8")
    return folder


def key(teacher: Path, **changes) -> str:
    settings = dict(tokenizer=TOKENIZER, texts=list(TEXTS), pairs=None, train_rows=2, max_seq_length=32, device=CPU,
                    dtype=None)
    return cache_key(teacher, **{**settings, **changes})


def family(teacher: Path, **changes) -> str:
    settings = dict(tokenizer=TOKENIZER, paired=False, max_seq_length=32, device=CPU, dtype=None)
    return settings_digest(teacher, **{**settings, **changes}).hexdigest()


@pytest.mark.parametrize("change", [
    dict(tokenizer='{"model": "another tokenizer"}'),
    dict(texts=["a good movie", "the plot was dull", "great!"]),
    dict(texts=TEXTS[::-1]),
    dict(texts=["a good movie the plot", "was dull", "great"]),  # the same characters, cut elsewhere
    dict(texts=TEXTS + ["one more"]),
    dict(pairs=["yes", "no", "maybe"]),
    dict(train_rows=1),
    dict(max_seq_length=64),
    dict(device=torch.device("cuda")),
    dict(dtype=torch.bfloat16),
    dict(dtype=torch.float16),
], ids=["tokenizer", "a text", "order", "text boundaries", "more texts", "pairs", "train rows", "max_seq_length",
        "device type", "bf16", "fp16"])
def test_the_cache_key_changes_with_each_setting_the_outputs_depend_on(teacher, change):
    assert key(teacher, **change) != key(teacher)


def test_the_cache_key_changes_with_the_teachers_weights_its_config_and_the_cache_format(teacher, monkeypatch):
    before = key(teacher)
    (teacher / WEIGHTS_NAME).write_bytes(b"the teacher's weights, trained further")
    retrained = key(teacher)
    (teacher / CONFIG_NAME).write_text('{"hidden_size": 32, "num_labels": 3}', encoding="utf-8")
    reconfigured = key(teacher)
    monkeypatch.setattr(cache, "CACHE_FORMAT", cache.CACHE_FORMAT + 1)
    new_format = key(teacher)
    assert len({before, retrained, reconfigured, new_format}) == 4


def test_the_cache_key_is_the_same_for_a_moved_teacher_and_another_device_of_the_same_type(teacher, tmp_path):
    moved = tmp_path / "elsewhere" / "hf_model"
    shutil.copytree(teacher, moved)
    (moved / "README.md").write_text("files the key does not read")
    assert key(moved, texts=list(TEXTS)) == key(teacher)
    assert key(teacher, device=torch.device("cuda", 0)) == key(teacher, device=torch.device("cuda", 1))


def test_the_teacher_settings_digest_changes_with_the_weights_each_setting_and_what_is_added_to_it(teacher):
    base = family(teacher)
    assert family(teacher) == base
    others = [family(teacher, tokenizer="another"), family(teacher, paired=True), family(teacher, max_seq_length=64),
              family(teacher, device=torch.device("cuda")), family(teacher, dtype=torch.bfloat16),
              family(teacher, rows=[2, 3]), family(teacher, rows=[1, 3])]
    (teacher / WEIGHTS_NAME).write_bytes(b"other weights")
    others.append(family(teacher))
    assert len({base, *others}) == 1 + len(others)


def test_a_texts_hash_depends_on_the_text_and_its_pair_and_not_on_its_position():
    hashes = text_hashes(["a", "b", "a", "café"], None)
    assert hashes.dtype == torch.int64 and hashes.shape == (4,)
    assert hashes[0] == hashes[2] and len(set(hashes.tolist())) == 3
    assert text_hashes(["café", "b"], None).tolist() == hashes[[3, 1]].tolist()
    assert text_hashes(["cafe"], None).item() != hashes[3].item()
    paired = text_hashes(["a", "a", "ab", "a"], ["x", "y", "c", "bc"])
    assert len(set(paired.tolist()) | {hashes[0].item()}) == 5  # the pair counts, and where the text ends
    assert text_hashes(["a"], ["x"]).tolist() == paired[:1].tolist()


def test_the_layers_a_cache_file_kept_are_read_from_its_name_in_their_order():
    assert kept_layers(Path("teacher-0123456789abcdef01234567-layers3-1.safetensors")) == [3, 1]
    assert kept_layers(Path("teacher-0123456789abcdef01234567-layers12.safetensors")) == [12]
    assert kept_layers(Path("teacher-0123456789abcdef01234567-layers1-1.safetensors")) == [1, 1]
    assert kept_layers(Path("teacher-0123456789abcdef01234567-layers.safetensors")) == []  # the logits alone
    assert kept_layers(Path("/runs/x-layers9/teacher-0123456789abcdef01234567-layers2.safetensors")) == [2]


def write_file(folder: Path, key: str, layers: list[int], **tensors: torch.Tensor) -> Path:
    path = folder / f"teacher-{key[:24]}-layers{'-'.join(map(str, layers))}.safetensors"
    write_cache(path, tensors or {"train_logits": torch.zeros(1, 2)}, {"sentences": 1})
    return path


def test_a_cache_file_is_found_when_it_kept_every_layer_asked_for_with_their_positions(tmp_path):
    first, second = "a" * 64, "b" * 64
    both = write_file(tmp_path, first, [1, 2])
    third = write_file(tmp_path, second, [3])
    assert cached_file(tmp_path, first, [2, 1]) == (both, [1, 0])
    assert cached_file(tmp_path, first, [2, 2]) == (both, [1, 1])
    assert cached_file(tmp_path, first, []) == (both, [])  # the logits alone: any file of the key
    assert cached_file(tmp_path, first, [3]) is None
    assert cached_file(tmp_path, second, [3]) == (third, [0])
    assert cached_file(tmp_path, "c" * 64, []) is None


def test_a_cache_file_without_its_commit_record_or_changed_since_is_not_found(tmp_path):
    half_written = write_file(tmp_path, "a" * 64, [1])
    atomic_files.record_path(half_written).unlink()  # stopped before its commit record
    assert cached_file(tmp_path, "a" * 64, [1]) is None
    truncated = write_file(tmp_path, "b" * 64, [1])
    truncated.write_bytes(truncated.read_bytes()[:-8])
    assert cached_file(tmp_path, "b" * 64, [1]) is None
    assert cached_file(tmp_path, "c" * 64, []) is None
    whole = write_file(tmp_path, "c" * 64, [1])
    assert cached_file(tmp_path, "c" * 64, []) == (whole, [])


def test_a_written_cache_entry_reads_back_equal_with_its_labelling_and_settings(tmp_path):
    tensors = {"train_logits": torch.randn(3, 2), "validation_logits": torch.randn(1, 2),
               "train_hidden": torch.randn(3, 2, 8).half(), "bf16": torch.randn(3, 4).bfloat16(),
               "text_hashes": text_hashes(TEXTS + ["x"], None)}
    labelling = {"sentences": 4, "seconds": 0.25, "sentences_per_sec": 16.0, "device": "cpu", "dtype": "float32",
                 "reused": 0, "none": None}
    path = tmp_path / "cache" / "teacher-x-layers1-2.safetensors"
    write_cache(path, tensors, labelling, "the settings' digest")
    assert atomic_files.is_committed(path)
    read, read_labelling = read_cache(path)
    assert read.keys() == tensors.keys() and read_labelling == labelling
    for name, tensor in tensors.items():
        assert read[name].dtype == tensor.dtype and torch.equal(read[name], tensor), name
    with safe_open(path, framework="pt") as stored:
        assert stored.metadata()["settings"] == "the settings' digest"
    write_cache(tmp_path / "no_settings.safetensors", tensors, labelling)
    with safe_open(tmp_path / "no_settings.safetensors", framework="pt") as stored:
        assert "settings" not in stored.metadata()


def test_a_failed_write_leaves_the_earlier_entry_whole_and_no_temporary_file(tmp_path):
    path = tmp_path / "teacher-x-layers.safetensors"
    write_cache(path, {"train_logits": torch.ones(2, 2)}, {"sentences": 2})
    with pytest.raises(ValueError, match="non contiguous"):
        write_cache(path, {"train_logits": torch.zeros(2, 3).t()}, {"sentences": 3})
    assert sorted(os.listdir(tmp_path)) == [path.name, atomic_files.record_path(path).name]
    assert atomic_files.is_committed(path)
    tensors, labelling = read_cache(path)
    assert torch.equal(tensors["train_logits"], torch.ones(2, 2)) and labelling == {"sentences": 2}


def stored_outputs(folder: Path, name: str, family: str | None, train: list[str], validation: list[str],
                   layers: list[int], seed: int) -> dict[str, tuple[torch.Tensor, torch.Tensor | None]]:
    """A cache file as teacher_outputs writes it, of random outputs; returns each text's logits and
    [CLS] states (one row per layer kept; None for a validation text)."""
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(len(train) + len(validation), 2, generator=generator)
    hidden = torch.randn(len(train), len(layers), 8, generator=generator).half()
    tensors = {"train_logits": logits[:len(train)], "validation_logits": logits[len(train):],
               "text_hashes": text_hashes(train + validation, None)}
    if layers:
        tensors["train_hidden"] = hidden
    path = folder / f"teacher-{name}-layers{'-'.join(map(str, layers))}.safetensors"
    write_cache(path, tensors, {"sentences": len(logits)}, family)
    return {text: (logits[row], hidden[row] if row < len(train) else None)
            for row, text in enumerate(train + validation)}


def reused(folder: Path, family: str, texts: list[str], train_rows: int, layers: list[int],
           hidden_dtype: torch.dtype | None = torch.float16):
    """reuse_outputs into NaN-filled tensors: (the rows found, the logits, the [CLS] states)."""
    logits = torch.full((len(texts), 2), float("nan"))
    hidden = torch.full((len(texts), len(layers), 8), float("nan"), dtype=hidden_dtype) if layers else None
    found = reuse_outputs(folder, family, text_hashes(texts, None), train_rows, layers, logits, hidden)
    return found, logits, hidden


def test_texts_a_file_of_the_same_settings_holds_are_taken_with_the_cls_states_of_its_training_texts(tmp_path):
    stored = stored_outputs(tmp_path, "k1", "F", ["a", "b", "c"], ["d"], layers=[1, 2], seed=0)
    # Training texts: "c" (trained before), "new", "d" (a validation text before: no [CLS] states kept);
    # validation text: "a", whose logits alone are needed.
    texts = ["c", "new", "d", "a"]
    found, logits, hidden = reused(tmp_path, "F", texts, train_rows=3, layers=[2], hidden_dtype=torch.bfloat16)
    assert found.tolist() == [True, False, False, True]
    assert torch.equal(logits[0], stored["c"][0]) and torch.equal(logits[3], stored["a"][0])
    assert logits[1:3].isnan().all() and hidden[1:].isnan().all()  # rows not found are left as they were
    assert hidden.dtype == torch.bfloat16 and torch.equal(hidden[0, 0], stored["c"][1][1].bfloat16())  # layer 2

    found, logits, hidden = reused(tmp_path, "F", texts, train_rows=3, layers=[])
    assert found.tolist() == [True, False, True, True] and hidden is None  # the logits alone: any row
    assert torch.equal(logits[2], stored["d"][0])


def test_no_text_is_taken_from_a_file_of_other_settings_or_layers_or_without_its_commit_record(tmp_path):
    stored_outputs(tmp_path, "other", "another family", ["a"], [], layers=[1], seed=0)
    stored_outputs(tmp_path, "none", None, ["a"], [], layers=[1], seed=1)  # a file that names no settings
    stored_outputs(tmp_path, "layer1", "F", ["a"], [], layers=[1], seed=2)
    stored_outputs(tmp_path, "uncommitted", "F", ["a"], [], layers=[2], seed=3)
    atomic_files.record_path(tmp_path / "teacher-uncommitted-layers2.safetensors").unlink()
    stored_outputs(tmp_path, "empty", "F", [], [], layers=[2], seed=4)  # a file of no texts
    found, logits, hidden = reused(tmp_path, "F", ["a"], train_rows=1, layers=[2])
    assert not found.any() and logits.isnan().all() and hidden.isnan().all()
    found, _, _ = reused(tmp_path, "F", ["a"], train_rows=1, layers=[1])
    assert found.all()


def test_texts_are_gathered_from_several_files_and_the_newest_file_holding_a_text_gives_it(tmp_path):
    old = stored_outputs(tmp_path, "old", "F", ["a", "b"], [], layers=[1], seed=0)
    new = stored_outputs(tmp_path, "new", "F", ["b", "c"], [], layers=[1], seed=1)
    os.utime(tmp_path / "teacher-old-layers1.safetensors", (1_000_000, 1_000_000))
    os.utime(tmp_path / "teacher-new-layers1.safetensors", (2_000_000, 2_000_000))
    found, logits, hidden = reused(tmp_path, "F", ["c", "b", "a"], train_rows=3, layers=[1])
    assert found.all()
    assert torch.equal(logits, torch.stack([new["c"][0], new["b"][0], old["a"][0]]))
    assert torch.equal(hidden, torch.stack([new["c"][1], new["b"][1], old["a"][1]]))
    os.utime(tmp_path / "teacher-old-layers1.safetensors", (3_000_000, 3_000_000))
    _, logits, _ = reused(tmp_path, "F", ["c", "b", "a"], train_rows=3, layers=[1])
    assert torch.equal(logits, torch.stack([new["c"][0], old["b"][0], old["a"][0]]))
