"""The one way tests run the bertlab command line — in this process (`run_in_process`: fast, no
interpreter start-up, which costs ~10 s per run on a busy machine), as a child process waited for
(`run_child`: a fresh interpreter, multi-process runs) or started in the background (`start_child`:
to be killed, at a moment of its own with `kill_moment`) — with argument lists for tiny models on the
synthetic data of conftest.py."""

from __future__ import annotations

import hashlib
import logging
import os
import signal
import subprocess
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

# Imported now, so that the log handlers these libraries add bind this session's stderr, not one test's.
import datasets  # noqa: F401
import lightning as L
import lightning.pytorch  # noqa: F401
import pandas as pd
import pytest
import torch

from bertlab import cli
from bertlab.tokenizer import save_tokenizer, train_tokenizer

TINY_MODEL = ["model.hidden_size=32", "model.num_hidden_layers=1", "model.num_attention_heads=2",
              "model.intermediate_size=64"]
QUIET = ["callbacks.progress_bar=null", "+trainer.enable_progress_bar=false", "+trainer.enable_model_summary=false"]
# The recipes pick bf16 where the CPU has it; the tests compare weights to float32 rounding.
FP32 = ["trainer.precision=32-true"]


def pretraining(data_dir: Path, cache_dir: Path, run_dir: Path, *overrides: str) -> list[str]:
    """`train` on the synthetic corpus with a 200-token vocabulary and 32-token sequences."""
    return ["train", "+recipe=mlm_tiny", f"data.source={data_dir / 'corpus'}", "data.extra_train_sources=[]",
            f"+data.cache_dir={cache_dir}", *TINY_MODEL, "tokenizer.vocab_size=200", "data.batch_size=4",
            "data.max_seq_length=32", "trainer.limit_val_batches=2", *FP32, *QUIET, f"hydra.run.dir={run_dir}", *overrides]


def fine_tuning(data_dir: Path, tokenizer: Path, run_dir: Path, *overrides: str) -> list[str]:
    """`fine-tune` from scratch on the synthetic SST-2 with `tokenizer`; with a `model.init_from=…`
    override, from that checkpoint (whose architecture the model size overrides must then leave alone)."""
    from_checkpoint = any(item.startswith("model.init_from=") and item != "model.init_from=null" for item in overrides)
    return ["fine-tune", "+recipe=sst2", "model.init_from=null", f"data.tokenizer={tokenizer}",
            f"data.source={data_dir / 'sst2'}", *([] if from_checkpoint else TINY_MODEL), "data.batch_size=8",
            "data.max_seq_length=32", *FP32, *QUIET, f"hydra.run.dir={run_dir}", *overrides]


@dataclass
class Outcome:
    code: int
    out: str
    err: str

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


@contextmanager
def logging_put_back():
    """Afterwards the root logger has its handlers again and every logger its level: runs in this process
    (Hydra's handlers, `bench` quieting libraries) must not change what the next test logs."""
    root = logging.getLogger()
    handlers = root.handlers[:]
    levels = {name: logger.level for name, logger in [("", root), *logging.Logger.manager.loggerDict.items()]
              if isinstance(logger, logging.Logger)}
    try:
        yield
    finally:
        for handler in root.handlers:
            if handler not in handlers:
                handler.close()
        root.handlers[:] = handlers
        for name, logger in logging.Logger.manager.loggerDict.items():
            if isinstance(logger, logging.Logger):
                logger.setLevel(levels.get(name, logging.NOTSET))
        root.setLevel(levels[""])


def run_in_process(argv: list[str], capsys: pytest.CaptureFixture | None = None) -> Outcome:
    """`python -m bertlab ARGV` in this process; the global state a run changes (deterministic
    algorithms, logging) is put back afterwards. Without `capsys` (in module-scoped fixtures) the
    output stays in pytest's captured output, shown when a test fails."""
    deterministic = torch.are_deterministic_algorithms_enabled()
    if capsys is not None:
        capsys.readouterr()
    try:
        with logging_put_back():
            cli.main(argv)
        code = 0
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else 1
    finally:
        torch.use_deterministic_algorithms(deterministic)
    if capsys is None:
        return Outcome(code, "", "(in pytest's captured output)")
    captured = capsys.readouterr()
    return Outcome(code, captured.out, captured.err)


def child_environment(**extra: str) -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", **extra}


def run_child(argv: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python -m bertlab ARGV` as a child process, which must succeed; its output is returned."""
    result = subprocess.run([sys.executable, "-m", "bertlab", *argv], cwd=cwd, env=env or child_environment(),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"bertlab {' '.join(argv)} failed:\n{result.stdout}\n{result.stderr}"
    return result


def start_child(argv: list[str], log: Path) -> subprocess.Popen:
    """`python -m bertlab ARGV` as a child process, its output in `log`."""
    with log.open("w") as handle:
        return subprocess.Popen([sys.executable, "-m", "bertlab", *argv], stdout=handle, stderr=subprocess.STDOUT,
                                env=child_environment())


class KillAfterCheckpoint(L.Callback):
    """SIGKILLs its own process once the checkpoint of optimizer step `step` is written: at the start of the
    next batch, or `delay` seconds later from a timer thread, at whatever the run is doing then."""

    def __init__(self, step: int, delay: float):
        self.step, self.delay = step, delay

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int) -> None:
        if trainer.global_step != self.step:
            return
        if self.delay > 0:
            threading.Timer(self.delay, os.kill, (os.getpid(), signal.SIGKILL)).start()
        else:
            os.kill(os.getpid(), signal.SIGKILL)


def kill_moment(step: int, delay: float = 0.0) -> list[str]:
    """Overrides that make a run SIGKILL itself `delay` s after its step-`step` checkpoint (KillAfterCheckpoint).
    The run keeps the moment however busy the machine is: a watcher polling the run folder from outside, scheduled
    late, misses checkpoints written tens of ms apart (a tiny fine-tuning steps at ~250 steps/s on 2 cores)."""
    name = "+callbacks.kill_moment"
    return [f"{name}._target_={__name__}.{KillAfterCheckpoint.__qualname__}", f"{name}.step={step}",
            f"{name}.delay={delay}"]


def wait_for_kill(child: subprocess.Popen, log: Path, timeout: float = 900) -> None:
    """Waits for `child`, started with `kill_moment`, and fails the test unless it died of SIGKILL."""
    try:
        child.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
        pytest.fail(f"{log}: still running after {timeout:.0f} s, killed")
    assert child.returncode == -signal.SIGKILL, f"never reached its kill moment (exit {child.returncode}):\n" \
                                                 f"{log.read_text()}"


def sentiment_tokenizer(data_dir: Path, directory: Path) -> Path:
    """A small WordPiece vocabulary of the synthetic SST-2 sentences, saved in `directory`."""
    sentences = pd.read_parquet(data_dir / "sst2" / "train.parquet")["sentence"].tolist()
    save_tokenizer(train_tokenizer(sentences, vocab_size=60), directory)
    return directory


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
