"""The run folder: what a run writes where, resuming from a run's checkpoints, and the stable
`latest` pointer to a recipe's last finished run.

    outputs/<name>/<timestamp>/     config.yaml, metrics.csv/.json/.png, timing.json, <name>.log, .hydra/
        hf_model/                   the Hugging Face directory (config.json, model.safetensors, tokenizer)
        lightning_checkpoints/      Lightning's step=N.ckpt and last.ckpt, for resume=
    outputs/<name>/latest           → the newest finished run
"""

from __future__ import annotations

import csv
import datetime
import json
import logging
import os
import re
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.loggers import CSVLogger

from bertlab.atomic_files import write_atomically
from bertlab.errors import CheckpointError
from bertlab.lit.run_artifacts import SAVED_BY, RunCheckpoint
from bertlab.metrics import METRICS_CSV

log = logging.getLogger("bertlab")
HF_MODEL = "hf_model"
CHECKPOINTS = RunCheckpoint.FOLDER
LATEST = "latest"
TIMESTAMP_FORMAT = "%Y-%m-%d_%H-%M-%S"  # <timestamp>: conf/hydra/default.yaml's ${now:…}
TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}_\d{2}-\d{2}-\d{2}")
TIMING = "timing.json"
CONFIG = "config.yaml"


def timestamped_folder(command: str) -> Path:
    """outputs/<command>/<timestamp>, where Hydra would put a run, for the commands that run outside it
    (`bench`, `compare`)."""
    return Path(os.environ.get("BERTLAB_OUTPUT_DIR", "outputs")) / command / datetime.datetime.now().strftime(
        TIMESTAMP_FORMAT)


def holds_results(run_dir: Path) -> bool:
    """Whether a run got as far as its resolved config (written once every check has passed and the data is
    ready), metrics, checkpoints or an export; a run refused before that has only Hydra's .hydra/ and log."""
    return any((run_dir / name).exists() for name in (CONFIG, METRICS_CSV, CHECKPOINTS, HF_MODEL))


def write_config(config_yaml: str, run_dir: Path, comment: str | None = None) -> None:
    """`config.yaml`: the run's resolved config, as YAML, once the run has passed every check and prepared its
    data. `comment` (how `trainer.precision: fastest` chose) heads it as a YAML comment; a rewrite without one
    (a budget's re-plan) keeps the one the file has."""
    if is_rank_zero():
        path = run_dir / CONFIG
        header = "" if comment is None else f"# {comment}\n"
        if comment is None and path.exists():
            first_line = path.read_text().partition("\n")[0]
            header = f"{first_line}\n" if first_line.startswith("# ") else ""
        config_text = header + config_yaml
        write_atomically(path, lambda temp: Path(temp).write_text(config_text))


def run_config(checkpoint: Path) -> Path:
    """The config.yaml of the run that `checkpoint` (in its lightning_checkpoints/) belongs to."""
    return checkpoint.parent.parent / CONFIG


def write_timing(run_dir: Path, minutes: float) -> None:
    """timing.json: the run's wall time, for `bertlab compare`."""
    text = json.dumps({"wall_time_min": round(minutes, 2)}) + "\n"
    write_atomically(run_dir / TIMING, lambda temp: Path(temp).write_text(text))


def resume_path(resume: str | None, run_dir: Path) -> str | None:
    """`resume`: null → fresh start; `auto` → this run folder's newest checkpoint if there is one;
    a run folder or a `.ckpt` file → that checkpoint (an error if it does not exist). The
    checkpoint is checked readable here, before any work starts."""
    if resume in (None, "", False):
        return None
    if resume == "auto":
        path = newest_checkpoint(run_dir / CHECKPOINTS)
        if path is None:
            log.info("resume=auto: no checkpoint in %s yet, starting fresh", run_dir)
            return None
    else:
        path = Path(resume)
        if path.is_dir():
            path = path / CHECKPOINTS / RunCheckpoint.LAST
        if not path.is_file():
            raise CheckpointError(f"resume={resume!r}: no checkpoint at {path}; expected a Lightning .ckpt "
                                  f"file or a run folder containing {CHECKPOINTS}/{RunCheckpoint.LAST}")
    checkpoint_step(path)  # readable, or a one-line CheckpointError now
    return str(path)


def newest_checkpoint(directory: Path) -> Path | None:
    """The checkpoint of the highest step in `directory`, last.ckpt on a tie. A run killed between
    writing step=N.ckpt and last.ckpt has its newest state in step=N.ckpt."""
    candidates = sorted(directory.glob("*.ckpt"), key=lambda path: path.name != RunCheckpoint.LAST)
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


def checkpoint_hyperparameters(path: Path) -> dict:
    """The hyperparameters a LightningModule saved into the checkpoint (read without the weights)."""
    return dict(torch.load(path, map_location="cpu", mmap=True, weights_only=True).get("hyper_parameters") or {})


def checkpoint_task(path: Path) -> str:
    """The LightningModule that saved the checkpoint (bertlab.lit.run_artifacts.RecordsTask), read without the
    weights; for a checkpoint saved before modules recorded it, told by the names of its hyperparameters."""
    checkpoint = torch.load(path, map_location="cpu", mmap=True, weights_only=True)
    if SAVED_BY in checkpoint:
        return checkpoint[SAVED_BY]
    saved = checkpoint.get("hyper_parameters") or {}
    return ("PretrainingModule" if "mlm_probability" in saved else "DistillationModule" if "alpha" in saved
            else "EmbeddingDistillationModule" if "teacher" in saved else "ClassificationModule")


def check_resume_checkpoint_fits(module: L.LightningModule, checkpoint: str) -> None:
    """Every tensor of the checkpoint has the shape of the module's: a checkpoint of another model
    size or vocabulary is refused before training, not in the middle of Lightning's restore."""
    saved = torch.load(checkpoint, map_location="cpu", mmap=True, weights_only=True)["state_dict"]
    own = module.state_dict()
    differing = [f"{key}: checkpoint {tuple(tensor.shape)}, run {tuple(own[key].shape) if key in own else 'absent'}"
                 for key, tensor in saved.items() if key not in own or own[key].shape != tensor.shape]
    if differing:
        raise CheckpointError(f"{checkpoint}: {len(differing)} tensor(s) do not fit this run's model, e.g. "
                              f"{differing[0]}; it was saved for another model size or vocabulary")


def restore_metrics(trainer: L.Trainer, checkpoint: Path, global_step: int) -> None:
    """Lightning's CSVLogger deletes an existing metrics.csv. On resume, the rows logged before the
    checkpoint (in the metrics.csv of the run folder the checkpoint belongs to) are handed back to
    it, and rows logged after the checkpoint by the interrupted run are dropped: the resumed run logs
    them again, so metrics.csv ends as if the run had never stopped. `global_step`: the checkpoint's."""
    logger = next((logger for logger in trainer.loggers if isinstance(logger, CSVLogger)), None)
    old_metrics = checkpoint.parent.parent / METRICS_CSV
    if logger is None or not is_rank_zero() or not old_metrics.is_file():
        return
    with old_metrics.open(newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if row.get("step") and int(row["step"]) < global_step]
    logger.experiment.metrics = rows + logger.experiment.metrics  # creating the experiment deletes the file


def point_latest(run_dir: Path) -> Path:
    """outputs/<name>/latest → this run (a relative symlink, replaced atomically)."""
    link = run_dir.parent / LATEST
    temp = run_dir.parent / f".{LATEST}.{os.getpid()}"
    temp.unlink(missing_ok=True)
    temp.symlink_to(run_dir.name, target_is_directory=True)
    os.replace(temp, link)
    return link


def is_rank_zero() -> bool:
    """True in the first process of a run. From the environment, before any process group exists:
    Lightning's launcher (LOCAL_RANK, NODE_RANK), torchrun (RANK) and SLURM (SLURM_PROCID) set these
    for every process they start."""
    return all(int(os.environ.get(name, 0)) == 0 for name in ("RANK", "LOCAL_RANK", "NODE_RANK", "SLURM_PROCID"))
