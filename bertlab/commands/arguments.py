"""The argument parser of the commands that take ordinary options: its errors are `UsageError`s,
reported like every other error as one `bertlab: error:` line (argparse prints its usage block)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from bertlab.errors import UsageError
from bertlab.training.run_folder import HF_MODEL


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


def add_labelled_data_options(parser: argparse.ArgumentParser) -> None:
    """--data, --split and the column and length options of a labelled classification dataset."""
    parser.add_argument("--data", required=True,
                        help="a hub id (stanfordnlp/sst2), a folder of split files, or one file")
    parser.add_argument("--split", default="validation", help="the split to use (a single file is 'train')")
    parser.add_argument("--text-column", default="sentence")
    parser.add_argument("--text-pair-column", default=None)
    parser.add_argument("--label-column", default="label")
    parser.add_argument("--max-seq-length", type=positive_int, default=128)


def labelled_data_options(args: argparse.Namespace) -> dict:
    """The keyword arguments of `bertlab.inference.load_labelled_split` from those options."""
    return {"split": args.split, "text_column": args.text_column, "text_pair_column": args.text_pair_column,
            "label_column": args.label_column, "max_seq_length": args.max_seq_length}
