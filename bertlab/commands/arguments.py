"""The argument parser of the commands that take ordinary options: its errors are `UsageError`s,
reported like every other error as one `bertlab: error:` line (argparse prints its usage block)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import NoReturn

from bertlab.checkpoint.dispatch import CONFIG_NAME, WEIGHTS_NAME
from bertlab.checkpoint.fitting import ALLOW_FLAG
from bertlab.errors import UsageError
from bertlab.training.checks.environment import check_holds_nothing, check_output_folder
from bertlab.training.run.run_folder import HF_MODEL


class ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def checkpoint_folder(text: str) -> str:
    """An argparse type: a bertlab run folder stands for its hf_model/ export; any other path is kept
    (a Hugging Face folder, or a file where the command takes one) for the loader to check."""
    export = Path(text) / HF_MODEL
    return str(export) if export.is_dir() else text


def output_file(*suffixes: str) -> Callable[[str], Path]:
    """An argparse type: a file name with one of `suffixes` in an existing, writable folder."""

    def check(text: str) -> Path:
        path = Path(text)
        if path.suffix not in suffixes:
            raise argparse.ArgumentTypeError(f"{text}: expected a {' or '.join(suffixes)} file name")
        folder = path.parent
        if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
            problem = "is not a writable folder" if folder.is_dir() else "does not exist"
            raise argparse.ArgumentTypeError(f"{text}: its folder {folder} {problem}")
        return path

    return check


def add_allow_reinitialised(parser: argparse.ArgumentParser) -> None:
    """The flag that accepts a checkpoint whose encoder tensors do not fit (bertlab.checkpoint.fitting)."""
    parser.add_argument(ALLOW_FLAG, action="store_true",
                        help="use a checkpoint even where encoder tensors are missing, renamed, extra or of "
                             "another shape (they are then random)")


OVERWRITE_FLAG = "--overwrite"


def add_overwrite(parser: argparse.ArgumentParser) -> None:
    """The flag that lets a command replace the model or results already in its output (`check_output`)."""
    parser.add_argument(OVERWRITE_FLAG, action="store_true",
                        help="replace the model or results already in the output folder or file")


def check_output(option: str, path: Path, overwrite: bool, writes: Sequence[str] | None = None) -> None:
    """A command's output given as `option` (e.g. --output DIR) can be created and holds no work, unless
    `overwrite`. `writes`: the files the command puts into the folder `path`, of which none may exist yet;
    None: `path` receives a whole model export (bertlab.checkpoint.dispatch.export_pretrained), which replaces the
    folder, so it must be empty; `path` is a file the command writes when `writes` is ()."""
    check_output_folder(path.parent if writes == () else path, f"with {option}")  # a file where a folder goes, too
    if overwrite or not path.exists():
        return
    if writes == ():
        held = [path.name]
    elif writes is None:
        model = [name for name in (CONFIG_NAME, WEIGHTS_NAME) if (path / name).exists()]
        held = model or sorted(child.name for child in path.iterdir())[:3]
    else:
        held = [name for name in writes if (path / name).exists()]
    what = "a model" if writes is None and (path / CONFIG_NAME).exists() else "results"
    check_holds_nothing(f"{option} {path}", held, what, "file" if writes == () else "folder",
                        f"add {OVERWRITE_FLAG} to replace {'it' if writes == () else 'them'}")


# The labelled data options' values where neither the command line nor the checkpoint's run gives one.
LABELLED_DATA_DEFAULTS = {"split": "validation", "text_column": "sentence", "text_pair_column": None,
                          "label_column": "label", "max_seq_length": 128}
# The keys of a run's `data` group that hold those options, where the name differs.
RUN_DATA_KEYS = {"split": "validation_split"}


def add_labelled_data_options(parser: argparse.ArgumentParser, *, data_required: bool = True) -> None:
    """--data, --split and the column and length options of a labelled classification dataset."""
    parser.add_argument("--data", required=data_required,
                        help="a hub id (stanfordnlp/sst2: BERTLAB_DATA_DIR's copy where it holds one), a folder of "
                             "split files, or one file" + ("" if data_required else
                                                           " (default: the data the checkpoint's run validated on)"))
    parser.add_argument("--split", help="the split to use (a single file is 'train'; default: validation)")
    parser.add_argument("--text-column", help="default: sentence")
    parser.add_argument("--text-pair-column", help="the second text of a pair task (default: none)")
    parser.add_argument("--label-column", help="default: label")
    parser.add_argument("--max-seq-length", type=positive_int, help="default: 128")


def labelled_data_options(args: argparse.Namespace, run_data: Mapping | None = None) -> dict:
    """The keyword arguments of `bertlab.inference.load_labelled_split` from those options; one the command
    line leaves out is that of `run_data` (a run's `data` group) when given, else the default."""
    recorded = {key: run_data.get(RUN_DATA_KEYS.get(key, key), default) for key, default in
                LABELLED_DATA_DEFAULTS.items()} if run_data is not None else LABELLED_DATA_DEFAULTS
    return {key: value if (value := getattr(args, key)) is not None else recorded[key] for key in LABELLED_DATA_DEFAULTS}
