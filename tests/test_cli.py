"""The `bench` command end to end, as a user runs it (python -m bench)."""

import gzip
import subprocess
import sys

import pytest


def bench(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True, text=True, cwd=cwd)


def assert_one_line_error(result, *fragments):
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.parametrize("args, fragments", [
    (["sweep", "--backend", "cpu", "--k", "4..x"], ["bad K spec '4..x'"]),
    (["sweep", "--backend", "cpu", "--variant", "alg9"], ["unknown variant 'alg9'", "alg7"]),
    (["sweep", "--backend", "cpu", "--dataset", "nope"], ["unknown dataset 'nope'", "wiki-synth"]),
    (["sweep", "--backend", "quantum"], ["unknown backend 'quantum'"]),
    (["verify", "--backend", "cpu", "--k", "0"], ["K must be >= 1"]),
    (["check", "missing.csv", "--baseline", "missing.csv"], ["no such result file"]),
])
def test_usage_errors_are_one_line(args, fragments):
    assert_one_line_error(bench(*args), *fragments)


def test_malformed_corpus_names_file_and_line(tmp_path):
    path = tmp_path / "docword.bad.txt.gz"
    with gzip.open(path, "wt") as f:
        f.write("2\n3\n2\n1 1 1\n1 x 2\n")
    result = bench("data", "info", str(path))
    assert_one_line_error(result, "docword.bad.txt.gz", ":5")


def test_truncated_gzip(tmp_path):
    good = gzip.compress(b"2\n3\n2\n1 1 1\n2 3 2\n" * 50)
    path = tmp_path / "docword.cut.txt.gz"
    path.write_bytes(good[: len(good) // 2])
    assert_one_line_error(bench("data", "info", str(path)), "docword.cut.txt.gz")


def test_verify_reports_identical_z():
    result = bench("verify", "--backend", "cpu", "--k", "1..6", "--warp", "8")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "12 of 12 points pass" in result.stdout


def test_sweep_check_and_figures_end_to_end(tmp_path):
    out = tmp_path / "machine"
    sweep = bench("sweep", "--backend", "cpu", "--dataset", "tiny", "--k", "8,16", "--precision", "f32",
                  "--iterations", "1", "--repeats", "3", "--out", str(out))
    assert sweep.returncode == 0, sweep.stderr
    assert (out / "lda.csv").exists() and (out / "lda.json").exists()
    again = bench("sweep", "--backend", "cpu", "--dataset", "tiny", "--k", "8,16", "--precision", "f32",
                  "--iterations", "1", "--repeats", "3", "--out", str(out))
    assert "2 of 2 points already" in again.stderr
    check = bench("check", str(out / "lda.csv"), "--baseline", str(out / "lda.csv"))
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SAME" in check.stdout
    figures = bench("figures", "--results", str(tmp_path), "--out", str(tmp_path / "figs"))
    assert figures.returncode == 0, figures.stderr
    assert (tmp_path / "figs" / "machine" / "fig7a-time-vs-k-f32.png").exists()


def test_list_and_env():
    listing = bench("list")
    assert listing.returncode == 0 and "alg7" in listing.stdout and "butterfly" in listing.stdout
    env = bench("env")
    assert env.returncode == 0 and "cpu_model" in env.stdout or "cpu" in env.stdout
