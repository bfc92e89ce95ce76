"""The argument parser of the commands that take ordinary options: its errors are `UsageError`s,
reported like every other error as one `bertlab: error:` line (argparse prints its usage block)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from bertlab.errors import UsageError


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
