"""Results storage (bench.results) and environment capture (bench.envinfo)."""

import json
import os
import sys
import types
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import pytest

from bench import envinfo, results
from bench.errors import BenchError
from bench.results import (
    append_rows, key_columns, latest_code, load, measured_repeats, read_csv, read_sidecar, repeats_done,
    update_sidecar,
)

AXIS = {"role": "axis"}
SCHEMA = {"suite": "lda", "reference": "alg1", "columns": {
    "suite": AXIS, "backend": AXIS, "precision": AXIS, "K": AXIS, "variant": {"role": "variant"},
    "repeat": {"role": "bookkeeping"}, "seconds": {"role": "metric", "unit": "s", "better": "lower", "gate": "ratio"},
    "draw_z_s": {"role": "metric", "unit": "s"}, "tokens": {"role": "metric"}, "tokens_per_s": {"role": "metric"},
    "warmup": {"role": "bookkeeping"}}}


def row(variant="alg1", K=32, repeat=0, code_version="v1", seconds=1.5, **extra):
    return {
        "suite": "lda", "variant": variant, "backend": "cpu", "precision": "f32", "K": K,
        "repeat": repeat, "seconds": seconds, "draw_z_s": seconds / 2, "tokens": 1000,
        "tokens_per_s": 1000 / seconds, "group": f"g{K}", "run_id": "r1",
        "code_version": code_version, "timestamp": "2026-01-01T00:00:00+00:00", "machine": "m", "warmup": 1,
        **extra,
    }


def test_key_columns_come_from_the_schema():
    assert key_columns(SCHEMA) == ["suite", "backend", "precision", "K"]


def test_append_creates_parents_and_writes_header_once(tmp_path):
    path = tmp_path / "results" / "m" / "lda.csv"
    append_rows(path, [row(repeat=0), row(repeat=1)])
    append_rows(path, [row(repeat=2)])
    lines = path.read_text().splitlines()
    assert lines[0] == ",".join(row().keys())
    assert sum(line == lines[0] for line in lines) == 1
    df = read_csv(path)
    assert list(df["repeat"]) == [0, 1, 2]
    assert list(df.columns) == list(row().keys())


def test_append_nothing_creates_nothing(tmp_path):
    append_rows(tmp_path / "x.csv", [])
    assert not (tmp_path / "x.csv").exists()


def test_append_follows_header_order_and_writes_numpy_scalars_as_numbers(tmp_path):
    path = tmp_path / "r.csv"
    append_rows(path, [row()])
    reordered = dict(reversed(list(row(K=np.int64(64), seconds=np.float64(0.25)).items())))
    append_rows(path, [reordered])
    assert path.read_text().splitlines()[2].startswith("lda,alg1,cpu,f32,64,0,0.25,0.125,")


def test_rows_with_new_columns_widen_the_file_and_rows_without_some_leave_them_empty(tmp_path):
    path = tmp_path / "r.csv"
    append_rows(path, [row()])
    append_rows(path, [row(update="dense")])  # a column the file lacks: the old row's cell is empty
    bad = row()
    del bad["draw_z_s"]
    append_rows(path, [bad])  # a column the rows lack: empty in them
    df = read_csv(path)
    assert len(df) == 3 and list(df.columns)[-1] == "update"
    assert df["update"].isna().tolist() == [True, False, True]
    assert df["draw_z_s"].isna().tolist() == [False, False, True]
    assert df.drop(columns=["update", "draw_z_s"]).iloc[0].equals(read_csv(path).drop(
        columns=["update", "draw_z_s"]).iloc[2])  # the old row kept whole
    assert not list(tmp_path.glob(".*widen"))


def test_concurrent_appends_never_interleave(tmp_path):
    path = tmp_path / "r.csv"

    def work(i):
        append_rows(path, [row(K=i, repeat=r, variant="x" * 500) for r in range(3)])

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, range(40)))
    df = read_csv(path)
    assert len(df) == 120
    assert sorted(df.groupby("K").size().unique()) == [3]
    assert set(df["variant"]) == {"x" * 500}


def test_concurrent_appends_lose_nothing_while_others_widen_the_file(tmp_path):
    # Twenty rounds: a writer that opened the file just after a widening could widen it again
    # (and unlink it) before the first appended, losing its rows in about one round of five.
    for round_ in range(20):
        path = tmp_path / f"r{round_}.csv"

        def work(i):  # every third writer brings a new column of its own
            extra = {f"metric_{i}": i} if i % 3 == 0 else {}
            append_rows(path, [row(K=i, repeat=r, **extra) for r in range(3)])

        with ThreadPoolExecutor(16) as pool:
            list(pool.map(work, range(60)))
        df = read_csv(path)
        assert len(df) == 180 and sorted(df.groupby("K").size().unique()) == [3], f"round {round_}"
        for i in range(0, 60, 3):
            assert df.loc[df["K"] == i, f"metric_{i}"].eq(i).all() and df[f"metric_{i}"].notna().sum() == 3


def test_torn_last_line_is_ignored_then_repaired(tmp_path):
    path = tmp_path / "r.csv"
    append_rows(path, [row(repeat=0), row(repeat=1)])
    with open(path, "a") as f:
        f.write("lda,alg1,cpu,f3")  # a writer died mid-line
    with pytest.warns(UserWarning, match="torn"):
        df = read_csv(path)
    assert list(df["repeat"]) == [0, 1]
    with pytest.warns(UserWarning, match="torn"):
        append_rows(path, [row(repeat=2)])
    assert list(read_csv(path)["repeat"]) == [0, 1, 2]


def test_torn_header_is_replaced(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("suite,vari")
    with pytest.warns(UserWarning, match="torn"):
        append_rows(path, [row()])
    assert len(read_csv(path)) == 1


def test_load_reads_only_the_suites_file_in_a_directory(tmp_path):
    append_rows(tmp_path / "lda.csv", [row(K=1)])
    append_rows(tmp_path / "lda-kernels.csv", [{"other": "schema"}])
    update_sidecar(tmp_path / "lda.json", None, schema=SCHEMA)
    df, schema, _ = load(tmp_path, "lda")
    assert list(df["K"]) == [1] and schema == SCHEMA


@pytest.mark.parametrize("content, message", [
    (b"\x00\xff\xfe garbage\n\x89PNG\x00\n", "not a"),
    (b"a,b\n1,2\n", "missing columns"),
])
def test_load_rejects_what_is_not_a_results_file(tmp_path, content, message):
    path = tmp_path / "lda.csv"
    path.write_bytes(content)
    update_sidecar(tmp_path / "lda.json", None, schema=SCHEMA)
    with pytest.raises(BenchError, match=message):
        load(path)


@pytest.mark.parametrize("edit, message", [
    (lambda schema: "x", "not a JSON object"),
    (lambda schema: {k: v for k, v in schema.items() if k != "reference"}, "no 'reference'"),
    (lambda schema: {**schema, "columns": {**schema["columns"], "seconds": {"role": "metric", "gate": "ratio"}}},
     "seconds: gate 'ratio', better None"),
    (lambda schema: {**schema, "columns": {**schema["columns"], "q": {"role": "metric", "better": "higher",
                                                                       "gate": "tolerance"}}}, "q: tolerance None"),
])
def test_load_refuses_a_schema_that_cannot_gate(tmp_path, edit, message):
    append_rows(tmp_path / "lda.csv", [row()])
    update_sidecar(tmp_path / "lda.json", None, schema=edit(SCHEMA))
    with pytest.raises(BenchError, match=f"lda.json: not a results schema \\({message}"):
        load(tmp_path / "lda.csv")


def test_load_names_a_row_without_a_value_of_an_axis(tmp_path):
    append_rows(tmp_path / "lda.csv", [row(K=32), row(K="")])
    update_sidecar(tmp_path / "lda.json", None, schema=SCHEMA)
    with pytest.raises(BenchError, match=r"lda.csv:3: no value of the axis 'K'"):
        load(tmp_path / "lda.csv")


def test_load_refuses_a_calibration_that_is_not_positive(tmp_path):
    schema = {**SCHEMA, "columns": {**SCHEMA["columns"], "calibration_s": {"role": "calibration", "unit": "s"}}}
    append_rows(tmp_path / "lda.csv", [row(repeat=0, calibration_s=0.1), row(repeat=1, calibration_s=0.0)])
    update_sidecar(tmp_path / "lda.json", None, schema=schema)
    with pytest.raises(BenchError, match="lda.csv:3: column 'calibration_s' holds 0.0: a calibration is positive"):
        load(tmp_path / "lda.csv")


def test_load_names_a_non_numeric_cell(tmp_path):
    path = tmp_path / "lda.csv"
    append_rows(path, [row(repeat=0), {**row(repeat=1), "seconds": "fast"}])
    update_sidecar(tmp_path / "lda.json", None, schema=SCHEMA)
    with pytest.raises(BenchError, match=r"lda.csv:3: column 'seconds' holds 'fast'"):
        load(path)
    with pytest.raises(BenchError, match="no such result file"):
        load(tmp_path / "missing.csv")


def test_identifiers_that_read_as_numbers_stay_text(tmp_path):
    """A code version of hex digits and one "e" is a float to a CSV reader (2814554e3348 is inf);
    run ids and point groups likewise."""
    path = tmp_path / "lda.csv"
    append_rows(path, [row(code_version="2814554e3348", group="1234", run_id="5e10")])
    update_sidecar(tmp_path / "lda.json", None, schema=SCHEMA)
    df, _, _ = load(path)
    assert df[["code_version", "group", "run_id"]].iloc[0].tolist() == ["2814554e3348", "1234", "5e10"]


def test_measured_repeats(tmp_path):
    path = tmp_path / "r.csv"
    append_rows(path, [row(variant=v, K=32, repeat=r) for v in ("alg1", "alg4") for r in range(2)])
    append_rows(path, [row(variant="alg7", K=64, code_version="old")])
    index = measured_repeats(path, SCHEMA, "v1", warmup=1)
    point = {"suite": "lda", "backend": "cpu", "precision": "f32", "K": 32}
    assert repeats_done(index, point, ["alg1", "alg4"]) == {"alg1": 2, "alg4": 2}
    assert repeats_done(index, {**point, "K": "32"}, ["alg1"]) == {"alg1": 2}  # compared as text
    assert repeats_done(index, {**point, "K": np.int64(32)}, ["alg4"]) == {"alg4": 2}
    assert repeats_done(index, point, ["alg1", "alg7"]) == {"alg1": 2, "alg7": 0}  # one variant missing
    assert repeats_done(index, {**point, "K": 64}, ["alg7"]) == {"alg7": 0}  # other code version
    assert repeats_done(measured_repeats(path, SCHEMA, "old", 1), {**point, "K": 64}, ["alg7"]) == {"alg7": 1}
    assert repeats_done(measured_repeats(path, SCHEMA, "v1", 2), point, ["alg1"]) == {"alg1": 0}  # other warm-up
    assert measured_repeats(tmp_path / "missing.csv", SCHEMA, "v1", 1) == {}


def test_sidecar_merges_and_replaces_atomically(tmp_path):
    path = tmp_path / "m" / "lda.json"
    assert read_sidecar(path) == {"runs": {}}
    update_sidecar(path, "r1", {"cpu_model": "A", "argv": ["bench", "run"]})
    update_sidecar(path, "r2", {"cpu_model": "B"})
    update_sidecar(path, "r1", {"finished": True})
    assert read_sidecar(path) == {
        "runs": {"r1": {"cpu_model": "A", "argv": ["bench", "run"], "finished": True}, "r2": {"cpu_model": "B"}}
    }
    update_sidecar(path, None, schema=SCHEMA)
    assert read_sidecar(path)["schema"] == SCHEMA and len(read_sidecar(path)["runs"]) == 2
    assert json.loads(path.read_text())["runs"]["r2"] == {"cpu_model": "B"}
    assert os.listdir(path.parent) == ["lda.json"]  # no temporary file left, nor a lock file


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_sidecar_gets_the_mode_of_an_ordinary_file(tmp_path, umask):
    """Not the 0600 of a temporary file: what open() gives under the process umask (0644 under 022)."""
    path = tmp_path / "lda.json"
    old = os.umask(umask)
    try:
        update_sidecar(path, "r1", {"cpu_model": "A"})
        (tmp_path / "ordinary").write_text("")
    finally:
        os.umask(old)
    mode = path.stat().st_mode & 0o777
    assert mode == (tmp_path / "ordinary").stat().st_mode & 0o777 == 0o666 & ~umask
    update_sidecar(path, "r2", {"cpu_model": "B"})  # replaced: the new file's mode, under this umask
    assert path.stat().st_mode & 0o777 == 0o666 & ~old


def test_collect_env_without_gpu_or_git(tmp_path, monkeypatch):
    monkeypatch.setattr(envinfo, "REPO_ROOT", tmp_path)  # a tree with no .git, as on the GPU machine
    monkeypatch.setenv("PATH", "")
    # CuPy importable but without a usable device.
    broken_runtime = types.SimpleNamespace(getDeviceCount=lambda: (_ for _ in ()).throw(RuntimeError("no device")))
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=broken_runtime)))
    env = envinfo.collect_env(["bench", "run", "--suite", "lda"])
    assert env["gpu_name"] is None and env["gpu_count"] is None and env["driver_version"] is None
    assert env["git_commit"] is None and env["git_dirty"] is None
    assert env["cpu_model"] and env["cpu_count"] >= 1
    assert env["versions"]["numpy"] == np.__version__
    assert env["command"] == "bench run --suite lda"
    assert env["timestamp"].endswith("+00:00")
    json.dumps(env)


def test_a_run_records_its_command_as_bench_and_its_folders_as_dir():
    started = ["/home/me/clone/bench/__main__.py", "sweep", "lda", "--out", "/home/me/res/gpu", "--figures=figs",
               "--k", "64", "--out"]
    assert envinfo.recorded_argv(started) == ["bench", "sweep", "lda", "--out", "DIR", "--figures=DIR", "--k", "64",
                                              "--out"]
    env = envinfo.collect_env(started)
    assert env["command"] == "bench sweep lda --out DIR --figures=DIR --k 64 --out" and env["argv"][0] == "bench"
    assert envinfo.recorded_argv(["/home/me/.venv/bin/bench", "list"]) == ["bench", "list"]  # the installed command
    assert envinfo.recorded_argv(["/usr/bin/pytest", "-q"]) == ["/usr/bin/pytest", "-q"]  # not bench: as it was


def test_collect_env_reads_a_gpu_through_cupy(monkeypatch):
    runtime = types.SimpleNamespace(
        getDeviceCount=lambda: 2,
        getDeviceProperties=lambda dev: {"name": b"NVIDIA H100 80GB HBM3"},
        deviceGetAttribute=lambda attr, dev: {13: 1980000, 36: 2619000}[attr],
        runtimeGetVersion=lambda: 12080,
        driverGetVersion=lambda: 13000,
    )
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime)))
    env = envinfo.collect_env([])
    assert env["gpu_name"] == "NVIDIA H100 80GB HBM3" and env["gpu_count"] == 2
    assert (env["gpu_max_sm_clock_mhz"], env["gpu_max_mem_clock_mhz"]) == (1980, 2619)
    assert (env["cuda_runtime"], env["cuda_driver_api"]) == ("12.8", "13.0")
    assert envinfo.machine_slug(env, "gpu") == "nvidia-h100-80gb-hbm3"


def test_machine_slug():
    env = {"cpu_model": "AMD EPYC", "cpu_count": 2, "gpu_name": None}
    assert envinfo.machine_slug(env, "cpu") == "cpu-amd-epyc-2c"
    intel = {"cpu_model": "Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.00GHz", "cpu_count": 16}
    assert envinfo.machine_slug(intel, "cpu") == "cpu-intel-xeon-platinum-8480-cpu-16c"
    with pytest.raises(ValueError):
        envinfo.machine_slug(env, "gpu")


def test_latest_code_keeps_every_run_of_the_newest_code_per_variant():
    def rows(variant, code, run, day):
        return [{"suite": "lda", "K": 8, "variant": variant, "repeat": r, "seconds": 1.0, "run_id": run,
                 "group": run, "code_version": code, "timestamp": f"2026-01-0{day}T00:00:00+00:00"}
                for r in range(2)]
    df = pd.DataFrame(rows("alg1", "old", "a", 1) + rows("alg1", "new", "b", 2) + rows("alg1", "new", "c", 3)
                      + rows("alg4", "old", "a", 1))
    kept = latest_code(df, {"columns": {"suite": AXIS, "K": AXIS}})
    assert sorted(set(zip(kept["variant"], kept["run_id"]))) == [("alg1", "b"), ("alg1", "c"), ("alg4", "a")]


@pytest.mark.parametrize("column, value, message", [
    ("seconds", "-1", "a run takes a positive time"), ("seconds", "0", "a run takes a positive time"),
    ("seconds", "inf", "not a finite number"), ("seconds", "", "a run takes a positive time"),
    ("draw_z_s", "-0.5", "never negative"), ("tokens", "-3", "never negative"),
    ("suite", "", "the row does not parse"),
])
def test_impossible_values_name_the_file_and_row(tmp_path, column, value, message):
    from bench.suite import get_suite

    suite = get_suite("lda")
    schema = results.schema_for(suite)
    columns = results.row_columns(schema)
    good = {c: "1" for c in columns}
    good.update(suite="lda", backend="cpu", variant="alg1", run_id="r", code_version="c", group="g",
                timestamp="2026-01-01T00:00:00+00:00")
    rows = [dict(good), dict(good, **{column: value}), dict(good)]
    path = tmp_path / "lda.csv"
    results.append_rows(path, rows, columns)
    with pytest.raises(BenchError, match=rf"lda.csv:3: .*{message}"):
        results.load(path, "lda", lambda name: schema)


def test_a_garbage_line_in_the_middle_is_refused(tmp_path):
    from bench.suite import get_suite

    schema = results.schema_for(get_suite("lda"))
    columns = results.row_columns(schema)
    good = {c: "1" for c in columns}
    good.update(suite="lda", backend="cpu", variant="alg1", run_id="r", code_version="c")
    path = tmp_path / "lda.csv"
    results.append_rows(path, [good], columns)
    with open(path, "a") as f:
        f.write("garbage\n")
    results.append_rows(path, [good], columns)
    with pytest.raises(BenchError, match="lda.csv:3: the row does not parse"):
        results.load(path, "lda", lambda name: schema)


def test_an_infinite_error_is_a_value_not_a_fault(tmp_path):
    from bench.suite import get_suite

    suite = get_suite("sumrv")  # writes max_rel_error = inf where a variant's output is NaN
    schema = results.schema_for(suite)
    columns = results.row_columns(schema)
    good = {c: "1" for c in columns}
    good.update(suite="sumrv", backend="cpu", variant="naive", run_id="r", code_version="c", max_rel_error="inf")
    path = tmp_path / "sumrv.csv"
    results.append_rows(path, [good], columns)
    df, _, _ = results.load(path, "sumrv", lambda name: schema)
    assert np.isinf(df["max_rel_error"]).all()


def test_a_claim_of_this_pid_is_a_dead_process_s(tmp_path):
    import socket

    point = {"n": 64}
    first = results.Claims(tmp_path, "fake")
    assert first.take(point)
    [claim] = first.held
    first.held.clear()  # as if an earlier process with this pid had died holding it
    assert claim.read_text() == f"{socket.gethostname()} {os.getpid()}"
    assert results.Claims(tmp_path, "fake").take(point)
    claim.write_text(f"another-host {os.getpid()}")  # another host's process: cannot tell, so it holds
    assert not results.Claims(tmp_path, "fake").take(point)


def test_a_claim_is_taken_where_another_process_removed_the_emptied_claims_folder_meanwhile(tmp_path, monkeypatch):
    """Another sweep's release() may remove the claims folder between this one's mkdir and
    its claim: the claim is made all the same (CI once failed so)."""
    claims = results.Claims(tmp_path, "fake")
    real_open, calls = os.open, []

    def open_after_a_release(path, *args):
        if not calls:
            claims.directory.rmdir()  # the other process's release(), just now
        calls.append(path)
        return real_open(path, *args)

    monkeypatch.setattr(results.os, "open", open_after_a_release)
    assert claims.take({"n": 64})
    assert len(calls) == 2 and claims.held[0].exists()
