"""Files written whole or not at all: one file (`write_atomically`), and a cache entry — what bertlab derives
from data once and reuses by key (token ids, packed sequences, documents, text lines, trained vocabularies,
transfer sets, teacher outputs and embeddings) — committed (`commit`, `is_committed`).

An entry is a file or a folder (or the shards of a `datasets` map, `<stem>_00000_of_00002.arrow` …)
in the cache folder, and its commit record `<entry>.commit` beside it: the size and SHA-256 of every
file of the entry, written atomically once the entry is whole. An entry is read only while its
record matches its files. A run killed while writing one leaves no record (or one its files do not
match); a file truncated or corrupted on disk since no longer matches its record; either way the
entry is built again, over the old files, and committed anew. Checking reads each file once
(SHA-256 at about 1 GB/s) every time an entry is used.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger("bertlab")
RECORD_SUFFIX = ".commit"
SHARD_PATTERN = "_[0-9][0-9][0-9][0-9][0-9]_of_[0-9][0-9][0-9][0-9][0-9]"  # datasets' suffix_template


def write_atomically(path: Path, write) -> None:
    """Calls `write(temp_path)` on a temporary sibling, then renames it over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(temp)
        # mkstemp creates 0600 and safetensors re-creates the file: set the mode once it is written.
        os.chmod(temp, 0o644)
        with open(temp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def record_path(entry: Path) -> Path:
    return entry.with_name(entry.name + RECORD_SUFFIX)


def entry_files(entry: Path) -> list[Path]:
    """The files of `entry`: the file itself, a folder's files, or a `datasets` map's shards."""
    if entry.is_dir():
        return sorted(path for path in entry.rglob("*") if path.is_file())
    if entry.is_file():
        return [entry]
    return sorted(entry.parent.glob(f"{entry.stem}{SHARD_PATTERN}{entry.suffix}"))


def fingerprint(path: Path) -> list:
    with path.open("rb") as handle:
        return [path.stat().st_size, hashlib.file_digest(handle, "sha256").hexdigest()]


def matches(path: Path, recorded: list) -> bool:
    """Whether `path` has the recorded size and hash; a file of another size is not read."""
    return path.stat().st_size == recorded[0] and fingerprint(path) == recorded


def is_committed(entry: Path) -> bool:
    """Whether `entry` is whole: its commit record lists files that are all there, unchanged."""
    record = record_path(entry)
    if not record.is_file():
        if entry_files(entry):
            log.warning("cache entry %s has no commit record (a run stopped while writing it?): building it again",
                        entry)
        return False
    try:
        listed = json.loads(record.read_text())["files"]
        whole = bool(listed) and all(matches(entry.parent / name, value) for name, value in listed.items())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        whole = False
    if not whole:
        log.warning("cache entry %s does not match its commit record (truncated or corrupted): building it again",
                    entry)
    return whole


def commit(entry: Path, files: Iterable[str | Path] | None = None) -> None:
    """Records `entry` as whole: `files` (default: `entry_files`) with their sizes and hashes."""
    paths = [Path(path) for path in files] if files is not None else entry_files(entry)
    listed = {str(path.relative_to(entry.parent)): fingerprint(path) for path in paths}
    text = json.dumps({"files": listed}, indent=1) + "\n"
    write_atomically(record_path(entry), lambda temp: Path(temp).write_text(text))
