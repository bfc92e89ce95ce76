"""The checkpoint folder (`config.json` + `model.safetensors` + tokenizer files, transformers' layout) in
any of bertlab's formats: the one place that picks the format, by config.json's `model_type` when reading
and by the model's config when writing. Writes are atomic; reads give one readable report of what did not
fit; `export_pretrained` writes a model and its tokenizer whole."""

from __future__ import annotations

import dataclasses
import importlib
import json
import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer

from bertlab.atomic_files import write_atomically
from bertlab.checkpoint.fitting import LoadReport, fit_state
from bertlab.config import BertConfig
from bertlab.errors import CheckpointError, ConfigError
from bertlab.tokenizer import save_tokenizer

CONFIG_NAME, WEIGHTS_NAME = "config.json", "model.safetensors"
# The format modules of this package, each imported when a checkpoint is tried in it: saving a BERT reads no
# ModernBERT or remote-code module. Each has MODEL_TYPE, TOKENIZER_INPUT_NAMES, detect, saves, config_values,
# config_text, to_state, from_state and code_files. A folder is read in the first that detects it, a model saved in
# the first that saves it: BERT's and ModernBERT's classes in transformers (which never both take one config, nor
# one config.json) before the model's own code (remote_code), which saves any.
FORMATS = ("bert", "modernbert", "remote_code")
log = logging.getLogger("bertlab")


def format_module(name: str) -> ModuleType:
    """The format module `name` (one of FORMATS), imported now."""
    return importlib.import_module(f"{__package__}.{name}")


def formats() -> Iterator[ModuleType]:
    """The format modules in FORMATS' order, each imported when the one before it did not fit."""
    return map(format_module, FORMATS)


def read_config_file(path: str | os.PathLike) -> tuple[Path, dict[str, Any]]:
    """A config.json's path (a folder's, for a folder) and its JSON object."""
    path = Path(path)
    if path.is_dir():
        path = path / CONFIG_NAME
    if not path.is_file():
        raise CheckpointError(f"{path}: no such file; a checkpoint directory needs a {CONFIG_NAME}")
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CheckpointError(f"{path}: malformed JSON ({error})") from None
    if not isinstance(values, dict):
        raise CheckpointError(f"{path}: expected a JSON object, got {type(values).__name__}")
    return path, values


def folder_format(path: str | os.PathLike) -> tuple[ModuleType, Path, dict]:
    """The format of a checkpoint folder (or of its config.json), config.json's path and its values."""
    path, values = read_config_file(path)
    found = next((form for form in formats() if form.detect(values)), None)
    if found is None:
        *others, own = (form.MODEL_TYPE for form in formats())
        raise CheckpointError(f"{path}: model_type is {values['model_type']!r}; bertlab reads "
                              f"{', '.join(map(repr, others))} and its own {own!r}")
    return found, path, values


def read_config(path: str | os.PathLike) -> BertConfig:
    """The BertConfig of a checkpoint folder (or of its config.json), in any of bertlab's formats."""
    form, path, values = folder_format(path)
    return _checked_config(path, form.config_values(values))


def read_bert_config(path: str | os.PathLike) -> BertConfig:
    """BertConfig.from_json_file: the BertConfig of a config.json in BERT's format (or of a folder's), the
    format BertConfig writes; any other is refused."""
    path, values = read_config_file(path)
    bert = format_module("bert")
    if not bert.detect(values):
        raise CheckpointError(f"{path}: model_type is {values['model_type']!r}; bertlab reads {bert.MODEL_TYPE!r} "
                              f"here (read other checkpoint formats with bertlab.checkpoint.dispatch.read_config)")
    return _checked_config(path, bert.config_values(values))


def _checked_config(path: Path, values: dict[str, Any]) -> BertConfig:
    try:
        return BertConfig.from_dict(values)
    except ConfigError as error:
        raise CheckpointError(f"{path}: {error}") from None


def read_weights(directory: Path) -> dict[str, torch.Tensor]:
    path = directory / WEIGHTS_NAME
    if not path.is_file():
        others = sorted(p.name for p in directory.glob("*.bin")) + sorted(p.name for p in directory.glob("*.pt"))
        hint = (f"; found {', '.join(others)} — bertlab loads only safetensors (no pickle from untrusted "
                f"files); convert with transformers' save_pretrained(safe_serialization=True)") if others else ""
        raise CheckpointError(f"{path}: no such file{hint}")
    try:
        return load_file(path)
    except (SafetensorError, OSError, ValueError) as error:
        # safetensors quotes the corrupt header in its message, newlines included: keep the error one line.
        reason = str(error).replace("\n", "\\n")
        raise CheckpointError(f"{path}: unreadable safetensors file, truncated or corrupted ({reason})") from None


def load_into(model: torch.nn.Module, directory: Path, ignore_mismatched_sizes: bool = False) -> LoadReport:
    """The folder's weights, under bertlab's names, into `model` (bertlab.checkpoint.fitting.fit_state)."""
    form, _, _ = folder_format(directory)
    state = form.from_state(read_weights(directory), set(model.state_dict()))
    return fit_state(model, state, directory, ignore_mismatched_sizes)


def load_pretrained(model_class: type, path: str | os.PathLike, ignore_mismatched_sizes: bool = False,
                    **config_overrides) -> torch.nn.Module:
    """bertlab.model's `from_pretrained` (its docstring says what it does)."""
    unknown = sorted(set(config_overrides) - {f.name for f in dataclasses.fields(BertConfig)})
    if unknown:
        raise ConfigError(f"from_pretrained: unknown config override(s) {', '.join(unknown)}; "
                          f"expected BertConfig fields (e.g. num_labels, id2label, attn_implementation)")
    directory = Path(path)
    if not directory.is_dir():
        raise CheckpointError(f"{directory}: not a checkpoint directory (expected a folder with "
                              f"{CONFIG_NAME} and {WEIGHTS_NAME})")
    saved = read_config(directory)
    values = saved.to_dict()
    values.update(config_overrides)
    if config_overrides.get("num_labels", saved.num_labels) != saved.num_labels and "id2label" not in config_overrides:
        values["id2label"] = values["label2id"] = None  # the saved label names no longer apply
    model = model_class(BertConfig.from_dict(values))
    model.load_report = load_into(model, directory, ignore_mismatched_sizes)
    log.log(logging.INFO if model.load_report.complete else logging.WARNING, "%s", model.load_report)
    return model.eval()


def save_format(model: torch.nn.Module) -> ModuleType:
    """The format `model` saves in: BERT's for a 2018 BERT, ModernBERT's where its knobs are ModernBERT's,
    its own modelling code (remote_code) for any other mix."""
    return next(form for form in formats() if form.saves(model.config, type(model).__name__))


def checkpoint_files(model: torch.nn.Module) -> tuple[str, dict[str, torch.Tensor], dict[str, str]]:
    """config.json's text, the tensors under their saved names, and the code files (remote code only)."""
    architecture, form = type(model).__name__, save_format(model)
    tensors = {key: value.detach().contiguous().cpu() for key, value in model.state_dict().items()}
    return (form.config_text(model.config, architecture), form.to_state(tensors, model.config, architecture),
            form.code_files())


def save_pretrained(model: torch.nn.Module, path: str | os.PathLike) -> None:
    """bertlab.model's `save_pretrained` (its docstring says what it does)."""
    directory = Path(path)
    config_text, tensors, code = checkpoint_files(model)
    # Weights first: when the large write fails, the directory keeps its previous config/weights pair.
    write_atomically(directory / WEIGHTS_NAME, lambda temp: save_file(tensors, temp, metadata={"format": "pt"}))
    for name, source in code.items():
        write_atomically(directory / name, lambda temp, source=source: Path(temp).write_text(source))
    write_atomically(directory / CONFIG_NAME, lambda temp: Path(temp).write_text(config_text))


def export_pretrained(model: torch.nn.Module, tokenizer: Tokenizer, directory: str | os.PathLike) -> None:
    """Writes `model` and `tokenizer` as a Hugging Face directory. Everything goes into a temporary
    sibling first, which then replaces `directory`: an interruption leaves the old export or none,
    never a half-written one."""
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = directory.parent / f".{directory.name}.tmp-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        staging.mkdir()
        model.save_pretrained(staging)
        save_tokenizer(tokenizer, staging, model_input_names=save_format(model).TOKENIZER_INPUT_NAMES)
        if directory.exists():
            retired = staging.with_name(f"{staging.name}.old")
            os.replace(directory, retired)
            os.replace(staging, directory)
            shutil.rmtree(retired)
        else:
            os.replace(staging, directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
