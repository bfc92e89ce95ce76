"""Where datasets come from: local folders and files, saved `datasets` folders, or the Hugging Face hub."""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import datasets
import pyarrow.parquet as pq
from datasets.arrow_writer import ArrowWriter
from datasets.fingerprint import Hasher

from bertlab import atomic_files
from bertlab.errors import DataError

logger = logging.getLogger(__name__)

# Builder of the `datasets` library for each supported file suffix.
FILE_FORMATS = {".txt": "text", ".parquet": "parquet", ".json": "json", ".jsonl": "json", ".csv": "csv"}
# File name stems that name each split (as `datasets` infers them): train.parquet, dev-00000.jsonl, ...
SPLIT_NAMES = {"train": ("train",), "validation": ("validation", "valid", "val", "dev"), "test": ("test",)}
_SAVED_DATASET_MARKERS = ("dataset_dict.json", "state.json")



def content_hash(path: str | Path) -> str:
    """A SHA-256 of a file, or of a folder's files (a checkpoint, a dataset) by name and content: what a
    cache key takes from the files its cached data was made from."""
    path = Path(path)
    digest = hashlib.sha256()
    files = sorted(file for file in path.rglob("*") if file.is_file()) if path.is_dir() else [path]
    for file in files:
        digest.update(str(file.relative_to(path) if path.is_dir() else file.name).encode())
        with open(file, "rb") as content:
            for chunk in iter(lambda: content.read(1 << 24), b""):
                digest.update(chunk)
    return digest.hexdigest()


def cache_folder(cache_dir: str | Path | None) -> Path:
    """Where bertlab keeps what it derives from data (tokenized corpora, tokenizers, a distillation's
    transfer set and teacher outputs): `cache_dir`, by default the `datasets` cache folder + /bertlab."""
    return Path(cache_dir) if cache_dir else Path(datasets.config.HF_DATASETS_CACHE) / "bertlab"

def load_dataset_source(
    source: str, *, what: str = "dataset", cache_dir: str | Path | None = None
) -> datasets.DatasetDict:
    """Load `source` as splits: a local folder, a local file (split "train") or a hub id
    ("owner/name", or "owner/name:config" for datasets with several configurations).

    A folder holds split files (train/validation/test, see SPLIT_NAMES, as .txt/.parquet/.json/
    .jsonl/.csv) or is a folder written by `save_to_disk`. Text files give one row per line in a
    column "text"; empty lines are kept, lines that are not valid UTF-8 are skipped with a warning.
    `what` names the dataset in error messages; `cache_dir` is where `datasets` caches what it builds.
    """
    path = Path(source).expanduser()
    if path.is_dir():
        splits = _load_folder(path, what, cache_dir)
    elif path.is_file():
        splits = datasets.DatasetDict({"train": _load_files([path], what, cache_dir)})
    elif _looks_like_path(source):
        raise DataError(f"{what} {source!r} does not exist. {_ways_out()}")
    else:
        splits = _load_from_hub(source, what, cache_dir)
    for split, dataset in splits.items():
        if len(dataset) == 0:
            raise DataError(f"{what} {source!r}: split {split!r} has no rows")
    return splits


def require_columns(dataset: datasets.Dataset, columns: Iterable[str], source: str) -> None:
    """Raise a DataError naming each missing column and the available ones."""
    missing = [column for column in columns if column not in dataset.column_names]
    if missing:
        raise DataError(
            f"{source!r} has no column(s) {missing}; available columns: {dataset.column_names}. "
            "Point the data config's column option at one of those."
        )


def written_once(path: Path, rows: Iterable[dict], features: datasets.Features, fingerprint: str) -> datasets.Dataset:
    """The dataset of `rows`, memory-mapped from the arrow file `path`, which is written first unless it
    is a committed cache entry (bertlab.atomic_files). Rows stream to disk a writer batch at a time, so
    memory does not grow with their number; the file is written atomically, then committed."""
    if not atomic_files.is_committed(path):
        def write(temp: str) -> None:
            with ArrowWriter(features=features, path=temp) as writer:
                for row in rows:
                    writer.write(row)
                writer.finalize()

        atomic_files.write_atomically(path, write)
        atomic_files.commit(path)
    dataset = datasets.Dataset.from_file(str(path))
    dataset._fingerprint = fingerprint  # what later steps' cache keys build on; not where the cache folder is
    return dataset


def read_text_lines(file: Path, cache_dir: str | Path | None = None) -> datasets.Dataset:
    """One row per line of `file` in column "text"; undecodable lines are skipped, counted and logged.

    The lines are written once to an arrow file in the cache folder (see `cache_folder`), keyed by the
    file's path, size and modification time, and memory-mapped: no corpus is held in memory.
    """
    stat = file.stat()
    fingerprint = Hasher.hash(["text lines", str(file.resolve()), stat.st_size, stat.st_mtime_ns])
    lines = written_once(cache_folder(cache_dir) / f"lines-{fingerprint}.arrow", _decoded_lines(file),
                         datasets.Features({"text": datasets.Value("string")}), fingerprint)
    if len(lines) == 0:
        raise DataError(f"text file {file} has no readable lines: expected UTF-8 text, one line per row")
    return lines


def _decoded_lines(file: Path) -> Iterator[dict[str, str]]:
    skipped = 0
    try:
        with file.open("rb") as stream:
            for raw_line in stream:
                try:
                    yield {"text": raw_line.decode("utf-8").rstrip("\r\n")}
                except UnicodeDecodeError:
                    skipped += 1
    except OSError as error:
        raise DataError(f"cannot read text file {file}: {error}") from error
    if skipped:
        logger.warning("skipped %d line(s) of %s that are not valid UTF-8", skipped, file)


def _load_folder(folder: Path, what: str, cache_dir: str | Path | None) -> datasets.DatasetDict:
    if any((folder / marker).is_file() for marker in _SAVED_DATASET_MARKERS):
        return _load_saved(folder, what)
    files_by_split = _split_files(folder)
    if not files_by_split:
        found = sorted(child.name for child in folder.iterdir())
        raise DataError(
            f"{what} folder {folder} has no split files: expected files named train/validation/test "
            f"with a suffix in {sorted(FILE_FORMATS)} (or a folder written by save_to_disk); found {found}"
        )
    return datasets.DatasetDict(
        {split: _load_files(files, what, cache_dir) for split, files in files_by_split.items()}
    )


def _split_files(folder: Path) -> dict[str, list[Path]]:
    files_by_split: dict[str, list[Path]] = {}
    for file in sorted(folder.iterdir()):
        if not file.is_file() or file.suffix not in FILE_FORMATS:
            continue
        for split, names in SPLIT_NAMES.items():
            if any(file.stem == name or file.stem.startswith((f"{name}-", f"{name}_")) for name in names):
                files_by_split.setdefault(split, []).append(file)
    return files_by_split


def _load_files(files: list[Path], what: str, cache_dir: str | Path | None) -> datasets.Dataset:
    suffixes = {file.suffix for file in files}
    if len(suffixes) > 1:
        raise DataError(f"{what} files {[str(file) for file in files]} mix formats {sorted(suffixes)}; use one")
    suffix = suffixes.pop()
    if suffix not in FILE_FORMATS:
        raise DataError(
            f"{what} file {files[0]} has an unsupported suffix {suffix!r}: expected one of {sorted(FILE_FORMATS)}"
        )
    if FILE_FORMATS[suffix] == "text":
        return datasets.concatenate_datasets([read_text_lines(file, cache_dir) for file in files])
    if all(_holds_no_rows(file) for file in files):  # the builders fail on these with unrelated messages
        raise DataError(f"{what} file(s) {[str(file) for file in files]} hold no rows; expected at least one")
    try:
        return datasets.load_dataset(
            FILE_FORMATS[suffix],
            data_files=[str(file) for file in files],
            split="train",
            cache_dir=None if cache_dir is None else str(cache_dir),
        )
    except Exception as error:  # the builders raise many types (arrow, json, pandas errors)
        raise DataError(f"cannot read {what} file(s) {[str(file) for file in files]}: {error}") from error


def _holds_no_rows(file: Path) -> bool:
    """A parquet file with 0 rows, or a csv/json(l) file with no line of data (reads at most two lines)."""
    try:
        if file.suffix == ".parquet":
            return pq.read_metadata(file).num_rows == 0
        with file.open("rb") as stream:
            lines = (line for line in stream if line.strip())
            return sum(1 for _ in itertools.islice(lines, 2)) <= (file.suffix == ".csv")  # csv: a header line
    except Exception:  # unreadable: not known to be empty; the builder reports it
        return False


def _load_saved(folder: Path, what: str) -> datasets.DatasetDict:
    try:
        loaded = datasets.load_from_disk(str(folder))
    except Exception as error:  # corrupt or partial save_to_disk folders raise various errors
        raise DataError(f"cannot read saved {what} folder {folder}: {error}") from error
    return loaded if isinstance(loaded, datasets.DatasetDict) else datasets.DatasetDict({"train": loaded})


def _load_from_hub(source: str, what: str, cache_dir: str | Path | None) -> datasets.DatasetDict:
    name, _, config = source.partition(":")
    try:
        loaded = datasets.load_dataset(name, config or None, cache_dir=None if cache_dir is None else str(cache_dir))
    except Exception as error:  # offline, unknown id, gated, network: all mean "not loadable from the hub"
        raise DataError(
            f"{what} {source!r} is not a local path and could not be loaded from the Hugging Face hub "
            f"({type(error).__name__}: {error}). {_ways_out()}"
        ) from error
    return loaded if isinstance(loaded, datasets.DatasetDict) else datasets.DatasetDict({"train": loaded})


def _looks_like_path(source: str) -> bool:
    """Hub ids are "name" or "owner/name"; anything else that does not exist is a missing local path."""
    return source.startswith((".", "/", "~")) or source.count("/") > 1 or Path(source).suffix in FILE_FORMATS


def _ways_out() -> str:
    data_dir = os.environ.get("BERTLAB_DATA_DIR")
    if data_dir:
        return (f"BERTLAB_DATA_DIR={data_dir} holds no local copy of it that bertlab knows: give the path of a local "
                f"copy instead, or run with internet access so the hub id can be downloaded.")
    return (
        "Either set BERTLAB_DATA_DIR to a folder laid out like shared/data (or point data.source at "
        "local files), or run with internet access so the hub id can be downloaded."
    )
