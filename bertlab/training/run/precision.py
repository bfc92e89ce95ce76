"""`trainer.precision: fastest`: the faster of 32-true and bf16-mixed for the run's model and data on
this kind of machine, timed once per machine kind and shape and from then on read, so that the same
command and seed train in the same precision, and give the same model, however busy the machine is.
Having native bf16 decides nothing for a small model: autocast's casts can cost more than the narrower
matmuls save (BERT-Tiny trains at 7.04 steps/s in 32-true and 4.08 in bf16-mixed on a 2-core
AVX512-BF16 Xeon).

The candidates are 32-true and, where the device computes bf16 natively (a CPU with AVX512-BF16 or
AMX, a CUDA GPU of compute capability 8.0 or more), bf16-mixed; GPUs are timed too, since a small
model's steps are bound by kernel launches, which autocast adds to. With one candidate nothing is
timed. The first run of a shape (`what_is_timed`: the model, data, task and trainer, not the seeds or
the folders) on a machine kind (`machine_kind`: the CPU or GPU, its bf16 support, the threads, the torch
version) times each candidate in trials (bertlab.training.run.trial) of the steps
alone, which leave the run's module, data order and random generators as they were: ROUNDS rounds, the
candidates in turn, each candidate's fastest trial counting (as timeit's repeat), and bf16-mixed must be
MARGIN faster than 32-true, so near ties keep the exact precision. The decision goes to
precision_decisions.json in bertlab's cache folder; every later run of that shape on that kind of
machine, the other seeds of a sweep and of the GLUE suite included, reads it and times nothing. Delete
the file (or its entry) to time anew, after an upgrade of the machine that its kind does not name.
Under data parallelism every process takes the timings of the first, so all choose alike, and only the
first writes; processes on several nodes should share the cache folder ($BERTLAB_CACHE_DIR), or name
the precision.

The decisions are kept per machine kind and timed shape in `precision_decisions.json` of bertlab's cache
folder: $BERTLAB_CACHE_DIR, else $XDG_CACHE_HOME/bertlab, else ~/.cache/bertlab. A machine kind is what a
step's speed depends on beside the config: the CPU's name, whether it computes bf16 natively (AVX512-BF16,
AMX) and the threads torch uses, or the GPU's name and compute capability; and the torch version. The file
is a JSON object from a key (a hash of the machine kind and the timed config) to the decision and what it
rests on, replaced whole on every write so that a reader never sees half of one.

The choice comes before a time budget's calibration (bertlab.training.run.budget), which then measures the
chosen precision; like preparing the data, it is outside the budget. The log and a comment at the top of
config.yaml say the precision and where it came from; config.yaml records the chosen precision: that
config repeats the run bit for bit without timing. A resumed run keeps the precision of the config.yaml
of the run it resumes.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import lightning as L
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from bertlab.atomic_files import write_atomically
from bertlab.errors import CheckpointError, ConfigError
from bertlab.training.run import run_folder, trial

log = logging.getLogger("bertlab")
FASTEST = "fastest"
EXACT = "32-true"  # every device's candidate, which bf16-mixed must beat by MARGIN
ROUNDS = 3
MARGIN = 1.05  # how much faster than 32-true bf16-mixed must step to be chosen
NOT_TIMED = ("seed", "cache_dir", "default_root_dir")  # keys (and keys ending in _seed) a step's cost ignores
FILE = "precision_decisions.json"


def native_bf16(device: torch.device) -> bool:
    """Whether `device` computes bf16 natively: a CPU with AVX512-BF16 (every CPU with AMX has it), a CUDA GPU of
    compute capability 8.0 or more. Elsewhere bf16 is emulated, slower than float32."""
    if device.type == "cpu":
        return cpu_has_native_bf16()
    return device.type == "cuda" and torch.cuda.is_bf16_supported(including_emulation=False)


def training_device(trainer: DictConfig) -> torch.device:
    """The device Lightning trains on with the `trainer` group, from a throwaway Trainer (in 32-true: the
    precision is what is being chosen)."""
    return instantiate(trainer, precision=EXACT, callbacks=[], logger=False).strategy.root_device


def candidates(device: torch.device) -> list[str]:
    return [EXACT, "bf16-mixed"] if native_bf16(device) else [EXACT]


def choose(trainer: DictConfig, shape: str, device: torch.device, module: L.LightningModule,
           datamodule: L.LightningDataModule, run_dir: Path, checkpoint: str | None) -> str:
    """Sets `precision` of the `trainer` group from `fastest`: the decision for this machine kind and `shape`
    (`what_is_timed`), timed now on `device` if there is none yet, or on resume the precision of the resumed run.
    Returns the log's line."""
    if checkpoint is not None:
        chosen = recorded_precision(Path(checkpoint))
        note = f"resuming, keeping trainer.precision={chosen} of the resumed run"
    elif len(options := candidates(device)) == 1:
        chosen = options[0]
        note = f"{chosen} (no native bf16 on this {device.type}, nothing to time)"
    else:
        path, machine = decisions_file(), machine_kind(device)
        name = key(machine, shape)
        decision = read(path).get(name)
        if decision is None:
            decision = timed_decision(trainer, options, module, datamodule, run_dir, machine)
            if run_folder.is_rank_zero():
                write(path, name, decision)
            origin = f"timed now for this machine kind and shape: {rates(decision)}; kept in {path}"
        else:
            origin = f"decided {decision.decided} for this machine kind and shape: {rates(decision)}; from {path}"
        chosen = decision.precision
        note = f"{chosen} ({origin})"
    line = f"trainer.precision=fastest: {note}"
    log.info("%s", line)
    trainer.precision = chosen
    return line


def timed_decision(trainer: DictConfig, options: list[str], module: L.LightningModule,
                   datamodule: L.LightningDataModule, run_dir: Path, machine: str) -> Decision:
    """The faster of `options` in ROUNDS rounds of trials, each one's best trial counting, bf16-mixed by MARGIN."""
    seconds = dict.fromkeys(options, math.inf)
    for _ in range(ROUNDS):
        for option in options:
            timing = trial.time_steps(trainer, module, datamodule, run_dir, steps_only=True, precision=option)
            seconds[option] = min(seconds[option], timing.step_seconds)
    chosen = min(options, key=lambda option: seconds[option] * (1.0 if option == EXACT else MARGIN))
    return Decision(precision=chosen, decided=today(), machine=machine,
                    steps_per_second={option: float(f"{1 / seconds[option]:.3g}") for option in options})


def rates(decision: Decision) -> str:
    """"32-true 146 steps/s, bf16-mixed 151"."""
    measured = [f"{option} {rate:g}" for option, rate in decision.steps_per_second.items()]
    return ", ".join([measured[0] + " steps/s", *measured[1:]])


def what_is_timed(model: DictConfig | None, data: DictConfig | None, task: DictConfig | None,
                  trainer: DictConfig) -> str:
    """The groups of a run's config a step's cost depends on, not their seeds or folders, as text: the shape
    a decision is kept for."""
    groups = {"model": model, "data": data, "task": task, "trainer": trainer}
    timed = OmegaConf.to_container(OmegaConf.create(groups))
    return OmegaConf.to_yaml(OmegaConf.create(without_untimed(timed)))


def without_untimed(value):
    """`value` (a config as plain containers) without its NOT_TIMED keys, at any depth."""
    if isinstance(value, dict):
        return {name: without_untimed(item) for name, item in value.items()
                if name not in NOT_TIMED and not str(name).endswith("_seed")}
    if isinstance(value, list):
        return [without_untimed(item) for item in value]
    return value


def recorded_precision(checkpoint: Path) -> str:
    """The precision the run `checkpoint` belongs to trained in, from its config.yaml."""
    path = run_folder.run_config(checkpoint)
    try:
        precision = OmegaConf.load(path).trainer.precision
    except Exception:
        precision = None
    if precision in (None, FASTEST):
        raise CheckpointError(f"trainer.precision=fastest with resume: {path}, which records the precision the run "
                              f"chose, is missing or has no trainer.precision; resume with trainer.precision=32-true "
                              f"or bf16-mixed instead of fastest")
    return precision


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
