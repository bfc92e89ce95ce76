"""What every training command shares: the run folder, the Trainer with its loggers and callbacks,
resuming, and the stable `latest` pointer to a recipe's last finished run."""

from __future__ import annotations

import csv
import logging
import os
from pathlib import Path

import lightning as L
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from bertlab.config import RUNTIME_SWITCHES, BertConfig
from bertlab.errors import BertlabError, CheckpointError, ConfigError

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
    if _is_rank_zero():
        (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    return run_dir


def _is_rank_zero() -> bool:
    return int(os.environ.get("LOCAL_RANK", 0)) == 0 and int(os.environ.get("NODE_RANK", 0)) == 0


def model_config(model_cfg: DictConfig, **values) -> BertConfig:
    """BertConfig from the `model` group (minus `init_from`), plus values only known at run time."""
    fields = OmegaConf.to_container(model_cfg, resolve=True)
    fields.pop("init_from", None)
    fields.update(values)
    return BertConfig.from_dict(fields)


def build_trainer(cfg: DictConfig, extra_callbacks: list[L.Callback] = ()) -> L.Trainer:
    callbacks = [instantiate(spec) for spec in cfg.get("callbacks", {}).values() if spec is not None]
    loggers = [instantiate(spec) for spec in cfg.get("logger", {}).values() if spec is not None]
    try:
        return instantiate(cfg.trainer, callbacks=[*callbacks, *extra_callbacks], logger=loggers)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"trainer: {error}") from None


def resume_path(resume: str | None, run_dir: Path) -> str | None:
    """`resume`: null → fresh start; `auto` → this run folder's last checkpoint if there is one;
    a run folder or a `.ckpt` file → that checkpoint (an error if it does not exist)."""
    if resume in (None, "", False):
        return None
    if resume == "auto":
        last = run_dir / LAST_CHECKPOINT
        if last.is_file():
            log.info("Resuming from %s", last)
            return str(last)
        log.info("resume=auto: no checkpoint in %s yet, starting fresh", run_dir)
        return None
    path = Path(resume)
    if path.is_dir():
        path = path / LAST_CHECKPOINT
    if not path.is_file():
        raise CheckpointError(f"resume={resume!r}: no checkpoint at {path}; expected a Lightning .ckpt "
                              f"file or a run folder containing {LAST_CHECKPOINT}")
    return str(path)


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


def summary(run_dir: Path, minutes: float) -> str:
    """A few lines for the terminal: first → last value of each validation metric, wall time."""
    lines = [f"Run folder: {run_dir}", f"Wall time: {minutes:.1f} min"]
    for key, values in sorted(read_metrics(run_dir).items()):
        if key.startswith("val/") or key.endswith("tokens_per_sec"):
            (first_step, first), (last_step, last) = values[0], values[-1]
            lines.append(f"{key}: {first:.4g} (step {first_step}) → {last:.4g} (step {last_step})")
    return "\n".join(lines)
