"""The decisions of `trainer.precision: fastest` (bertlab.training.run.precision), kept per machine kind and
timed shape in `precision_decisions.json` of bertlab's cache folder: $BERTLAB_CACHE_DIR, else
$XDG_CACHE_HOME/bertlab, else ~/.cache/bertlab. A machine kind is what a step's speed depends on beside
the config: the CPU's name, whether it computes bf16 natively (AVX512-BF16, AMX) and the threads torch
uses, or the GPU's name and compute capability; and the torch version. The file is a JSON object from a
key (a hash of the machine kind and the timed config) to the decision and what it rests on, replaced
whole on every write so that a reader never sees half of one."""

from __future__ import annotations

import datetime
import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from bertlab.errors import ConfigError
from bertlab.files import write_atomically

FILE = "precision_decisions.json"


@dataclass(frozen=True)
class Decision:
    precision: str
    decided: str                          # the date it was timed, ISO
    steps_per_second: dict[str, float]    # each candidate's best trial
    machine: str                          # the machine kind, for a reader of the file


def cache_folder() -> Path:
    """bertlab's own cache folder (not the datasets cache, which holds data)."""
    if folder := os.environ.get("BERTLAB_CACHE_DIR"):
        return Path(folder)
    if folder := os.environ.get("XDG_CACHE_HOME"):
        return Path(folder) / "bertlab"
    return Path.home() / ".cache" / "bertlab"


def decisions_file() -> Path:
    return cache_folder() / FILE


def cpu_has_native_bf16() -> bool:
    """AVX512-BF16 or AMX-BF16, from torch's public CPU capabilities (torch ≥ 2.10)."""
    capabilities = torch.cpu.get_capabilities()
    return bool(capabilities.get("avx512_bf16") or capabilities.get("amx_bf16"))


def machine_kind(device: torch.device) -> str:
    """What, beside the config, a training step's speed on `device` depends on, as one line."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(index)
        kind = f"GPU {torch.cuda.get_device_name(index)}, compute capability {major}.{minor}"
    else:
        capabilities = torch.cpu.get_capabilities()
        kind = (f"CPU {capabilities.get('cpu_name') or capabilities.get('architecture')}, "
                f"native bf16 {'yes' if cpu_has_native_bf16() else 'no'}, "
                f"AMX {'yes' if capabilities.get('amx_tile') else 'no'}, {torch.get_num_threads()} threads")
    return f"{kind}, torch {torch.__version__}"


def key(machine: str, timed: str) -> str:
    return hashlib.sha256(f"{machine}\n{timed}".encode()).hexdigest()[:24]


def read(path: Path) -> dict[str, Decision]:
    """The decisions in `path` (none where it does not exist); a file that is not one is an error naming it:
    timing anew over it would lose the other decisions, and with them the runs' repeatability."""
    if not path.exists():
        return {}
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
        return {name: Decision(**entry) for name, entry in entries.items()}
    except (ValueError, TypeError, AttributeError) as error:
        raise ConfigError(f"trainer.precision=fastest: {path} is not a precision decisions file ({error}); delete "
                          f"it to time the precisions anew, or set trainer.precision=32-true or bf16-mixed") from None


def write(path: Path, name: str, decision: Decision) -> None:
    """Adds `decision` under `name` to the decisions in `path`."""
    entries = {other: asdict(kept) for other, kept in read(path).items()}
    entries[name] = asdict(decision)
    text = json.dumps(entries, indent=1, sort_keys=True) + "\n"
    write_atomically(path, lambda temp: Path(temp).write_text(text, encoding="utf-8"))


def today() -> str:
    return datetime.date.today().isoformat()
