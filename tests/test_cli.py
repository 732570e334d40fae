"""The `bench` command end to end, as a user runs it (python -m bench): bad input
ends in one line and exit 2, a regression in exit 1, and a suite unlike lda (the
fake suite) goes through sweep, resume, check and figures with no special case."""

import gzip
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

TESTS = Path(__file__).resolve().parent
ENV = {**os.environ, "BENCH_SUITES": "fake=fake_suite",
       "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)])}


def bench(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "bench", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=ENV)


def measured_apart(source: Path, dest: Path, edit=lambda df: df) -> Path:
    """dest: the results (a CSV, or a folder's CSVs) of source as if measured again in other
    processes (other run ids; bench check refuses a run on both sides), edited by `edit`."""
    files = sorted(source.glob("*.csv")) if source.is_dir() else [source]
    folder = dest if source.is_dir() else dest.parent
    folder.mkdir(parents=True, exist_ok=True)
    for csv in files:
        df = pd.read_csv(csv)
        if "run_id" in df:  # results, not a table beside them
            edit(df.assign(run_id=df["run_id"] + "-again")).to_csv(folder / csv.name, index=False)
        if csv.with_suffix(".json").exists():
            (folder / csv.with_suffix(".json").name).write_text(csv.with_suffix(".json").read_text())
    return dest


def assert_one_line_error(result, *fragments, code=2):
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) >= 1 and lines[-1].startswith("error:"), result.stderr
    assert not [line for line in lines[:-1] if "error" in line.lower()], result.stderr
    for fragment in fragments:
        assert fragment in lines[-1], lines[-1]


@pytest.mark.parametrize("args, fragments", [
    (["sweep", "--backend", "cpu", "--k", "4..x"], ["bad K spec '4..x'"]),
    (["sweep", "--backend", "cpu", "--variant", "alg9"], ["unknown variant 'alg9'", "alg7"]),
    (["sweep", "--backend", "cpu", "--dataset", "nope"], ["unknown dataset 'nope'", "wiki-synth"]),
    (["sweep", "--backend", "quantum"], ["unknown backend 'quantum'"]),
    (["sweep", "--backend", "cpu", "--size", "4"], ["suite lda has no axis 'size'"]),
    (["sweep", "--backend", "cpu", "--repeats", "x"], ["--repeats"]),
    (["sweep", "--backend", "cpu", "--repeats", "0"], ["--repeats >= 1"]),
    (["sweep", "--backend", "cpu", "--flush-l2"], ["--flush-l2"]),
    (["sweep", "nosuch"], ["unknown suite 'nosuch'", "lda"]),
    (["sweep", "--backend", "cpu", "--k", "64", "--dataset", "kos", "--scale", "0.01"],
     ["every combination is invalid", "kos is a real corpus"]),
    (["sweep", "--backend", "cpu", "-a", "K"], ["expected NAME=SPEC"]),
    (["verify", "--backend", "cpu", "--k", "0"], ["K must be >= 1"]),
    (["sweep", "lda-kernels", "--backend", "cpu", "--k", "99999999999", "--dry-run"], ["K must be <= 65536"]),
    (["check", "missing.csv", "--baseline", "missing.csv"], ["no such result file: missing.csv"]),
    (["check", "x.csv", "--baseline", "y.csv", "--format", "xml"], ["unknown format 'xml'"]),
    (["check", "x.csv", "--baseline", "y.csv", "--threshold", "10"], ["a fraction (0.1: 10%)", "got 10.0"]),
    (["check", "x.csv", "--baseline", "y.csv", "--calibration-threshold", "inf"], ["--calibration-threshold"]),
    (["figures", "--results", "no-such-dir"], ["no-such-dir: not a directory"]),
    (["sweep", "fake", "--n="], ["option --n= needs a value"]),
    (["sweep", "fake", "--out", "README.md"], ["--out README.md: not a directory"]),
    (["sweep", "fake", "--out", "/proc/no-such/x"], ["--out /proc/no-such/x: cannot create it", "/proc/no-such"]),
    (["sweep", "fake", "--variant", ""], ["no variant given", "plain"]),
    (["sweep", "fake", "--repeats", "3", "--max-repeats", "2"], ["--max-repeats 2 is below --repeats 3"]),
    (["sweep", "fake", "--max-noise", "-1"], ["--max-noise must be 0 (off) or in (0, 1)"]),
    (["verify", "fake"], ["suite fake has no verification"]),
    (["sweep", "saber", "--backend", "cpu", "--dataset", "tiny", "--K", "40000"], ["K must be <= 32768"]),
    (["verify", "saber", "--backend", "cpu", "--K", "33", "--memory", "-1"], ["memory"]),
    (["sweep", "saber", "--backend", "cpu", "--dataset", "tiny", "--threads", "48"], ["multiple of 32", "48"]),
])
def test_usage_errors_are_one_line(args, fragments):
    assert_one_line_error(bench(*args), *fragments)


def test_a_memory_budget_too_small_for_one_chunk_is_a_one_line_error(tmp_path):
    result = bench("sweep", "saber", "--backend", "cpu", "--dataset", "tiny", "--scale", "1", "--K", "1000",
                   "--memory", "0.001", "--out", tmp_path)
    assert_one_line_error(result, "memory budget 0.001 GiB is too small for one chunk", "K = 1000")
    assert not list(tmp_path.iterdir())  # nothing measured


def test_version_list_and_dry_run():
    assert bench("--version").stdout.startswith("bench ")
    listing = bench("list")
    assert listing.returncode == 0 and "lda" in listing.stdout and "fake" in listing.stdout
    detail = bench("list", "fake")
    assert detail.returncode == 0
    for text in ("2^6..2^8", "tunable", "no_such_package_xyz (missing)", "tolerance 5% of base", "iteration"):
        assert text in detail.stdout, text
    dry = bench("sweep", "fake", "-a", "n=16..4096:*4", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "7 points, 14 (point, variant) pairs; nothing measured" in dry.stdout
    assert "variant peerlib skipped: needs no_such_package_xyz" in dry.stderr
    assert "point(s) skipped: the loop method is too slow" in dry.stderr
    assert "bench sweep" not in dry.stderr and not list(TESTS.parent.glob("results/*/fake.csv"))


def test_a_dry_run_says_which_points_are_already_measured(tmp_path):
    assert bench("sweep", "fake", "--n", "64", "--repeats", "1", "--out", tmp_path).returncode == 0
    dry = bench("sweep", "fake", "--n", "64,128", "--repeats", "1", "--out", tmp_path, "--dry-run")
    assert dry.returncode == 0 and "4 points, 8 (point, variant) pairs, 2 of them already measured" in dry.stdout


@pytest.mark.real_corpus("kos")
def test_defaults_fit_a_real_corpus():
    dry = bench("sweep", "--backend", "cpu", "--k", "64", "--dataset", "kos", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "dataset=kos scale=1.0" in dry.stdout


def test_results_of_a_sweep_out_folder_are_not_taken_for_machines(tmp_path):
    """`bench sweep --out DIR` writes DIR/<suite>.csv; report and figures read DIR/<machine>/."""
    (tmp_path / "lda.csv").write_text("suite\n")
    for command in ("report", "figures"):
        assert_one_line_error(bench(command, "--results", tmp_path, "--figures", tmp_path / "figures"),
                              "holds results itself", "--out DIR/<machine>")


def test_a_point_too_large_for_memory_is_one_line(monkeypatch, capsys):
    from bench import cli

    def allocate(**kwargs):
        raise MemoryError("Unable to allocate 167. GiB for an array with shape (448, 100000000)")

    monkeypatch.setattr(cli, "app", allocate)
    with pytest.raises(SystemExit) as exit:
        cli.main()
    assert exit.value.code == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: out of memory: Unable to allocate 167. GiB") and "smaller point" in line


def test_malformed_corpus_names_file_and_line(tmp_path):
    path = tmp_path / "docword.bad.txt.gz"
    with gzip.open(path, "wt") as f:
        f.write("2\n3\n2\n1 1 1\n1 x 2\n")
    assert_one_line_error(bench("data", "info", path), "docword.bad.txt.gz", ":5")
    ldac = tmp_path / "huge.ldac"
    ldac.write_text("1 3:1\n1 99999999999999999999:1\n")
    assert_one_line_error(bench("data", "info", ldac), "huge.ldac", ":2")


def test_truncated_gzip_and_synth_over_a_file(tmp_path):
    good = gzip.compress(b"2\n3\n2\n1 1 1\n2 3 2\n" * 50)
    path = tmp_path / "docword.cut.txt.gz"
    path.write_bytes(good[: len(good) // 2])
    assert_one_line_error(bench("data", "info", path), "docword.cut.txt.gz")
    existing = tmp_path / "afile"
    existing.write_text("keep me")
    assert_one_line_error(bench("data", "synth", "tiny", "--out", existing), "afile", "not a directory")
    assert existing.read_text() == "keep me"


def test_a_sweep_refused_before_it_measures_leaves_no_results_folder(tmp_path):
    out = tmp_path / "new" / "results"
    assert_one_line_error(bench("sweep", "fake", "--n", "7", "--out", out), "n = 7 does not fit")
    assert not (tmp_path / "new").exists()
    measured = bench("sweep", "fake", "--n", "64", "--method", "vector", "--out", out)
    assert measured.returncode == 0, measured.stderr
    assert (out / "fake.csv").exists()
    assert sorted(path.name for path in out.iterdir()) == ["fake-series.csv", "fake.csv", "fake.json"]


def test_verify_reports_every_variant():
    result = bench("verify", "--backend", "cpu", "--k", "1..6", "--warp", "8")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "84 of 84 checks pass (12 points, 7 variants)" in result.stdout


def test_fake_suite_sweep_resume_check_and_figures(tmp_path):
    out = tmp_path / "results" / "machine"
    sweep = bench("sweep", "fake", "-a", "n=64,128", "--repeats", "4", "--out", out)
    assert sweep.returncode == 0, sweep.stderr
    df = pd.read_csv(out / "fake.csv")
    assert len(df) == 2 * 2 * 2 * 4 and set(df["variant"]) == {"plain", "twice"}
    assert (out / "fake-series.csv").exists() and (out / "fake.json").exists()
    again = bench("sweep", "fake", "--n", "64,128", "--repeats", "4", "--out", out)
    assert "4 of 4 points already have 4 repeats" in again.stderr

    # The check's verdicts below must not hang on this machine's noise (a disturbed repeat on a loaded
    # 2-core runner once hid a 10x regression): steady, distinct times stand in for the measured ones.
    twice = df["variant"].eq("twice")
    df["seconds"] = 1e-4 * df["n"] / 64 * (1 + twice) * (1 + 0.01 * df["repeat"].where(twice, 3 - df["repeat"]))
    df.to_csv(out / "fake.csv", index=False)
    assert_one_line_error(bench("check", out / "fake.csv", "--baseline", out / "fake.csv"), "measured apart")
    same = bench("check", measured_apart(out / "fake.csv", tmp_path / "same" / "fake.csv"), "--baseline",
                 out / "fake.csv")
    assert same.returncode == 0, same.stdout + same.stderr
    assert "SAME" in same.stdout and "regression" not in same.stdout

    def slower(df):
        df.loc[df["variant"] == "twice", "seconds"] *= 3
        df.loc[df["variant"] == "plain", "quality"] *= 0.5
        return df[df["n"] == 64]

    measured_apart(out / "fake.csv", tmp_path / "new" / "fake.csv", slower)
    regression = bench("check", tmp_path / "new" / "fake.csv", "--baseline", out / "fake.csv", "--format", "markdown")
    assert regression.returncode == 1, regression.stdout + regression.stderr
    assert "| SLOWER |" in regression.stdout and "| WORSE |" in regression.stdout
    assert "| MISSING |" in regression.stdout and "-> regression" in regression.stderr
    part = measured_apart(out / "fake.csv", tmp_path / "part" / "fake.csv", lambda df: df[df["n"] == 64])
    allowed = bench("check", part, "--baseline", out / "fake.csv", "--format", "json", "--allow-missing",
                    "--metric", "seconds")
    assert allowed.returncode == 0, allowed.stdout
    rows = json.loads(allowed.stdout[: allowed.stdout.rindex("}") + 1])["suites"][0]["rows"]
    assert {r["verdict"] for r in rows} == {"SAME", "MISSING"}

    figures = bench("figures", "--results", tmp_path / "results", "--figures", tmp_path / "figs")
    assert figures.returncode == 0, figures.stderr
    written = {Path(line).name for line in figures.stdout.split()}
    assert {"fake-time-vs-n-method-vector.png", "fake-time-vs-n-method-loop.png"} <= written
    # One convergence figure per point (never pooled over n or method).
    assert {"fake-convergence-n-64-method-vector.png", "fake-convergence-n-128-method-loop.png"} <= written


def test_bad_results_files_are_one_line_errors(tmp_path):
    out = tmp_path / "results" / "good"
    assert bench("sweep", "fake", "-a", "n=64,128", "-a", "method=vector", "--out", out).returncode == 0
    header = (out / "fake.csv").read_text().splitlines()[0].split(",")
    bad = tmp_path / "bad"
    bad.mkdir()
    cells = ["fast" if c == "seconds" else "1" for c in header]
    (bad / "fake.csv").write_text(",".join(header) + "\n" + ",".join(cells) + "\n")
    (bad / "fake.json").write_text((out / "fake.json").read_text())
    assert_one_line_error(bench("check", bad / "fake.csv", "--baseline", out / "fake.csv"),
                          "fake.csv:2", "'seconds' holds 'fast'")
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    assert_one_line_error(bench("check", other, "--baseline", out / "fake.csv"), "other.csv")
    garbage = tmp_path / "garbage.csv"
    garbage.write_bytes(b"\x00\xff\x89PNG\r\n\x1a\n\x00\x00garbage")
    assert_one_line_error(bench("check", garbage, "--baseline", out / "fake.csv", "--suite", "fake"), "garbage.csv")
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    (wrong / "fake.csv").write_text("x,y\n1,2\n")
    assert_one_line_error(bench("sweep", "fake", "-a", "n=64", "--out", wrong), "fake.csv", "--out")

    # A bad file in one machine's folder is reported; the other machines are drawn.
    (tmp_path / "results" / "aaa-broken").mkdir()
    (tmp_path / "results" / "aaa-broken" / "fake.csv").write_bytes(b"\x00\x01garbage\n\xff,\xfe\n")
    figures = bench("figures", "--results", tmp_path / "results", "--figures", tmp_path / "figs")
    assert figures.returncode == 0, figures.stderr
    assert "skipped:" in figures.stderr and "aaa-broken" in figures.stderr and "Traceback" not in figures.stderr
    assert (tmp_path / "figs" / "good" / "fake-time-vs-n-method-vector.png").exists()
    report = bench("report", "--results", tmp_path / "results", "--figures", tmp_path / "figs")
    assert report.returncode == 0, report.stderr
    assert "warning: fake's results cannot be read" in " ".join(report.stderr.split())
    assert "Its results cannot be read" in (tmp_path / "results" / "aaa-broken" / "REPORT.md").read_text()


def test_lda_sweep_check_and_figures_end_to_end(tmp_path):
    out = tmp_path / "machine"
    args = ("sweep", "--backend", "cpu", "--dataset", "tiny", "--k", "8,16", "--precision", "f32",
            "--iterations", "1", "--repeats", "3", "--out", out)
    sweep = bench(*args)
    assert sweep.returncode == 0, sweep.stderr
    assert "2 of 2 points already" in bench(*args).stderr
    check = bench("check", measured_apart(out, tmp_path / "again"), "--baseline", out)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SAME" in check.stdout and "calibration" in check.stdout
    figures = bench("figures", "--results", tmp_path, "--figures", tmp_path / "figs")
    assert figures.returncode == 0, figures.stderr
    assert (tmp_path / "figs" / "machine" / "fig7a-time-vs-k-f32.png").exists()
    report = (tmp_path / "machine" / "REPORT.md").read_text()
    assert "| ST1 |" in report and "not measured here: no GPU runs in these results" in report  # a GPU claim


def test_figures_of_results_too_few_to_draw_say_so(tmp_path):
    out = tmp_path / "results" / "machine"
    sweep = bench("sweep", "--backend", "cpu", "--dataset", "tiny", "--k", "8", "--precision", "f32", "--iterations",
                  "1", "--repeats", "1", "--out", out)
    assert sweep.returncode == 0, sweep.stderr
    figures = bench("figures", "--results", tmp_path / "results", "--figures", tmp_path / "figs")
    assert figures.returncode == 0 and "hold no figure's points yet" in " ".join(figures.stderr.split())
    (tmp_path / "empty").mkdir()
    empty = bench("figures", "--results", tmp_path / "empty", "--figures", tmp_path / "figs2")
    assert empty.returncode == 0 and "no results under" in empty.stderr


def test_env_names_this_machine():
    env = bench("env")
    assert env.returncode == 0 and '"cpu_model"' in env.stdout
    from bench import envinfo
    from bench.backend import resolve_backend

    folder = envinfo.machine_slug(envinfo.collect_env([]), resolve_backend("auto", ("cpu", "gpu")))
    assert f'"results_folder": "{folder}"' in env.stdout  # where a run's results go


def test_two_identical_sweeps_at_once_measure_each_point_once(tmp_path):
    out = tmp_path / "results"
    env = {**ENV, "FAKE_SUITE_SLEEP": "0.7"}
    args = [sys.executable, "-m", "bench", "sweep", "fake", "-a", "n=64,128", "--out", str(out)]
    runs = [subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    outputs = [run.communicate(timeout=300) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    df = pd.read_csv(out / "fake.csv")
    measured = df.groupby(["n", "method", "variant", "repeat"]).size()
    assert len(measured) == 4 * 2 * 2 and (measured == 1).all()  # 4 points, 2 variants, 2 repeats: once each
    said = " ".join(err for _, err in outputs)
    assert "another process was measuring them" in said or "already have" in said
    assert not (out / ".fake.claims").exists()  # released


def test_a_claim_of_a_dead_process_is_taken_over(tmp_path):
    from bench.results import Claims

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    point = {"n": 64, "method": "loop"}
    first = Claims(tmp_path, "fake")
    assert first.take(point)
    [claim] = first.held
    claim.write_text(f"{socket.gethostname()} {dead.stdout.strip()}")  # as if its process had died holding it
    assert Claims(tmp_path, "fake").take(point)
    claim.write_text(f"{socket.gethostname()} {os.getppid()}")  # a live process
    assert not Claims(tmp_path, "fake").take(point)


def test_data_list_gives_every_corpus_its_tokens_exact_or_estimated():
    listed = bench("data", "list")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split("│")[1].strip(): line for line in listed.stdout.splitlines() if line.count("│") > 5}
    assert "467714" in rows["kos"] and "about 6400000" in rows["enron"]  # enron: UCI's estimate only
