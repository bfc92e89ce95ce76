"""The machine a benchmark runs on: its device, its datasheet peak, the description that heads the report, and
the libraries the benchmark needs and quiets."""

from __future__ import annotations

import datetime
import importlib
import logging
import os
import platform
import shlex
import warnings
from pathlib import Path

import torch

from bertlab.errors import BertlabError
from bertlab.lit.throughput import dense_bf16_peak_flops


def require_dev_extra(module: str):
    try:
        return importlib.import_module(module)
    except ImportError:
        raise BertlabError(f"the benchmark needs {module}, part of the dev extra: pip install -e \".[dev]\"") from None


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise BertlabError("--device cuda: torch sees no CUDA device here; use --device cpu or auto")
    return torch.device(name)


def datasheet_peaks(device: torch.device, peak_tflops: float | None) -> dict[str, float]:
    """{"bf16": FLOP/s} from --peak-tflops or the device's name; {} where neither gives one."""
    peak = None if peak_tflops is None else peak_tflops * 1e12
    if peak is None and device.type == "cuda":
        peak = dense_bf16_peak_flops(torch.cuda.get_device_name(device))
    return {} if peak is None else {"bf16": peak}


def machine_info(device: torch.device, threads: int, argv: list[str], allocator: str) -> dict[str, str]:
    import lightning
    import transformers
    processor = platform.processor()
    if Path("/proc/cpuinfo").is_file():
        names = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")]
        processor = names[0] if names else processor
    info = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
            "command": "python -m bertlab bench " + shlex.join(argv),
            "cpu": f"{processor} ({os.cpu_count()} cores visible, {threads} torch threads)",
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "versions": f"torch {torch.__version__}, transformers {transformers.__version__}, "
                        f"lightning {lightning.__version__}, Python {platform.python_version()}",
            "allocator": allocator}
    if hasattr(os, "getloadavg"):
        info["load average at start (1 min)"] = f"{os.getloadavg()[0]:.2f}"
    return info


def quiet_libraries() -> None:
    """The benchmark configures Lightning's Trainers and loads checkpoints without their heads on
    purpose: their notices about it would bury the results."""
    import datasets
    import transformers
    transformers.logging.set_verbosity_error()
    datasets.disable_progress_bars()
    for name in ("lightning.pytorch", "lightning.pytorch.utilities.rank_zero", "lightning.fabric", "bertlab"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module=r"lightning\.")
