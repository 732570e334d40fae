"""`bench reproduce` and `bench report` end to end on the fake suite's recipes and claims:
the plan, resume, the budget, a failing recipe beside a good one, and a report that the
same results write byte for byte."""

import json

import pandas as pd
import pytest

from bench.recipes import Size, size
from bench.reproduce import parse_duration
from test_cli import assert_one_line_error, bench, measured_apart


def test_size_splits_settings_from_axes():
    chosen = size(K="4..1024", iterations=3, repeats=2, gpus=2)
    assert chosen == Size(axes={"K": "4..1024", "iterations": "3"}, repeats=2, gpus=2)


@pytest.mark.parametrize("text, seconds", [("600", 600), ("90s", 90), ("9m", 540), ("1h30m", 5400), ("2.5h", 9000)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("args, fragments", [
    (["reproduce", "nosuch", "--profile", "cpu"], ["unknown suite 'nosuch'", "fake"]),
    (["reproduce", "fake:nope", "--profile", "cpu"], ["unknown recipe 'nope' of suite fake", "fig1"]),
    (["reproduce", "fake", "--profile", "huge"], ["unknown profile 'huge'", "quick"]),
    (["reproduce", "fake", "--profile", "cpu", "--budget", "soon"], ["bad duration 'soon'"]),
    (["reproduce", "lda-kernels", "--profile", "cpu"], ["declares no recipes"]),
    (["reproduce", "fake", "--profile", "cpu", "--dry-run", "--estimate-from", "nosuch", "--results", "results"],
     ["--estimate-from nosuch: no such machine's results under results", "nvidia-h200"]),
])
def test_bad_input_is_one_line(args, fragments):
    assert_one_line_error(bench(*args), *fragments)


def test_dry_run_plans_every_profile_and_measures_nothing(tmp_path):
    for profile, points in (("cpu", 4), ("paper", 13)):
        dry = bench("reproduce", "fake", "--profile", profile, "--dry-run", "--results", tmp_path / "r")
        assert dry.returncode == 0, dry.stderr
        assert f"{points} points to measure" in dry.stdout
        assert "no estimate" in dry.stdout
    quick = bench("reproduce", "fake:fig1", "--profile", "quick", "--dry-run", "--results", tmp_path / "r")
    assert "fake:fig1: Figure 1: time against n" in quick.stderr and "fake: 5 points" in quick.stderr
    unlucky = bench("reproduce", "fake:unlucky", "--profile", "quick", "--dry-run", "--results", tmp_path / "r")
    assert "fake:unlucky: Figure 2: a size that fails (not in the quick profile)" in unlucky.stderr
    assert not (tmp_path / "r").exists()


def test_reproduce_measures_draws_reports_and_resumes(tmp_path):
    results, figures = tmp_path / "results", tmp_path / "figures"
    run = bench("reproduce", "fake", "--profile", "cpu", "--results", results, "--figures", figures)
    # The unlucky recipe fails; the other is measured, drawn and reported all the same.
    assert run.returncode == 1, run.stdout + run.stderr
    assert "fake:unlucky" in run.stderr and "unlucky" in run.stderr
    [machine] = [p for p in results.iterdir() if p.is_dir()]
    df = pd.read_csv(machine / "fake.csv")
    assert set(df["n"]) == {64, 128} and set(df["variant"]) == {"plain", "twice"}
    assert (figures / machine.name / "fake-time-vs-n-method-vector.png").exists()
    report = (machine / "REPORT.md").read_text()
    assert "### fig1: Figure 1: time against n" in report
    assert f"](../../figures/{machine.name}/fake-time-vs-n-method-vector.png)" in report
    assert "| F1 | twice does the work twice: 2x slower | twice takes" in report
    assert "| F2 |" in report and "not measured here" in report
    assert "A Fake Paper, A. Author" in report

    again = bench("reproduce", "fake:fig1", "--profile", "cpu", "--results", results, "--figures", figures)
    assert again.returncode == 0, again.stderr
    assert "0 points to measure" in again.stdout
    assert len(pd.read_csv(machine / "fake.csv")) == len(df)

    assert bench("report", "--results", results, "--figures", figures).returncode == 0
    assert (machine / "REPORT.md").read_text() == report  # the same results, the same bytes


def _donor(results, machine, walls):
    """results/donor: machine's rows with point timestamps `walls` seconds apart."""
    donor = results / "donor"
    donor.mkdir()
    df = pd.read_csv(machine / "fake.csv")
    start = pd.Timestamp("2026-01-01T00:00:00Z")
    groups = list(dict.fromkeys(df["group"]))
    times = dict(zip(groups, (start + pd.Timedelta(seconds=sum(walls[: i + 1])) for i in range(len(groups)))))
    df["timestamp"] = df["group"].map(lambda g: times[g].isoformat())
    df.to_csv(donor / "fake.csv", index=False)
    sidecar = json.loads((machine / "fake.json").read_text())
    for run in sidecar["runs"].values():
        run["timestamp"] = start.isoformat()
    (donor / "fake.json").write_text(json.dumps(sidecar))
    return donor


def test_budget_too_short_and_a_stop_that_resumes(tmp_path):
    results, figures = tmp_path / "results", tmp_path / "figures"
    first = bench("reproduce", "fake:fig1", "--profile", "cpu", "--results", results, "--figures", figures)
    assert first.returncode == 0, first.stderr
    [machine] = [p for p in results.iterdir() if p.is_dir()]
    measured = pd.read_csv(machine / "fake.csv")
    # The first point took 1 s, the others 500 s each.
    _donor(results, machine, [1] + [500] * (measured["group"].nunique() - 1))
    (machine / "fake.csv").unlink()
    short = bench("reproduce", "fake:fig1", "--profile", "cpu", "--budget", "0.5s", "--estimate-from", "donor",
                  "--results", results, "--figures", figures)
    assert_one_line_error(short, "--budget 0.5s is too short for any point")
    stopped = bench("reproduce", "fake:fig1", "--profile", "cpu", "--budget", "60", "--estimate-from", "donor",
                    "--results", results, "--figures", figures)
    assert stopped.returncode == 3, stopped.stdout + stopped.stderr
    assert "stopped by the budget" in stopped.stderr and "run the same command again" in stopped.stderr
    assert "2 points left" in " ".join(stopped.stderr.split())
    assert pd.read_csv(machine / "fake.csv")["group"].nunique() == 1
    assert (machine / "REPORT.md").exists()  # drawn and reported before stopping
    rest = bench("reproduce", "fake:fig1", "--profile", "cpu", "--results", results, "--figures", figures)
    assert rest.returncode == 0, rest.stderr
    assert "2 points to measure" in rest.stdout


def test_a_results_folder_that_cannot_be_written_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert_one_line_error(bench("reproduce", "fake:fig1", "--profile", "cpu", "--results", blocker), "--results",
                          "cannot create it")


def test_the_ci_profile_measures_the_gate_apart_and_bench_check_reads_every_suite(tmp_path, monkeypatch):
    results, figures = tmp_path / "results", tmp_path / "figures"
    dry = bench("reproduce", "fake", "--profile", "ci", "--dry-run", "--results", results)
    assert "fake:ci: the regression gate" in dry.stderr and "fig1" not in dry.stderr  # the gate alone
    assert "1 points to measure" in dry.stdout
    for _ in range(2):  # two runs, as CI measures the gate in separate processes
        run = bench("reproduce", "fake", "--profile", "ci", "--fresh", "--results", results, "--figures", figures)
        assert run.returncode == 0, run.stderr
        assert "for bench check; no figures" in run.stdout
    [machine] = [p for p in results.iterdir() if p.is_dir()]
    gate = machine / "ci"
    df = pd.read_csv(gate / "fake.csv")
    assert df["run_id"].nunique() == 2 and set(df["n"]) == {64} and set(df["variant"]) == {"plain", "twice"}
    assert not (machine / "fake.csv").exists() and not figures.exists()  # never among the figures' results

    same = bench("check", measured_apart(gate, tmp_path / "again"), "--baseline", gate)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "fake: " in same.stdout and "SAME" in same.stdout
    empty = tmp_path / "empty"
    empty.mkdir()
    for allow in ((), ("--allow-missing",)):  # comparing nothing is no check, allowed or not
        assert_one_line_error(bench("check", empty, "--baseline", gate, *allow), "none of BASE's suites (fake)")
    assert_one_line_error(bench("check", gate, "--baseline", gate / "fake.csv"), "not a directory")
    assert_one_line_error(bench("check", gate, "--baseline", empty), "no results of any suite")

    # benchmarks/detection.py --measured: each process of a folder measured elsewhere is a CI run of its own.
    import importlib.util
    from pathlib import Path

    monkeypatch.setenv("BENCH_SUITES", "fake=fake_suite")  # the suite in this process too
    spec = importlib.util.spec_from_file_location("detection", Path(__file__).parent.parent / "benchmarks" / "detection.py")
    detection = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(detection)
    runs = detection.measured_runs([measured_apart(gate, tmp_path / "elsewhere")], "fake", tmp_path / "split")
    assert len(runs) == 2 and [pd.read_csv(run / "fake.csv")["run_id"].nunique() for run in runs] == [1, 1]
    assert [detection.check(run, gate, 0.1, 0.25)[0] for run in runs] == [0, 0]


def test_every_suite_is_gated_on_the_cpu_and_on_a_gpu():
    from bench import harness
    from bench.results import gated_metrics, schema_for
    from bench.suite import all_suites, get_suite

    sweeps = [(sweep, backend) for suite in all_suites() for recipe in suite.recipes if recipe.name == "ci"
              for sweep in recipe.sweeps for backend in ("cpu", "gpu") if sweep.at("ci", backend)]
    names = {suite.name for suite in all_suites()} - {"fake"}
    for backend in ("cpu", "gpu"):
        assert {sweep.suite for sweep, on in sweeps if on == backend} == names, backend
    for sweep, backend in sweeps:
        suite = get_suite(sweep.suite)
        plan = harness.plan(suite, sweep.specs("ci", backend), backend, list(sweep.variants) or None)
        reference = suite.gpu_reference or suite.reference if backend == "gpu" else suite.reference
        assert reference in dict(plan.variants), (sweep.suite, backend)  # every ratio has its denominator
        assert len(plan.points) <= 8 and "seconds" in gated_metrics(schema_for(suite))
    # Quality by tolerance where a suite has one: the errors, the fits' end values.
    tolerance = {name: [m for m, role in gated_metrics(schema_for(get_suite(name))).items()
                        if role["gate"] == "tolerance"] for name in names}
    assert tolerance["sumrv"] == ["max_rel_error"] and tolerance["saber-fit"] == ["final_loglik"]
    assert tolerance["admodel"] == ["f_rel_error", "grad_rel_error"] and tolerance["admodel-fit"] == ["final_objective"]


def test_the_estimate_is_per_run_of_a_variant_so_a_resumed_group_counts_alike():
    from bench.reproduce import Estimator

    rows = [("g1", "r1", "plain", "2026-01-01T00:00:20+00:00"), ("g1", "r1", "twice", "2026-01-01T00:00:20+00:00"),
            ("g2", "r2", "twice", "2026-01-02T00:00:10+00:00")]  # g2: twice resumed alone
    df = pd.DataFrame([{"group": g, "run_id": r, "variant": v, "timestamp": t, "warmup": 0, "repeat": 0, "n": 64}
                       for g, r, v, t in rows])
    runs = {"r1": {"timestamp": "2026-01-01T00:00:00+00:00"}, "r2": {"timestamp": "2026-01-02T00:00:00+00:00"}}
    walls = Estimator._walls_of(df, ["n"], runs)
    assert walls.to_dict() == {"64": 10.0}  # 20 s for two variants' runs, 10 s for one


def test_a_point_two_recipes_share_is_one_point_to_measure_and_one_left(tmp_path, monkeypatch):
    """The plan's count and the count left when the budget stops it agree: a point that two
    sweeps share (here every point, the same recipe asked twice) is counted once in both."""
    from bench import reproduce

    monkeypatch.setenv("BENCH_SUITES", "fake=fake_suite")
    machine = reproduce.Machine("cpu-test", None, 0.0, 0.0)
    [fig1] = reproduce.select(["fake:fig1"])
    jobs = reproduce.build([fig1, fig1], "cpu", "cpu", tmp_path, machine)
    first, again = jobs[: len(jobs) // 2], jobs[len(jobs) // 2:]
    planned = sum(len(job.todo) for job in first)
    assert planned > 0 and all(job.todo == [] for job in again)
    assert reproduce.points_left(jobs) == planned == reproduce.points_left(first)


def test_a_point_whose_variants_an_earlier_sweep_measures_is_not_counted_again(tmp_path, monkeypatch):
    """Two recipes sweep one point with different variants: the later sweep's point counts only
    where it adds a variant (fig7 and fig8 of lda share K = 512 with fig8's variants fewer)."""
    from bench import reproduce
    from bench.recipes import Recipe, Sweep
    from bench.suite import get_suite

    monkeypatch.setenv("BENCH_SUITES", "fake=fake_suite")
    machine = reproduce.Machine("cpu-test", None, 0.0, 0.0)
    both = Recipe("both", "", sweeps=(Sweep("fake", {"method": "vector"}, variants=("plain", "twice"),
                                            cpu=size(n="64,128")),))
    plain = Recipe("plain", "", sweeps=(Sweep("fake", {"method": "vector"}, variants=("plain",), cpu=size(n="64")),))
    suite = get_suite("fake")
    first, later = reproduce.build([(suite, both), (suite, plain)], "cpu", "cpu", tmp_path, machine)
    assert [p["n"] for p, _ in first.todo] == [64, 128] and later.todo == []
    first, later = reproduce.build([(suite, plain), (suite, both)], "cpu", "cpu", tmp_path, machine)
    assert [p["n"] for p, _ in first.todo] == [64] and [p["n"] for p, _ in later.todo] == [64, 128]
    assert reproduce.points_left([first, later]) == 3


def test_the_causes_say_when_no_result_here_was_taken_by_the_code_they_describe(tmp_path):
    """A claim's cause is the suite's text as the code has it now; results of other code
    (a cause may name kernels they did not have) get a line saying so."""
    from bench import results
    from bench.envinfo import code_version
    from bench.report import render
    from fake_suite import FakeSuite

    suite = FakeSuite()
    row = {c: 1.0 for c in results.row_columns(results.schema_for(suite))}
    row.update(suite="fake", backend="cpu", device="cpu", run_id="r", group="g", machine="m", timestamp="t", n=64,
               method="vector", block=8, seconds=1.0)  # plain and twice alike: F1 differs
    rows = pd.DataFrame([{**row, "variant": v, "repeat": i} for v in ("plain", "twice") for i in range(2)])
    for version, told in (("0123456789ab", True), (code_version(suite.sources), False)):
        rows.assign(code_version=version).to_csv(tmp_path / "fake.csv", index=False)
        causes = render(tmp_path, tmp_path / "figures", [suite]).split("Why they differ:")[1].split("###")[0]
        assert "**F1**: the loop body is repeated" in causes
        assert ("no result here was taken by it" in causes) == told, causes


def test_a_suite_whose_claims_read_another_suites_file_alone_is_reported(tmp_path):
    # lda's claims read lda-kernels' file too: where lda's own file is missing (a run of
    # lda:drawz alone), the report says whose code its causes describe instead of failing
    from bench.report import Results, _written_for
    from bench.suite import get_suite

    suite = get_suite("lda")
    told = _written_for(suite, Results(tmp_path, {suite.name: suite}))
    assert "no result here was taken by it" in told[0]
