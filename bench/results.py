"""Tidy results storage: append-only CSVs plus a JSON sidecar of run environments.

One CSV per (machine, suite): results/<machine>/<suite>.csv, one row per measurement.
Column roles are decided by name alone, so this module knows no suite's axes:
measurement columns are `seconds` and anything ending in a measurement suffix,
bookkeeping columns are a fixed list, and every other column except `variant` is a key.
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import os
import tempfile
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

MEASUREMENT_SUFFIXES = ("_s", "_per_s", "_gbps", "_frac")
BOOKKEEPING_COLUMNS = ("repeat", "group", "run_id", "code_version", "timestamp", "machine", "tokens")


def is_measurement(column: str) -> bool:
    return column == "seconds" or column.endswith(MEASUREMENT_SUFFIXES)


def key_columns(columns: Iterable[str]) -> list[str]:
    """The columns that identify a measured point (all but variant, measurements, bookkeeping)."""
    return [
        c for c in columns
        if c != "variant" and c not in BOOKKEEPING_COLUMNS and not is_measurement(c)
    ]


def as_text(value) -> str:
    """The text a value is stored as; also used to compare points, so 32 == "32"."""
    if value is None:
        return ""
    if hasattr(value, "item"):  # numpy scalar -> Python scalar, so 0.5 is not "np.float64(0.5)"
        value = value.item()
    return str(value)


def _columns_of(rows: list[dict]) -> list[str]:
    """Union of the rows' columns in order of first appearance."""
    return list(dict.fromkeys(c for row in rows for c in row))


def _read_header(fd: int) -> list[str] | None:
    """The CSV header of the open file, or None when the file holds no complete line."""
    head = b""
    while b"\n" not in head:
        chunk = os.pread(fd, 65536, len(head))
        if not chunk:
            return None
        head += chunk
    return next(csv.reader([head.split(b"\n", 1)[0].decode()]))


def _cut_torn_tail(fd: int, path: Path) -> None:
    """Drop a last line that lacks its newline (a writer died mid-line), so appends stay aligned."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    end = size
    while end > 0:
        start = max(0, end - 65536)
        newline = os.pread(fd, end - start, start).rfind(b"\n")
        if newline >= 0:
            end = start + newline + 1
            break
        end = start
    warnings.warn(f"{path}: dropping a torn last line ({size - end} bytes)", stacklevel=3)
    os.ftruncate(fd, end)


def append_rows(csv_path: Path, rows: list[dict]) -> None:
    """Append rows as whole lines, writing the header if the file is new.

    The text is built in memory and written with one os.write on an O_APPEND descriptor
    under an exclusive flock, then fsynced, so readers and other appenders never see half
    a line. Raises ValueError if the rows' columns differ from the file's header.
    """
    if not rows:
        return
    csv_path = Path(csv_path)
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    columns = _columns_of(rows)
    fd = os.open(csv_path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # header check and write form one step
        _cut_torn_tail(fd, csv_path)
        header = _read_header(fd)
        if header is not None and set(header) != set(columns):
            missing, extra = sorted(set(header) - set(columns)), sorted(set(columns) - set(header))
            raise ValueError(
                f"{csv_path}: columns differ from the file's header: "
                f"missing from rows {missing}, not in header {extra}"
            )
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=header or columns, lineterminator="\n")
        if header is None:
            writer.writeheader()
        writer.writerows({c: as_text(row.get(c)) for c in writer.fieldnames} for row in rows)
        os.write(fd, out.getvalue().encode())
        os.fsync(fd)
    finally:
        os.close(fd)  # also releases the lock


def _read_one(csv_path: Path, **read_csv_args) -> pd.DataFrame:
    data = csv_path.read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        warnings.warn(f"{csv_path}: ignoring a torn last line ({len(data) - cut} bytes)", stacklevel=3)
        data = data[:cut]
    if not data:
        return pd.DataFrame()
    return pd.read_csv(io.BytesIO(data), **read_csv_args)


def read_results(csv_path: Path, **read_csv_args) -> pd.DataFrame:
    """Read one results CSV, or every *.csv in a directory; a torn last line is ignored with a warning."""
    csv_path = Path(csv_path)
    if csv_path.is_dir():
        frames = [_read_one(p, **read_csv_args) for p in sorted(csv_path.glob("*.csv"))]
        frames = [f for f in frames if not f.empty]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return _read_one(csv_path, **read_csv_args)


def latest_code(df: pd.DataFrame) -> pd.DataFrame:
    """Keep, for each (point, variant), the rows measured with the code version of its
    newest row: every run of the current code counts (a run is one process, and pooling
    runs tames a disturbed one), and older code is never mixed in."""
    if df.empty:
        return df
    by = [*key_columns(df.columns), "variant"]
    ordered = df.sort_values("timestamp", kind="stable")
    newest = ordered.groupby(by, dropna=False)["code_version"].transform("last").reindex(df.index)
    return df[df["code_version"] == newest]


def _point_id(point: Mapping) -> frozenset:
    return frozenset((str(k), as_text(v)) for k, v in point.items())


def measured_index(csv_path: Path, code_version: str) -> set[frozenset]:
    """Index of the (point, variant) pairs measured with this code version, for is_measured.

    A pair counts once any row of it exists: the harness appends a group's rows in one
    append_rows call, so a group is stored whole or not at all.
    """
    csv_path = Path(csv_path)
    if not csv_path.exists():
        return set()
    # As text, so comparisons see exactly what was written (no 32 vs 32.0 from NaN columns).
    df = read_results(csv_path, dtype=str, keep_default_na=False)
    if df.empty:
        return set()
    df = df[df["code_version"] == code_version]
    columns = [*key_columns(df.columns), "variant"]
    return {_point_id(dict(zip(columns, values))) for values in df[columns].itertuples(index=False)}


def is_measured(index: set[frozenset], point: Mapping, variants: Iterable[str]) -> bool:
    """True when every variant of the point (a dict of all key columns) is in the index."""
    return all(_point_id({**point, "variant": v}) in index for v in variants)


def read_sidecar(json_path: Path) -> dict:
    """The sidecar {"runs": {run_id: info}}; empty runs when the file does not exist."""
    json_path = Path(json_path)
    if not json_path.exists():
        return {"runs": {}}
    return json.loads(json_path.read_text())


def update_sidecar(json_path: Path, run_id: str, info: dict) -> None:
    """Merge info into runs[run_id] of the sidecar, replacing the file atomically."""
    json_path = Path(json_path)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    sidecar = read_sidecar(json_path)
    sidecar.setdefault("runs", {}).setdefault(run_id, {}).update(info)
    with tempfile.NamedTemporaryFile(
        "w", dir=json_path.parent, prefix=json_path.name, suffix=".tmp", delete=False
    ) as tmp:
        json.dump(sidecar, tmp, indent=2, sort_keys=True, default=str)
        tmp.write("\n")
        tmp.flush()
        os.fsync(tmp.fileno())
    os.replace(tmp.name, json_path)
