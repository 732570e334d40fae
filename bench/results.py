"""Tidy results storage: append-only CSVs plus a JSON sidecar.

results/<machine>/<suite>.csv holds one row per measurement (a repeat of a variant at
a point), <suite>-series.csv the per-iteration values of those runs, and <suite>.json
the schema (the role of every column: axis, variant, metric with unit and
direction, calibration, bookkeeping) and one record per run (environment, settings,
status). Readers take column roles from the schema, never from a column's name.
"""

from __future__ import annotations

import csv
import fcntl
import hashlib
import io
import json
import os
import socket
import tempfile
import time
import warnings
from collections.abc import Iterable, Mapping
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from bench.errors import BenchError, brief

# Columns the harness writes on every row, after the suite's axes and metrics.
IDENTITY = ("suite", "backend")
VARIANT_COLUMNS = ("variant", "device")
HYGIENE = ("cv", "sm_clock_mhz_min", "sm_clock_mhz_median", "sm_clock_mhz_max", "throttled", "throttle_reasons",
           "load_1m")
BOOKKEEPING = ("repeat", "warmup", "group", "run_id", "code_version", "timestamp", "machine")
SERIES_BOOKKEEPING = ("repeat", "group", "run_id", "code_version", "timestamp", "iteration", "wall_s")


def schema_for(suite) -> dict:
    """{column: {"role": ..., unit/better/gate/per/tolerance/resolution for metrics}} in column order."""
    columns = {name: {"role": "axis"} for name in IDENTITY}
    columns.update({axis.name: {"role": "axis", "tune": axis.tune} for axis in suite.axes})
    columns.update({name: {"role": "variant"} for name in VARIANT_COLUMNS})
    columns["repeat"] = {"role": "bookkeeping"}
    for metric in suite.all_metrics():
        columns[metric.name] = {"role": "metric", "unit": metric.unit, "better": metric.better, "per": metric.per,
                                "gate": metric.gate, "tolerance": metric.tolerance, "resolution": metric.resolution}
    columns.update({label.name: {"role": "label", "help": label.help} for label in suite.labels})
    columns["calibration_s"] = {"role": "calibration", "unit": "s"}
    columns["copy_gbps"] = {"role": "calibration", "unit": "GB/s"}
    if suite.states_work:  # GPU rows: the name of the ceiling that binds (bench.ceilings)
        columns["bound"] = {"role": "bookkeeping", "help": "GPU: the ceiling whose time is the floor: dram, l2, "
                            "fma or launch"}
    columns["cv"] = {"role": "bookkeeping", "help": "coefficient of variation of seconds over the point's repeats"}
    for name in HYGIENE[1:]:
        columns[name] = {"role": "bookkeeping"}
    for name in BOOKKEEPING[1:]:
        columns[name] = {"role": "bookkeeping"}
    return {"suite": suite.name, "reference": suite.reference, "gpu_reference": suite.gpu_reference or suite.reference,
            "columns": columns}


def row_columns(schema: dict) -> list[str]:
    return [c for c, role in schema["columns"].items() if role.get("per", "run") == "run"]


def series_columns(schema: dict) -> list[str]:
    columns = schema["columns"]
    keys = [c for c, r in columns.items() if r["role"] in ("axis", "variant")]
    values = [c for c, r in columns.items() if r.get("per") == "iteration"]
    return [*keys, *SERIES_BOOKKEEPING, *values]


def key_columns(schema: dict) -> list[str]:
    """The columns that identify a measured point: the axes."""
    return [c for c, role in schema["columns"].items() if role["role"] == "axis"]


def gated_metrics(schema: dict) -> dict[str, dict]:
    return {c: r for c, r in schema["columns"].items()
            if r["role"] == "metric" and r.get("gate") and r.get("per", "run") == "run"}


def as_text(value) -> str:
    """The text a value is stored as; also used to compare points, so 32 == "32"."""
    if value is None:
        return ""
    if hasattr(value, "item"):  # numpy scalar -> Python scalar, so 0.5 is not "np.float64(0.5)"
        value = value.item()
    return str(value)


def _read_header(fd: int) -> list[str] | None:
    """The CSV header of the open file, or None when the file holds no complete line."""
    head = b""
    while b"\n" not in head:
        chunk = os.pread(fd, 65536, len(head))
        if not chunk:
            return None
        head += chunk
    return next(csv.reader([head.split(b"\n", 1)[0].decode(errors="replace")]))


def read_header(csv_path: Path) -> list[str] | None:
    """The header of an existing results file (None when it is missing or empty)."""
    try:
        fd = os.open(csv_path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        return _read_header(fd)
    finally:
        os.close(fd)


def check_header(csv_path: Path, required: list[str]) -> None:
    """BenchError when an existing file lacks columns that name its points (the suite's axes,
    code_version, run_id): another suite's file or none at all. New metrics widen a file."""
    header = read_header(csv_path)
    missing = [c for c in required if header is not None and c not in header]
    if missing:
        raise BenchError(f"{csv_path}: not a results file of these points (no column {', '.join(missing[:6])}): "
                         "write elsewhere with --out")


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


def append_rows(csv_path: Path, rows: list[dict], columns: list[str] | None = None) -> tuple[int, int] | None:
    """Append rows as whole lines, writing the header if the file is new, and return the
    file's size just before and just after this write (None where there were no rows): a
    size before that differs from the one its caller last saw means that another process
    wrote meanwhile.

    The text is built in memory and written with one os.write on an O_APPEND descriptor
    under an exclusive flock, then fsynced, so readers and other appenders never see half
    a line. Rows with columns the file lacks (a suite that gained a metric) widen it first:
    the file is rewritten beside itself with the new columns, empty in its old rows, and
    renamed over itself; a writer that waited for the lock on the old file opens the new one.
    Columns of the file that the rows lack stay empty in them.
    """
    if not rows:
        return None
    csv_path = Path(csv_path)
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    columns = columns or list(dict.fromkeys(c for row in rows for c in row))
    fd = _open_locked(csv_path)  # header check and write form one step
    try:
        _cut_torn_tail(fd, csv_path)
        header = _read_header(fd)
        if header is not None and set(columns) - set(header):
            header, fd = _widen(fd, csv_path, header, columns)
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=header or columns, lineterminator="\n", extrasaction="ignore")
        if header is None:
            writer.writeheader()
        writer.writerows({c: as_text(row.get(c)) for c in writer.fieldnames} for row in rows)
        before = os.fstat(fd).st_size
        os.write(fd, out.getvalue().encode())
        os.fsync(fd)
        return before, os.fstat(fd).st_size
    finally:
        os.close(fd)  # also releases the lock


def add_columns(csv_path: Path, values: dict[str, str]) -> None:
    """Give an existing results file the columns it lacks of `values`, with those values in
    every row it has (a suite's new axis: what its rows measured before the axis existed)."""
    csv_path = Path(csv_path)
    fd = _open_locked(csv_path)
    try:
        _cut_torn_tail(fd, csv_path)
        header = _read_header(fd)
        if header is not None and set(values) - set(header):
            _, fd = _widen(fd, csv_path, header, list(values), values)
    finally:
        os.close(fd)


def _open_locked(csv_path: Path) -> int:
    """A descriptor of the file (created if missing), for appends, under an exclusive flock."""
    while True:
        fd = os.open(csv_path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.path.exists(csv_path) and os.fstat(fd).st_ino == os.stat(csv_path).st_ino:
            return fd
        os.close(fd)  # widened (replaced) while this writer waited: take the new file


def _widen(fd: int, csv_path: Path, header: list[str], columns: list[str],
           values: dict[str, str] | None = None) -> tuple[list[str], int]:
    """The file (locked through fd) rewritten with the columns it lacks appended, in every
    old row their entry of `values` or empty, and renamed over itself: its new header, and
    a descriptor of it, locked (fd is closed). The old file is whole until the rename, so an
    interruption loses nothing."""
    added = [c for c in columns if c not in header]
    old = pd.read_csv(io.BytesIO(os.pread(fd, os.fstat(fd).st_size, 0)), dtype=str, keep_default_na=False)
    old = old.reindex(columns=header + added, fill_value="")
    for column in added:
        old[column] = (values or {}).get(column, "")
    tmp = csv_path.with_name(f".{csv_path.name}.{os.getpid()}.widen")
    old.to_csv(tmp, index=False, lineterminator="\n")
    # Locked before it takes the name: a writer that opens the name after the rename waits
    # here, so none can widen the new file again (and unlink it) before this writer appends.
    new_fd = os.open(tmp, os.O_RDWR | os.O_APPEND)
    fcntl.flock(new_fd, fcntl.LOCK_EX)
    os.fsync(new_fd)
    os.replace(tmp, csv_path)
    os.close(fd)  # writers waiting on the old file wake, see it replaced, and open this one
    return header + added, new_fd


# Hex digests and ids: text even where one reads as a number ("2814554e3348" is 2.8e3354).
IDENTIFIERS = {"code_version": str, "run_id": str, "group": str}


def read_csv(csv_path: Path, **read_csv_args) -> pd.DataFrame:
    """One results CSV, its identifier columns as text; a torn last line is ignored with a
    warning; BenchError naming the file when it is missing or not a CSV."""
    read_csv_args.setdefault("dtype", IDENTIFIERS)
    read_csv_args.setdefault("low_memory", False)  # one pass: a column that is empty at first has one dtype
    csv_path = Path(csv_path)
    try:
        data = csv_path.read_bytes()
    except OSError as error:
        raise BenchError(f"{csv_path}: cannot read ({error.strerror})") from None
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        warnings.warn(f"{csv_path}: ignoring a torn last line ({len(data) - cut} bytes)", stacklevel=2)
        data = data[:cut]
    if not data:
        return pd.DataFrame()
    try:
        return pd.read_csv(io.BytesIO(data), **read_csv_args)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as error:
        detail = brief(error)
        raise BenchError(f"{csv_path}: not a results CSV ({detail})") from None


def suite_file(path: Path, suite: str) -> Path:
    """A results file, or the suite's file in a results directory."""
    path = Path(path)
    return path / f"{suite}.csv" if path.is_dir() else path


def load(path: Path, suite: str | None = None, registry_schema=None) -> tuple[pd.DataFrame, dict, dict]:
    """(rows, schema, sidecar) of a results file (or of the suite's file in a
    directory). The schema comes from the sidecar; where there is none, from the
    registered suite the rows name (`registry_schema(name)`). Every column the
    schema names must be there, with numbers in the metric columns."""
    csv_path = suite_file(path, suite) if suite else Path(path)
    if not csv_path.exists():
        raise BenchError(f"no such result file: {csv_path}")
    df = read_csv(csv_path)
    sidecar = read_sidecar(csv_path.with_suffix(".json"))
    schema = sidecar.get("schema")
    if schema is None:
        name = str(df["suite"].iloc[0]) if "suite" in df and len(df) else suite
        if name is None or registry_schema is None:
            raise BenchError(f"{csv_path}: no schema (no sidecar {csv_path.with_suffix('.json').name}, "
                             "no suite column)")
        schema = registry_schema(name)
    _check_schema(schema, csv_path.with_suffix(".json"))
    if suite and schema.get("suite") != suite:
        raise BenchError(f"{csv_path}: holds suite {schema.get('suite')!r} results, not {suite!r}")
    if df.empty:
        return df, schema, sidecar
    # A file written before a metric was added lacks its column: no value. The point, the
    # variant and the bookkeeping every row fills are what make it a results file.
    required = [c for c, role in schema["columns"].items() if role["role"] in ("axis", "variant") or c in FILLED]
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise BenchError(f"{csv_path}: not a {schema.get('suite')} results file: missing columns {missing[:6]}")
    df = df.reindex(columns=[*df.columns, *(c for c in row_columns(schema) if c not in df.columns)])
    for column, role in schema["columns"].items():
        if role["role"] in ("metric", "calibration") and column in df and not pd.api.types.is_numeric_dtype(df[column]):
            bad = df[column][pd.to_numeric(df[column], errors="coerce").isna() & df[column].notna()]
            if len(bad):
                line = int(bad.index[0]) + 2  # 1-based, after the header
                raise BenchError(f"{csv_path}:{line}: column {column!r} holds {bad.iloc[0]!r}, not a number")
    _check_values(df, schema, csv_path)
    return df, schema, sidecar


def _check_schema(schema, json_path: Path) -> None:
    """BenchError unless the schema holds what reading and gating the rows need: the suite,
    the reference variant, and per column a role, per gated metric its direction (and a
    tolerance gate its tolerance)."""
    def fail(what):
        raise BenchError(f"{json_path}: not a results schema ({what})")

    if not isinstance(schema, dict):
        fail("not a JSON object")
    for field in ("suite", "reference"):
        if not isinstance(schema.get(field), str):
            fail(f"no {field!r}")
    columns = schema.get("columns")
    if not isinstance(columns, dict) or not all(isinstance(r, dict) and "role" in r for r in columns.values()):
        fail("no 'columns' with a role each")
    for name, role in columns.items():
        if role["role"] != "metric" or not role.get("gate"):
            continue
        if role["gate"] not in ("ratio", "tolerance") or role.get("better") not in ("lower", "higher"):
            fail(f"{name}: gate {role['gate']!r}, better {role.get('better')!r}")
        tolerance = role.get("tolerance")
        if role["gate"] == "tolerance" and not (isinstance(tolerance, (int, float)) and tolerance >= 0):
            fail(f"{name}: tolerance {tolerance!r}")
        resolution = role.get("resolution", 0.0)  # absent in a sidecar written before resolutions
        if not (isinstance(resolution, (int, float)) and resolution >= 0):
            fail(f"{name}: resolution {resolution!r}")


# Columns every row fills: a row without one did not parse (a garbage line reads as NaNs).
FILLED = ("suite", "backend", "variant", "repeat", "run_id", "code_version")


def _check_values(df: pd.DataFrame, schema: dict, csv_path: Path) -> None:
    """BenchError naming the file and row of the first impossible value: a row that did not
    parse, a run's time that is not positive and finite, a negative or infinite time, count,
    size or rate."""
    def fail(mask, what):
        line = int(mask[mask].index[0]) + 2  # 1-based, after the header
        raise BenchError(f"{csv_path}:{line}: {what}")

    for column in FILLED:
        if column in df and df[column].isna().any():
            fail(df[column].isna(), f"the row does not parse (no {column!r}): a torn or foreign line")
    for column in key_columns(schema):  # a point without one of its axes is no point
        if column in df and df[column].isna().any():
            fail(df[column].isna(), f"no value of the axis {column!r}")
    for column, role in schema["columns"].items():
        if role["role"] not in ("metric", "calibration") or column not in df:
            continue
        values = pd.to_numeric(df[column], errors="coerce")
        unit = role.get("unit", "")
        if column == "seconds" and not (values > 0).all():
            fail(~(values > 0), f"column 'seconds' holds {values[~(values > 0)].iloc[0]}: a run takes a positive time")
        if role["role"] == "calibration" and (values <= 0).any():  # empty where not measured
            fail(values <= 0, f"column {column!r} holds {values[values <= 0].iloc[0]}: a calibration is positive")
        if not (unit in ("s", "bytes", "tokens") or unit.endswith("/s")):
            continue  # an error may be infinite (sumrv counts a NaN output so), a log-likelihood negative
        if np.isinf(values).any():
            fail(np.isinf(values), f"column {column!r} holds {values[np.isinf(values)].iloc[0]}, not a finite number")
        if (values < 0).any():
            fail(values < 0, f"column {column!r} holds {values[values < 0].iloc[0]} {unit}: never negative")


def latest_code(df: pd.DataFrame, schema: dict) -> pd.DataFrame:
    """Keep, for each (point, variant), the rows measured with the code version of its
    newest row: every run of the current code counts (a run is one process, and pooling
    runs tames a disturbed one), and older code is never mixed in."""
    if df.empty:
        return df
    by = [*key_columns(schema), "variant"]
    ordered = df.sort_values("timestamp", kind="stable")
    newest = ordered.groupby(by, dropna=False)["code_version"].transform("last").reindex(df.index)
    return df[df["code_version"] == newest]


def _point_id(point: Mapping) -> frozenset:
    return frozenset((str(k), as_text(v)) for k, v in point.items())


def measured_repeats(csv_path: Path, schema: dict, code_version: str, warmup: int) -> dict[frozenset, int]:
    """How many repeats of each (point, variant) were measured with this code and warm-up."""
    csv_path = Path(csv_path)
    if not csv_path.exists():
        return {}
    # As text, so comparisons see exactly what was written (no 32 vs 32.0 from NaN columns).
    df = read_csv(csv_path, dtype=str, keep_default_na=False)
    if df.empty:
        return {}
    df = df[(df["code_version"] == code_version) & (df["warmup"] == str(warmup))]
    columns = [*key_columns(schema), "variant"]
    counts = df.groupby(columns).size()
    return {_point_id(dict(zip(columns, key if isinstance(key, tuple) else (key,)))): int(n)
            for key, n in counts.items()}


def repeats_done(index: dict, point: Mapping, variants: Iterable[str]) -> dict[str, int]:
    """The repeats each variant of the point already has (0 where it has none)."""
    return {v: index.get(_point_id({**point, "variant": v}), 0) for v in variants}


class Claims:
    """The points this process is measuring, claimed by files in .<suite>.claims/ beside the
    results, each holding the claimant's pid: two sweeps into one directory measure each
    point once. A claim whose process is gone (killed, crashed) is taken over."""

    def __init__(self, directory: Path, suite: str):
        self.directory = Path(directory) / f".{suite}.claims"
        self.held: list[Path] = []

    def take(self, point: Mapping) -> bool:
        """True once this process holds the point; False while another live process does."""
        key = "|".join(f"{k}={as_text(v)}" for k, v in sorted(point.items()))
        path = self.directory / hashlib.sha256(key.encode()).hexdigest()[:24]
        taken_over = False
        while True:
            self.directory.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileNotFoundError:  # another process's release() removed the emptied directory just now
                continue
            except FileExistsError:
                if taken_over or _alive(path):
                    return False
                path.unlink(missing_ok=True)  # the claimant died: take it over
                taken_over = True
                continue
            with os.fdopen(fd, "w") as f:
                f.write(f"{socket.gethostname()} {os.getpid()}")
            self.held.append(path)
            return True

    def release(self) -> None:
        for path in self.held:
            path.unlink(missing_ok=True)
        self.held.clear()
        try:
            self.directory.rmdir()  # where no other process holds a claim
        except OSError:
            pass


def _alive(claim: Path) -> bool:
    """Whether the process named in a claim file ("host pid") may still run: on this host, a
    live process other than this one (whose own claims are all held by a Claims, so one of
    its pid is a dead process's that had the same pid); on another host, presumably; a
    file being written counts."""
    try:
        host, _, pid = claim.read_text().partition(" ")
        pid = int(pid or 0)
    except (OSError, ValueError):
        return True
    if not pid:  # created, its pid not yet written (or never: the writer died at once)
        return time.time() - claim.stat().st_mtime < 10
    if host != socket.gethostname():
        return True
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_sidecar(json_path: Path) -> dict:
    """The sidecar {"schema": ..., "runs": {run_id: info}}; empty runs when it does not exist."""
    json_path = Path(json_path)
    if not json_path.exists():
        return {"runs": {}}
    try:
        sidecar = json.loads(json_path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BenchError(f"{json_path}: not a results sidecar ({error})") from None
    if not isinstance(sidecar, dict):
        raise BenchError(f"{json_path}: not a results sidecar (not a JSON object)")
    sidecar.setdefault("runs", {})
    return sidecar


@contextmanager
def _locked(json_path: Path):
    """An exclusive lock for the sidecar's read-modify-write: concurrent sweeps
    into one directory must not lose each other's run records. The lock is the
    directory's (the sidecar itself is replaced, not rewritten), so no lock file is left."""
    fd = os.open(json_path.parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _umask() -> int:
    """The process umask: read from /proc/self/status where Linux gives it (setting it to read
    it back would change it for every thread meanwhile), else set and restored."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def update_sidecar(json_path: Path, run_id: str | None, info: dict | None = None, schema: dict | None = None) -> None:
    """Merge info into runs[run_id] (and set the schema), replacing the file atomically."""
    json_path = Path(json_path)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(json_path):
        sidecar = read_sidecar(json_path)
        if schema is not None:
            sidecar["schema"] = schema
        if run_id is not None:
            sidecar["runs"].setdefault(run_id, {}).update(info or {})
        with tempfile.NamedTemporaryFile(
            "w", dir=json_path.parent, prefix=json_path.name, suffix=".tmp", delete=False
        ) as tmp:
            os.fchmod(tmp.fileno(), 0o666 & ~_umask())  # an ordinary file's mode, not mkstemp's 0600
            json.dump(sidecar, tmp, indent=2, default=str)  # insertion order: the schema's column order
            tmp.write("\n")
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp.name, json_path)
