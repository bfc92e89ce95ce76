"""`trainer.precision: fastest`: the run times its candidate precisions on this machine, with its own
model and data, and trains in the faster. Having native bf16 decides nothing for a small model:
autocast's casts can cost more than the narrower matmuls save (BERT-Tiny trains at 7.04 steps/s in
32-true and 4.08 in bf16-mixed on a 2-core AVX512-BF16 Xeon).

The candidates are 32-true and, where the device computes bf16 natively (a CPU with AVX512-BF16 or
AMX, a CUDA GPU of compute capability 8.0 or more), bf16-mixed; GPUs are timed too, since a small
model's steps are bound by kernel launches, which autocast adds to. With one candidate nothing is
timed. Each candidate is timed in trials (bertlab.training.trial) of the steps alone, which leave the
run's module, data order and random generators as they were: ROUNDS rounds, the candidates in turn,
each candidate's fastest trial counting (as timeit's repeat). One trial of a small model is half a
second, and the first trials of a process run slow: with one trial each, the three seeds of a GLUE task
chose 32-true, bf16-mixed, bf16-mixed. bf16-mixed must also be MARGIN faster than 32-true, so near ties
keep the exact precision. Timings still vary by a tenth from one run to the next, so a choice near the
margin could differ between the seeds of a sweep: the jobs of one process (a `-m` sweep, the GLUE suite)
with the same model, data, task and trainer keep the first one's choice, and their seeds stay comparable.
Under data parallelism every process takes the timings of the first, so all choose alike.

The choice comes before a time budget's calibration (bertlab.training.budget), which then measures the
chosen precision; like preparing the data, it is outside the budget. config.yaml records the chosen
precision: that config repeats the run bit for bit without timing. A resumed run keeps the precision
of the config.yaml of the run it resumes.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import lightning as L
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from bertlab.errors import CheckpointError
from bertlab.training import run_folder, trial

log = logging.getLogger("bertlab")
FASTEST = "fastest"
EXACT = "32-true"  # every device's candidate, which bf16-mixed must beat by MARGIN
ROUNDS = 3
MARGIN = 1.05  # how much faster than 32-true bf16-mixed must step to be chosen
chosen_in_this_process: dict[str, str] = {}  # the choice for a run's model, data, task, trainer and device


def native_bf16(device: torch.device) -> bool:
    """Whether `device` computes bf16 natively: a CPU with AVX512-BF16 (every CPU with AMX has it), a CUDA GPU of
    compute capability 8.0 or more. Elsewhere bf16 is emulated, slower than float32."""
    if device.type == "cpu":
        return torch.cpu._is_avx512_bf16_supported()
    return device.type == "cuda" and torch.cuda.is_bf16_supported(including_emulation=False)


def training_device(cfg: DictConfig) -> torch.device:
    """The device Lightning trains `cfg.trainer` on, from a throwaway Trainer (in 32-true: the precision is
    what is being chosen)."""
    return instantiate(cfg.trainer, precision=EXACT, callbacks=[], logger=False).strategy.root_device


def candidates(device: torch.device) -> list[str]:
    return [EXACT, "bf16-mixed"] if native_bf16(device) else [EXACT]


def choose(cfg: DictConfig, device: torch.device, module: L.LightningModule, datamodule: L.LightningDataModule,
           run_dir: Path, checkpoint: str | None) -> None:
    """Sets `cfg.trainer.precision` from `fastest`: the faster candidate on `device`, or on resume the
    precision of the resumed run."""
    if checkpoint is not None:
        chosen = recorded_precision(Path(checkpoint))
        log.info("trainer.precision=fastest: resuming, keeping trainer.precision=%s of the resumed run", chosen)
    elif len(options := candidates(device)) == 1:
        chosen = options[0]
        log.info("trainer.precision=fastest: %s (no native bf16 on this %s, nothing to time)", chosen, device.type)
    elif (chosen := chosen_in_this_process.get(key := what_is_timed(cfg, device))) is not None:
        log.info("trainer.precision=fastest: %s, as chosen by this sweep's first job with this model, data, task "
                 "and trainer", chosen)
    else:
        seconds = dict.fromkeys(options, math.inf)
        for _ in range(ROUNDS):
            for option in options:
                timing = trial.time_steps(cfg, module, datamodule, run_dir, steps_only=True, precision=option)
                seconds[option] = min(seconds[option], timing.step_seconds)
        chosen = min(options, key=lambda option: seconds[option] * (1.0 if option == EXACT else MARGIN))
        others = "; ".join(f"{option} {1 / seconds[option]:.3g}" for option in options if option != chosen)
        log.info("trainer.precision=fastest: %s (%.3g steps/s; %s)", chosen, 1 / seconds[chosen], others)
        chosen_in_this_process[key] = chosen
    cfg.trainer.precision = chosen


def what_is_timed(cfg: DictConfig, device: torch.device) -> str:
    """The parts of `cfg` a step's cost depends on (not the seed, the rates or the output folders), as text."""
    timed = {group: cfg.get(group) for group in ("model", "data", "task", "trainer")}
    return f"{device} {OmegaConf.to_yaml(OmegaConf.create(timed))}"


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
