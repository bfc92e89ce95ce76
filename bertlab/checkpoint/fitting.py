"""How a state dict, already under bertlab's names, fits a model: the tensors that load, the checks
that refuse a checkpoint trained differently, and one readable report of what did not fit (LoadReport).

Whether a checkpoint's weights fit the model that reads them is the one rule every command and run
applies before it uses a checkpoint (`check_weights_fit`: `model.init_from`, a distillation teacher, the
checkpoint of predict, evaluate, heads, attention, shrink, glue). A head the checkpoint lacks (a classifier
on a masked-LM export, a pooler, a masked-LM head) is expected: it is initialised and the load report says
so. An encoder tensor (the embeddings or a layer) that is missing, renamed, extra or of another shape is
refused in one line naming the tensors: a body trained from random weights is a ruined experiment.
`model.allow_reinitialised=true` (a run) or `--allow-reinitialised` (a command) asks for it explicitly; it
is then logged.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import torch

from bertlab.config import POSITION_TABLE_TYPES, BertConfig
from bertlab.errors import CheckpointError

log = logging.getLogger("bertlab")
BASE_PREFIX = "bert."
DECODER_KEY = "cls.predictions.decoder.weight"
HEAD_PREFIXES = ("cls.", "classifier.", "qa_outputs.", "head.")
ENCODER_PREFIXES = ("embeddings.", "encoder.")  # below the optional `bert.`; everything else is a head
ALLOW_KEY = "model.allow_reinitialised=true"
ALLOW_FLAG = "--allow-reinitialised"


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


def fit_prefix(state: dict[str, torch.Tensor], expected: set[str]) -> dict[str, torch.Tensor]:
    """The encoder's `bert.` prefix added or removed, as the loading class (a base model or one with a head) has it."""
    model_has_prefix = any(key.startswith(BASE_PREFIX) for key in expected)
    result = {}
    for key, tensor in state.items():
        if model_has_prefix and not key.startswith(BASE_PREFIX) and not key.startswith(HEAD_PREFIXES):
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


def fit_state(model: torch.nn.Module, state: dict[str, torch.Tensor], source: Path,
              ignore_mismatched_sizes: bool = False) -> LoadReport:
    """Loads `state` (bertlab's names) into `model`. Tensors that do not fit the model's shapes: in the heads
    (classifier, cls) re-initialised and reported, in the encoder an error unless `ignore_mismatched_sizes`,
    which re-initialises them too."""
    expected = model.state_dict()
    state = fit_prefix(state, set(expected))
    check_position_type(model.config, set(state), source)
    check_sinusoidal_table(model, state, source)
    report = LoadReport(str(source), type(model).__name__)
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
            f"{source}: {len(body_mismatch)} tensor(s) do not fit the model config, e.g. {key}: "
            f"checkpoint {found} vs model {wanted}; the checkpoint's config.json and weights disagree "
            f"(ignore_mismatched_sizes=True re-initialises them instead)")
    model.load_state_dict(fitting, strict=False)
    report.loaded = len(fitting)
    mismatched_keys = {key for key, _, _ in report.mismatched}
    report.missing = [key for key in expected if key not in fitting and key not in mismatched_keys]
    return report


def is_encoder_tensor(key: str) -> bool:
    return key.removeprefix("bert.").startswith(ENCODER_PREFIXES)


def unfit_encoder_tensors(report: LoadReport) -> list[str]:
    """What does not fit among the encoder tensors, grouped: `missing …`, `unexpected …`, `shape of …`."""
    missing = [key for key in report.missing if is_encoder_tensor(key)]
    unexpected = [key for key in report.unexpected if is_encoder_tensor(key)]
    mismatched = [f"{key} (checkpoint {tuple(found)}, model {tuple(wanted)})"
                  for key, found, wanted in report.mismatched if is_encoder_tensor(key)]
    groups = [("missing", layer_pattern(missing)), ("unexpected", layer_pattern(unexpected)),
              ("shape of", mismatched)]
    return [f"{name} {', '.join(keys)}" for name, keys in groups if keys]


def check_weights_fit(report: LoadReport, what: str, allow: bool, how_to_allow: str = ALLOW_KEY) -> None:
    """Refuses `report`'s checkpoint when an encoder tensor does not fit, unless `allow`.
    `what` names the checkpoint as the user gave it (`model.init_from=…`, a command's argument)."""
    unfit = unfit_encoder_tensors(report)
    if not unfit:
        return
    described = "; ".join(unfit)
    if allow:
        log.warning("%s: encoder tensors re-initialised (allowed): %s", what, described)
        return
    raise CheckpointError(f"{what}: its encoder does not fit {report.model_class} ({described}); those tensors "
                          f"would start from random weights. Use a checkpoint of this architecture, or "
                          f"{how_to_allow} to train them from scratch")


def quietly_loaded(model_class: type, folder: str | Path, **config_overrides):
    """`model_class.from_pretrained` without its load report in the log (the caller judges it)."""
    logger = logging.getLogger("bertlab")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        return model_class.from_pretrained(folder, **config_overrides)
    finally:
        logger.setLevel(level)
