"""The Hugging Face directory format: `config.json` + `model.safetensors` (+ tokenizer files),
written atomically, read from bertlab or Hugging Face directories with one readable report of what
did not fit, and exported whole (model and tokenizer) by `export_pretrained`."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import shutil
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer

from bertlab.config import CONFIG_NAME, POSITION_TABLE_TYPES, BertConfig
from bertlab.modernbert_format import (MODEL_TYPE as MODERNBERT, TOKENIZER_INPUT_NAMES, from_modernbert_state,
                                        is_modernbert_state, modernbert_config_values, modernbert_shape_mismatch,
                                        to_modernbert_state)
from bertlab.remote_code import remote_code_config_text, remote_code_files
from bertlab.errors import CheckpointError, ConfigError
from bertlab.tokenizer import save_tokenizer

WEIGHTS_NAME = "model.safetensors"
BASE_PREFIX = "bert."
log = logging.getLogger("bertlab")

DECODER_KEY = "cls.predictions.decoder.weight"
# Tensors older checkpoints carry that are not parameters (buffers).
_IGNORED_KEYS = re.compile(r"(^|\.)(embeddings\.position_ids|embeddings\.token_type_ids)$")
_TF_NAMES = ((".gamma", ".weight"), (".beta", ".bias"))


def write_atomically(path: Path, write) -> None:
    """Calls `write(temp_path)` on a temporary sibling, then renames it over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(temp)
        # mkstemp creates 0600 and safetensors re-creates the file: set the mode once it is written.
        os.chmod(temp, 0o644)
        with open(temp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def layer_pattern(keys: list[str]) -> list[str]:
    """Collapses per-layer keys: `encoder.layer.{0-5}.attention.self.query.weight`."""
    layers: dict[str, list[int]] = defaultdict(list)
    for key in keys:
        match = re.search(r"\.layer\.(\d+)\.", key)
        if match:
            layers[key[:match.start()] + ".layer.{}." + key[match.end():]].append(int(match.group(1)))
        else:
            layers[key] = []
    lines = []
    for pattern, indices in sorted(layers.items()):
        if not indices:
            lines.append(pattern)
            continue
        indices.sort()
        span = str(indices[0]) if len(indices) == 1 else (
            f"{indices[0]}-{indices[-1]}" if indices == list(range(indices[0], indices[-1] + 1))
            else ",".join(map(str, indices)))
        lines.append(pattern.replace("{}", "{" + span + "}"))
    return lines


@dataclass
class LoadReport:
    source: str
    model_class: str
    loaded: int = 0
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    mismatched: list[tuple[str, tuple, tuple]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # why some of the keys above are there

    @property
    def complete(self) -> bool:
        return not (self.missing or self.unexpected or self.mismatched)

    def __str__(self) -> str:
        lines = [f"Loaded {self.loaded} tensors from {self.source} into {self.model_class}."]
        if self.missing:
            lines.append("  newly initialised (not in the checkpoint; train them):")
            lines += [f"    {line}" for line in layer_pattern(self.missing)]
        if self.mismatched:
            lines.append("  re-initialised (shape in checkpoint differs from this model):")
            lines += [f"    {key}: checkpoint {tuple(a)} vs model {tuple(b)}" for key, a, b in self.mismatched]
        if self.unexpected:
            lines.append("  ignored (in the checkpoint, not used by this model):")
            lines += [f"    {line}" for line in layer_pattern(self.unexpected)]
        lines += [f"  {note}" for note in self.notes]
        return "\n".join(lines)


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


def normalise_keys(state: dict[str, torch.Tensor], expected: set[str]) -> dict[str, torch.Tensor]:
    """Maps Hugging Face / TF-converted names onto this model's names: `bert.` prefix added or
    removed, `gamma`/`beta` → `weight`/`bias`, the decoder bias alias, buffers dropped."""
    model_has_prefix = any(key.startswith(BASE_PREFIX) for key in expected)
    result = {}
    for key, tensor in state.items():
        for old, new in _TF_NAMES:
            if key.endswith(old) and "LayerNorm" in key:
                key = key[: -len(old)] + new
        if key.endswith("cls.predictions.decoder.bias"):
            key = key.replace("decoder.bias", "bias")
        if _IGNORED_KEYS.search(key):
            continue
        is_head = key.startswith(("cls.", "classifier.", "qa_outputs.", "head."))
        if model_has_prefix and not key.startswith(BASE_PREFIX) and not is_head:
            key = BASE_PREFIX + key
        elif not model_has_prefix and key.startswith(BASE_PREFIX):
            key = key[len(BASE_PREFIX):]
        result.setdefault(key, tensor)
    return result


def drop_tied_decoder(state: dict[str, torch.Tensor], expected: set[str], report: LoadReport) -> None:
    """A model whose decoder is tied reads the word embeddings: a checkpoint's copy of them is dropped,
    but a decoder of its own (an untied checkpoint) is reported as ignored, not silently replaced."""
    if DECODER_KEY not in state or DECODER_KEY in expected:
        return
    decoder = state.pop(DECODER_KEY)
    words = next((t for k, t in state.items() if k.endswith("embeddings.word_embeddings.weight")), None)
    if words is not None and torch.equal(decoder, words):
        return
    report.unexpected.append(DECODER_KEY)
    report.notes.append(f"{DECODER_KEY} differs from the word embeddings (an untied checkpoint): this model ties "
                        f"its decoder to them; load with tie_word_embeddings=False to keep the checkpoint's")


def check_position_type(config: BertConfig, keys: set[str], source: Path) -> None:
    """A relative config needs distance embeddings in the checkpoint, an absolute one must not
    find them: either way the checkpoint was trained differently, and loading would be silently wrong."""
    has_distance = any(".distance_embedding." in key for key in keys)
    has_encoder = any(".encoder.layer." in f".{key}" for key in keys)
    relative = config.relative_positions
    if has_encoder and relative and not has_distance:
        raise CheckpointError(
            f"{source}: config.json says position_embedding_type={config.position_embedding_type!r} "
            f"but the weights have no distance_embedding tables; they were trained with absolute positions")
    if relative is False and has_distance:
        raise CheckpointError(
            f"{source}: config.json says position_embedding_type={config.position_embedding_type!r} but the weights contain "
            f"relative distance_embedding tables; set position_embedding_type to relative_key or "
            f"relative_key_query in config.json")


def check_sinusoidal_table(model: torch.nn.Module, state: dict[str, torch.Tensor], source: Path) -> None:
    """A sinusoidal model keeps its table fixed: loading a learned one into it would freeze other positions."""
    if model.config.position_embedding_type != "sinusoidal":
        return
    fixed = getattr(model, "bert", model).embeddings.position_embeddings.weight
    table = next((t for k, t in state.items() if k.endswith("embeddings.position_embeddings.weight")), None)
    if table is not None and (table.shape != fixed.shape or not torch.allclose(table.float(), fixed, atol=1e-6)):
        raise CheckpointError(f"{source}: position_embedding_type='sinusoidal' but the checkpoint's position "
                              f"table is not the sinusoidal one; it was learned: load it as "
                              f"position_embedding_type='absolute'")


def load_into(model: torch.nn.Module, directory: Path, ignore_mismatched_sizes: bool = False) -> LoadReport:
    """Tensors that do not fit the model's shapes: in the heads (classifier, cls) re-initialised and
    reported, in the encoder an error unless `ignore_mismatched_sizes`, which re-initialises them too."""
    expected = model.state_dict()
    weights = read_weights(directory)
    if is_modernbert_state(weights):
        weights = from_modernbert_state(weights, set(expected))
    state = normalise_keys(weights, set(expected))
    check_position_type(model.config, set(state), directory)
    check_sinusoidal_table(model, state, directory)
    report = LoadReport(str(directory), type(model).__name__)
    drop_tied_decoder(state, set(expected), report)
    fitting = {}
    for key, tensor in state.items():
        if key not in expected:
            if key.endswith("embeddings.position_embeddings.weight") \
                    and model.config.position_embedding_type not in POSITION_TABLE_TYPES:
                continue  # transformers always saves this table; relative models never use it
            report.unexpected.append(key)
        elif tensor.shape != expected[key].shape:
            report.mismatched.append((key, tuple(tensor.shape), tuple(expected[key].shape)))
        else:
            fitting[key] = tensor
    body_mismatch = [item for item in report.mismatched if not item[0].startswith(("classifier.", "cls."))]
    if body_mismatch and not ignore_mismatched_sizes:
        key, found, wanted = body_mismatch[0]
        raise CheckpointError(
            f"{directory}: {len(body_mismatch)} tensor(s) do not fit the model config, e.g. {key}: "
            f"checkpoint {found} vs model {wanted}; the checkpoint's config.json and weights disagree "
            f"(ignore_mismatched_sizes=True re-initialises them instead)")
    model.load_state_dict(fitting, strict=False)
    report.loaded = len(fitting)
    mismatched_keys = {key for key, _, _ in report.mismatched}
    report.missing = [key for key in expected if key not in fitting and key not in mismatched_keys]
    return report


class PretrainedMixin:
    """`from_pretrained` / `save_pretrained` for the model classes in bertlab.model."""

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, ignore_mismatched_sizes: bool = False, **config_overrides):
        """Loads a bertlab or Hugging Face BERT directory, in eval mode as transformers does.
        `config_overrides` replace config.json values (e.g. num_labels, id2label, output_hidden_states,
        tie_word_embeddings, gradient_checkpointing). Encoder tensors whose shapes differ from the
        config's are an error unless `ignore_mismatched_sizes`. The load report is logged and kept as
        `model.load_report`."""
        unknown = sorted(set(config_overrides) - {f.name for f in dataclasses.fields(BertConfig)})
        if unknown:
            raise ConfigError(f"from_pretrained: unknown config override(s) {', '.join(unknown)}; "
                              f"expected BertConfig fields (e.g. num_labels, id2label, attn_implementation)")
        directory = Path(path)
        if not directory.is_dir():
            raise CheckpointError(f"{directory}: not a checkpoint directory (expected a folder with "
                                  f"{CONFIG_NAME} and {WEIGHTS_NAME})")
        saved = BertConfig.from_json_file(directory)
        values = saved.to_dict()
        values.update(config_overrides)
        if config_overrides.get("num_labels", saved.num_labels) != saved.num_labels \
                and "id2label" not in config_overrides:
            values["id2label"] = values["label2id"] = None  # the saved label names no longer apply
        config = BertConfig.from_dict(values)
        model = cls(config)
        model.load_report = load_into(model, directory, ignore_mismatched_sizes)
        level = logging.INFO if model.load_report.complete else logging.WARNING
        log.log(level, "%s", model.load_report)
        return model.eval()

    def save_pretrained(self, path: str | os.PathLike) -> None:
        """Writes transformers' format: BERT's (BertFor…) for a BERT, ModernBERT's for a ModernBERT-shaped
        model, and any other mix with its own modelling code (bertlab.remote_code)."""
        directory = Path(path)
        config_text, tensors, code = checkpoint_files(self)
        # Weights first: when the large write fails, the directory keeps its previous config/weights pair.
        write_atomically(directory / WEIGHTS_NAME, lambda temp: save_file(tensors, temp, metadata={"format": "pt"}))
        for name, source in code.items():
            write_atomically(directory / name, lambda temp, source=source: Path(temp).write_text(source))
        write_atomically(directory / CONFIG_NAME, lambda temp: Path(temp).write_text(config_text))


def export_format(model: torch.nn.Module) -> str:
    """The format `model` saves in: "modernbert" where its knobs are ModernBERT's, "bert" for a 2018 BERT,
    "remote_code" (its own modelling code) for any other mix."""
    if modernbert_shape_mismatch(model.config, type(model).__name__) is None:
        return MODERNBERT
    return "remote_code" if model.config.non_bert_keys() else "bert"


def checkpoint_files(model: torch.nn.Module) -> tuple[str, dict[str, torch.Tensor], dict[str, str]]:
    """config.json's text, the tensors under their saved names, and the code files (remote code only)."""
    architecture = type(model).__name__
    tensors = {key: value.detach().contiguous().cpu() for key, value in model.state_dict().items()}
    saved_as = export_format(model)
    if saved_as == MODERNBERT:
        values = modernbert_config_values(model.config, architecture)
        tensors = to_modernbert_state(tensors, model.config.num_hidden_layers, architecture)
        return json.dumps(values, indent=2, sort_keys=True) + "\n", tensors, {}
    if saved_as == "remote_code":
        return remote_code_config_text(model.config, architecture), tensors, remote_code_files()
    return model.config.to_json_string(architecture=architecture), tensors, {}


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
        save_tokenizer(tokenizer, staging,
                       model_input_names=TOKENIZER_INPUT_NAMES if export_format(model) == MODERNBERT else None)
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
