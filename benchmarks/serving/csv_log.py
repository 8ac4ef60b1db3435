"""The serving benchmarks' CSV logs: every run appends its rows, the header written once, when the file is new."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any


def append_rows(path: Path, fieldnames: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> None:
    """Append `rows` to the CSV at `path` (columns in `fieldnames`' order), with the header if the file is new."""
    new = not path.exists()
    with path.open("a", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(fieldnames))
        if new:
            writer.writeheader()
        writer.writerows(rows)
