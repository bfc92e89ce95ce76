"""Result tables as Markdown and CSV, written atomically: the one writer of the sweep summary, the GLUE suite's
tables, `compare`'s and `bench`'s reports."""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from bertlab.atomic_files import write_atomically



def markdown_row(cells: Iterable[Any]) -> str:
    """`| a | b |`. An empty string is an empty value (`|  |`), None a cell that does not apply (`| |`): the
    totals rows and the missing columns of the tables have always been written so."""
    return "|" + "|".join(" " if cell is None else f" {cell} " for cell in cells) + "|"


def markdown_table(header: Sequence[Any], rows: Iterable[Iterable[Any]], rule: str = " --- ") -> list[str]:
    """The lines of a table: the header, the rule under it (`bench`'s reports have `|---|`), one line a row."""
    return [markdown_row(header), "|" + "|".join(rule for _ in header) + "|", *map(markdown_row, rows)]


def interval(low: float, high: float, missing: str = "–", digits: int = 1) -> str:
    """A 95% interval at `digits` decimals, `missing` where there is none (a single seed)."""
    return missing if math.isnan(low) else f"[{low:.{digits}f}, {high:.{digits}f}]"


def write_markdown(path: Path, text: str) -> str:
    write_atomically(path, lambda temp: Path(temp).write_text(text, encoding="utf-8"))
    return text


def write_csv(path: Path, rows: list[dict[str, Any]], columns: Sequence[str] | None = None) -> None:
    """`rows` under the header `columns` (default: the first row's keys); a key a row lacks is an empty cell."""

    def write(temp: str) -> None:
        with open(temp, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(columns or rows[0]))
            writer.writeheader()
            writer.writerows(rows)

    write_atomically(path, write)
