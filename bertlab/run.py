"""What every training command shares: the run folder, the Trainer with its loggers and callbacks,
resuming, and the stable `latest` pointer to a recipe's last finished run.

Exact resume: a run restarted from a checkpoint ends with the same weights and metrics.csv as one
never interrupted. Lightning restores the model, optimizer, scheduler and loop counters; the
datamodules restore their position in the epoch (bertlab.data.sampling.ResumableTrainingOrder);
masking is a function of (seed, step); `SeedEveryStep` makes every other random draw one too;
`restore_metrics` puts back the metrics rows written before the checkpoint; `AtomicCheckpointIO`
means that a checkpoint on disk is always whole.
"""

from __future__ import annotations

import csv
import logging
import os
import random
import warnings
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.plugins.io import TorchCheckpointIO
from omegaconf import DictConfig, OmegaConf

from bertlab.checkpoint import write_atomically
from bertlab.config import RUNTIME_SWITCHES, BertConfig
from bertlab.errors import BertlabError, CheckpointError
from bertlab.hydra_app import is_rank_zero

log = logging.getLogger("bertlab")
LATEST = "latest"
LAST_CHECKPOINT = "checkpoints/last.ckpt"


def prepare_run_dir(cfg: DictConfig) -> Path:
    """The Hydra run folder, checked writable, with the resolved config in `config.yaml`."""
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    probe = run_dir / ".write_test"
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        raise BertlabError(f"output folder {run_dir} is not writable ({error.strerror}); "
                           f"choose another with hydra.run.dir=… or paths.output_dir=…") from None
    if is_rank_zero():
        (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    return run_dir


def model_config(model_cfg: DictConfig, **values) -> BertConfig:
    """BertConfig from the `model` group (minus `init_from`), plus values only known at run time."""
    fields = OmegaConf.to_container(model_cfg, resolve=True)
    fields.pop("init_from", None)
    fields.update(values)
    return BertConfig.from_dict(fields)


def build_trainer(cfg: DictConfig, extra_callbacks: list[L.Callback] = (), resume_from: str | None = None) -> L.Trainer:
    """The Trainer of `cfg.trainer` with the `callbacks` and `logger` groups; `resume_from` (see
    `resume_path`) brings back the metrics rows logged before that checkpoint."""
    callbacks = [instantiate(spec) for spec in cfg.get("callbacks", {}).values() if spec is not None]
    loggers = [instantiate(spec) for spec in cfg.get("logger", {}).values() if spec is not None]
    trainer = instantiate(cfg.trainer, callbacks=[*callbacks, *extra_callbacks], logger=loggers)
    if resume_from is not None:
        restore_metrics(trainer, Path(resume_from))
        # Lightning checks only the dataloaders for state; bertlab's datamodules hold it.
        warnings.filterwarnings("ignore", message="You're resuming from a checkpoint that ended before the epoch ended")
    return trainer


def restore_metrics(trainer: L.Trainer, checkpoint: Path) -> None:
    """Lightning's CSVLogger deletes an existing metrics.csv. On resume, the rows logged before the
    checkpoint (in the metrics.csv of the run folder the checkpoint belongs to) are handed back to
    it, and rows logged after the checkpoint by the interrupted run are dropped: the resumed run logs
    them again, so metrics.csv ends as if the run had never stopped."""
    logger = next((logger for logger in trainer.loggers if isinstance(logger, CSVLogger)), None)
    old_metrics = checkpoint.parent.parent / "metrics.csv"
    if logger is None or not is_rank_zero() or not old_metrics.is_file():
        return
    global_step = checkpoint_step(checkpoint)
    with old_metrics.open(newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if row.get("step") and int(row["step"]) < global_step]
    logger.experiment.metrics = rows + logger.experiment.metrics  # creating the experiment deletes the file


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning checkpoints written to a temporary file beside their final name, flushed to disk and
    renamed over it: a save interrupted at any moment (SIGKILL, a full disk) leaves the previous file
    whole. (Lightning's own save stages in the system temp folder, which becomes a copy, not a
    rename, when that folder is on another file system, and does not fsync.)"""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | os.PathLike, storage_options: Any = None) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options, got {storage_options!r}")
        write_atomically(Path(path), lambda temp: torch.save(checkpoint, temp))


class RunCheckpoint(ModelCheckpoint):
    """Lightning's ModelCheckpoint (every validation, the newest `save_top_k` kept, plus last.ckpt),
    and last.ckpt also when training ends between two validations, so that a finished run can
    always be resumed or extended from its final state. The loggers are flushed before each save."""

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.save_last and not self._should_skip_saving_checkpoint(trainer):
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        # `restore_metrics` takes the rows logged before a checkpoint from metrics.csv: they must be
        # on disk before the checkpoint is.
        for logger in trainer.loggers:
            logger.save()


class SeedEveryStep(L.Callback):
    """Seeds Python's, NumPy's and torch's global generators before every training batch from
    (seed, rank, step, batch index). Dropout and any other draw in a step then depend only on the
    step's place in the run, not on what ran before it in this process (validation, dataloader
    start-up, checkpoint loading), so a resumed run draws what the uninterrupted one drew, with no
    generator states in the checkpoint."""

    def __init__(self, seed: int):
        self.seed = seed

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        state = np.random.SeedSequence([self.seed, trainer.global_rank, trainer.global_step, batch_idx])
        seed = int(state.generate_state(1, dtype=np.uint32)[0])
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)


def resume_path(resume: str | None, run_dir: Path) -> str | None:
    """`resume`: null → fresh start; `auto` → this run folder's newest checkpoint if there is one;
    a run folder or a `.ckpt` file → that checkpoint (an error if it does not exist). The
    checkpoint is checked readable here, before any work starts."""
    if resume in (None, "", False):
        return None
    if resume == "auto":
        path = newest_checkpoint(run_dir / Path(LAST_CHECKPOINT).parent)
        if path is None:
            log.info("resume=auto: no checkpoint in %s yet, starting fresh", run_dir)
            return None
    else:
        path = Path(resume)
        if path.is_dir():
            path = path / LAST_CHECKPOINT
        if not path.is_file():
            raise CheckpointError(f"resume={resume!r}: no checkpoint at {path}; expected a Lightning .ckpt "
                                  f"file or a run folder containing {LAST_CHECKPOINT}")
    step = checkpoint_step(path)
    log.info("Resuming from %s (step %d)", path, step)
    return str(path)


def newest_checkpoint(directory: Path) -> Path | None:
    """The checkpoint of the highest step in `directory`, last.ckpt on a tie. A run killed between
    writing step=N.ckpt and last.ckpt has its newest state in step=N.ckpt."""
    candidates = sorted(directory.glob("*.ckpt"), key=lambda path: path.name != Path(LAST_CHECKPOINT).name)
    return max(candidates, key=checkpoint_step, default=None)


def checkpoint_step(path: Path) -> int:
    """The global step a Lightning checkpoint was saved at; CheckpointError if it cannot be read."""
    try:
        # weights_only: Lightning loads it so too; mmap: no copy of the weights to read one number.
        return int(torch.load(path, map_location="cpu", mmap=True, weights_only=True)["global_step"])
    except Exception as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise CheckpointError(f"{path}: not a readable Lightning checkpoint, truncated or corrupted? "
                              f"({reason})") from None


def point_latest(run_dir: Path) -> Path:
    """outputs/<name>/latest → this run (a relative symlink, replaced atomically)."""
    link = run_dir.parent / LATEST
    temp = run_dir.parent / f".{LATEST}.{os.getpid()}"
    temp.unlink(missing_ok=True)
    temp.symlink_to(run_dir.name, target_is_directory=True)
    os.replace(temp, link)
    return link


def model_overrides(model_cfg: DictConfig) -> dict:
    """The `model` group's run-time switches, applied on top of a loaded checkpoint's config.json."""
    return {key: model_cfg[key] for key in RUNTIME_SWITCHES if key in model_cfg}


def read_metrics(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """metrics.csv → {metric: [(step, value), …]} for every column that has values."""
    path = run_dir / "metrics.csv"
    series: dict[str, list[tuple[int, float]]] = {}
    if not path.is_file():
        return series
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            step = int(float(row.get("step") or 0))
            for key, value in row.items():
                if key not in ("step", "epoch") and value not in (None, ""):
                    series.setdefault(key, []).append((step, float(value)))
    return series


def summary(run_dir: Path, minutes: float, monitor: str | None = None, mode: str = "max") -> str:
    """A few lines for the terminal: first → last value of each validation metric, wall time, and
    the best value of `monitor` (the checkpoint a fine-tuning run exports)."""
    lines = [f"Run folder: {run_dir}", f"Wall time: {minutes:.1f} min"]
    metrics = read_metrics(run_dir)
    for key, values in sorted(metrics.items()):
        if key.startswith("val/") or key.endswith("tokens_per_sec"):
            (first_step, first), (last_step, last) = values[0], values[-1]
            lines.append(f"{key}: {first:.4g} (step {first_step}) → {last:.4g} (step {last_step})")
    if metrics.get(monitor):
        pick = max if mode == "max" else min
        step, value = pick(metrics[monitor], key=lambda point: point[1])
        lines.append(f"best {monitor}: {value:.4g} (step {step}), the exported checkpoint")
    return "\n".join(lines)


def check_vocabulary(tokenizer, config: BertConfig, tokenizer_source: str) -> None:
    """A tokenizer whose ids do not index the model's embedding rows would train on garbage."""
    if tokenizer.get_vocab_size() != config.vocab_size:
        raise CheckpointError(
            f"tokenizer ({tokenizer_source}) has {tokenizer.get_vocab_size()} tokens but the model's "
            f"embeddings have {config.vocab_size} rows; use the checkpoint's own tokenizer")
