"""`bench profile` without a GPU: ncu's raw page read into tidy rows (a sample of a real
report, saber's sampling kernel on an H200), the run's plumbing through a stand-in ncu,
and a one-line error where there is no ncu."""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from bench import harness
from bench import profile as profiler
from bench.errors import BenchError
from bench.figures import latest_profile
from bench.suite import get_suite

SAMPLE = Path(__file__).resolve().parent / "data" / "ncu-raw-sample.csv"
PEAKS = {"copy_gbps": 4000.0, "fma_gflops_f32": 60_000.0, "fma_gflops_f64": 30_000.0}  # a stand-in GPU's


def test_tidy_reads_the_raw_page_of_a_real_report():
    rows = profiler.tidy(SAMPLE.read_text())
    assert set(rows["kernel"]) == {"saber_sample_tree_by_word"} and set(rows["launch"]) == {"0"}
    by_metric = rows.set_index("metric")
    assert by_metric.loc["gpu__time_duration.sum", "value"] == pytest.approx(19.809184)
    assert by_metric.loc["gpu__time_duration.sum", "unit"] == "ms"
    assert by_metric.loc["launch__block_size", "value"] == 256
    assert by_metric.loc[f"{profiler.STALL_PREFIX}long_scoreboard{profiler.STALL_SUFFIX}", "value"] == \
        pytest.approx(6.398179)
    assert "device__attribute_display_name" not in by_metric.index  # text, not a number
    assert len(rows) == 8


def test_tidy_reads_several_launches_and_thousands_separators():
    lines = SAMPLE.read_text().splitlines()
    second = lines[2].replace('"0","1594"', '"1","1594"').replace("saber_sample_tree_by_word", "other_kernel")
    second = second.replace('"19.809184"', '"1,234.5"')
    rows = profiler.tidy("\n".join([*lines, second]))
    times = rows[rows["metric"] == "gpu__time_duration.sum"].set_index("kernel")["value"]
    assert times.to_dict() == {"saber_sample_tree_by_word": pytest.approx(19.809184), "other_kernel": 1234.5}


def test_metric_sets_by_name():
    assert profiler.metrics_of(["time", "time"]) == ["gpu__time_duration.sum"]
    assert len(profiler.metrics_of(["stalls"])) == len(profiler.STALL_REASONS)
    with pytest.raises(BenchError, match="unknown metric set.*nosuch.*known: time"):
        profiler.metrics_of(["time", "nosuch"])


def test_without_ncu_the_command_says_so_in_one_line_and_exits_2():
    env = {**os.environ, "PATH": "/nonexistent"}
    done = subprocess.run([sys.executable, "-m", "bench", "profile", "lda", "--k", "64"], capture_output=True,
                          text=True, env=env, cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: ncu (Nsight Compute) is not on PATH")


def _stand_in_ncu(tmp_path, monkeypatch, fail_on=None):
    """ncu stood in for by a script that writes the report and prints the sample on --import
    (and a GPU by a name in the machine's description); it fails on runs whose command line
    holds fail_on."""
    collect_env = profiler.envinfo.collect_env
    monkeypatch.setattr(profiler.envinfo, "collect_env", lambda argv: {**collect_env(argv), "gpu_name": "Stand-in"})
    monkeypatch.setattr(profiler.peaks, "measure_apart", lambda: PEAKS)
    ncu = tmp_path / "ncu"
    failing = f'case "$*" in *{fail_on}*) echo "stand-in failure" >&2; exit 3 ;; esac' if fail_on else ""
    ncu.write_text(f"""#!/bin/sh
case "$1" in
  --version) echo "Version 2099.1 (stand-in)" ;;
  --import) cat "{SAMPLE}" ;;
  *) {failing}
     while [ $# -gt 0 ]; do [ "$1" = --export ] && touch "$2"; shift; done ;;
esac
""")
    ncu.chmod(ncu.stat().st_mode | stat.S_IEXEC)
    return str(ncu)


def _profile_lda(ncu, out_dir, kernels="drawz"):
    plan = harness.plan(get_suite("lda"), {"K": "64,128", "precision": "f32"}, "gpu", ["alg4", "alg7"])
    metrics = profiler.metrics_of(["time", "occupancy", "stalls"])
    return profiler.profile(plan, ncu, metrics, kernels, 2, out_dir, echo=lambda _: None)


def test_a_profile_run_writes_tidy_rows_and_its_sidecar(tmp_path, monkeypatch):
    path = _profile_lda(_stand_in_ncu(tmp_path, monkeypatch), tmp_path / "out")
    rows = pd.read_csv(path)
    assert len(rows) == 2 * 2 * 6  # points x variants x the sample's counters among those asked for
    assert "lts__t_sector_hit_rate.pct" not in set(rows["metric"])
    assert set(rows["variant"]) == {"alg4", "alg7"} and set(rows["K"]) == {64, 128}
    assert rows["code_version"].nunique() == 1 and rows["run_id"].nunique() == 1
    assert set(rows["machine"]) == {"stand-in"}
    [run] = json.loads(path.with_suffix(".json").read_text())["runs"].values()
    assert run["ncu_version"] == "Version 2099.1 (stand-in)" and len(run["commands"]) == 4
    assert run["peaks"] == PEAKS
    assert all("--kernel-id ::regex:drawz:2" in c and " -m bench run lda --backend gpu --variant " in c
               and "--clock-control none" in c for c in run["commands"])  # the peaks' clocks, not base
    assert any("--K=128" in c for c in run["commands"])


def test_an_interrupted_profile_keeps_its_rows_and_sidecar_and_resumes(tmp_path, monkeypatch):
    out = tmp_path / "out"
    with pytest.raises(BenchError, match="ncu failed on alg4 .exit 3.: stand-in failure"):
        _profile_lda(_stand_in_ncu(tmp_path, monkeypatch, fail_on="--K=128"), out)
    rows = pd.read_csv(out / "lda-profile.csv")
    assert set(rows["K"]) == {64} and set(rows["variant"]) == {"alg4", "alg7"}
    [run] = json.loads((out / "lda-profile.json").read_text())["runs"].values()
    assert len(run["commands"]) == 2 and run["peaks"] == PEAKS  # the runs of its rows: K = 64
    _profile_lda(_stand_in_ncu(tmp_path, monkeypatch), out)
    rows = pd.read_csv(out / "lda-profile.csv")
    assert len(rows) == 2 * 2 * 6 and set(rows.groupby(["K", "variant"]).size()) == {6}
    resumed = json.loads((out / "lda-profile.json").read_text())["runs"]
    assert sorted(len(r["commands"]) for r in resumed.values()) == [2, 2]  # only K = 128 ran again
    assert set(latest_profile(out / "lda-profile.csv").rows["K"]) == {64, 128}  # the figures take both runs
    _profile_lda(_stand_in_ncu(tmp_path, monkeypatch), out, kernels="counts")  # other kernels: all again
    runs = json.loads((out / "lda-profile.json").read_text())["runs"]
    assert sorted(len(r["commands"]) for r in runs.values()) == [2, 2, 4]


def test_the_stall_figure_of_a_profile(tmp_path):
    from bench.figures import stall_figure

    rows = profiler.tidy(SAMPLE.read_text()).assign(suite="saber", backend="gpu", K=1000, variant="G3",
                                                    code_version="c", run_id="r", timestamp="t", machine="m")
    columns = ["suite", "backend", "K", *profiler.COLUMNS, *profiler.BOOKKEEPING]
    path = tmp_path / "saber-profile.csv"
    rows[columns].to_csv(path, index=False)
    written = stall_figure(path, tmp_path / "figures")
    assert [p.name for p in written] == ["saber-profile-stalls.png", "saber-profile-stalls.pdf"]
    assert all(p.stat().st_size > 0 for p in written)


def _profile_file(tmp_path, launches: list[dict], peaks: dict | None) -> Path:
    """A profile file of one run: a row per (launch, metric), and its sidecar."""
    flops = {metric: ("inst", 0.0) for metric in profiler.METRIC_SETS["flops"]}  # the set's counters, 0 unless given
    rows = [{"suite": "lda", "backend": "gpu", "K": launch["K"], "variant": launch["variant"], "launch": i,
             "kernel": launch["kernel"], "metric": metric, "unit": unit, "value": value, "code_version": "c",
             "run_id": "r", "timestamp": "t", "machine": "m"}
            for i, launch in enumerate(launches) for metric, (unit, value) in {**flops, **launch["counters"]}.items()]
    path = tmp_path / "lda-profile.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    path.with_suffix(".json").write_text(json.dumps({"runs": {"r": {"peaks": peaks} if peaks else {}}}))
    return path


FMA, FADD, DFMA = (f"sm__sass_thread_inst_executed_op_{op}_pred_on.sum" for op in ("ffma", "fadd", "dfma"))
LAUNCHES = [  # 2 ms, 1 GB and 10^9 FMA + 10^9 adds (3 GFLOP): 1500 GFLOP/s at 3 flops a byte
    {"K": 64, "variant": "alg4", "kernel": "drawz_alg4_f32",
     "counters": {"gpu__time_duration.sum": ("ms", 2.0), "dram__bytes_read.sum": ("Mbyte", 800.0),
                  "dram__bytes_write.sum": ("Gbyte", 0.2), FMA: ("inst", 1e9), FADD: ("inst", 1e9)}},
    # 1 s, 2 TB, 10^12 double FMA: 2000 GFLOP/s, at 1 flop a byte, under the copy roof
    {"K": 128, "variant": "alg7", "kernel": "drawz_alg7_f64",
     "counters": {"gpu__time_duration.sum": ("second", 1.0), "dram__bytes_read.sum": ("Tbyte", 2.0),
                  "dram__bytes_write.sum": ("byte", 0.0), DFMA: ("inst", 1e12)}},
    # a copy: no flops, 4 GB in 2 ms
    {"K": 128, "variant": "alg7", "kernel": "counts",
     "counters": {"gpu__time_duration.sum": ("us", 2000.0), "dram__bytes_read.sum": ("Gbyte", 2.0),
                  "dram__bytes_write.sum": ("Gbyte", 2.0)}},
]


def test_kernel_rates_convert_ncus_units_and_count_a_multiply_add_twice(tmp_path):
    rates = profiler.kernel_rates(pd.read_csv(_profile_file(tmp_path, LAUNCHES, PEAKS))).set_index("kernel")
    assert rates.loc["drawz_alg4_f32", ["seconds", "bytes", "flops_f32"]].tolist() == pytest.approx([2e-3, 1e9, 3e9])
    assert rates.loc["drawz_alg7_f64", ["seconds", "bytes", "flops_f64"]].tolist() == pytest.approx([1.0, 2e12, 2e12])
    assert rates.loc["counts", ["seconds", "bytes"]].tolist() == pytest.approx([2e-3, 4e9])
    odd = pd.read_csv(_profile_file(tmp_path, LAUNCHES, PEAKS)).replace({"unit": {"us": "fortnight"}})
    with pytest.raises(BenchError, match="fortnight"):
        profiler.kernel_rates(odd)


def test_the_roofline_of_a_profile_reports_every_kernel_against_the_runs_peaks(tmp_path):
    from bench.figures import roofline_figure

    written = roofline_figure(_profile_file(tmp_path, LAUNCHES, PEAKS), tmp_path / "figures")
    assert [p.name for p in written] == ["lda-profile-roofline.png", "lda-profile-roofline.pdf",
                                         "lda-profile-roofline.md"]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in written[-1].read_text().splitlines()
            if line.startswith("| ")]
    assert rows[0] == ["kernel", "precision", "ms", "GFLOP/s", "GB/s", "flops/byte", "of FMA peak",
                       "of copy bandwidth", "of issue slots", "of its roof", "roof"]
    assert rows[1:] == [
        # 1500 of 60,000 GFLOP/s; 500 of 4000 GB/s; its roof at 3 flops a byte is 12,000 GFLOP/s
        ["64 alg4 drawz_alg4_f32", "f32", "2", "1,500", "500", "3", "2.5%", "12.5%", "", "12.5%", "memory"],
        # 2000 GFLOP/s at 1 flop a byte: half the copy roof's 4000
        ["128 alg7 drawz_alg7_f64", "f64", "1e+03", "2,000", "2,000", "1", "6.7%", "50.0%", "", "50.0%", "memory"],
        ["128 alg7 counts", "f32", "2", "0", "2,000", "0", "0.0%", "50.0%", "", "", "memory"]]


def test_a_kernel_whose_issue_slots_are_busier_than_its_roof_is_bound_by_issue(tmp_path):
    """At 12.5% of its memory roof but 80% of its issue slots busy, a kernel is bound by issue;
    at 10% busy it keeps its memory roof."""
    from bench.figures import roofline_figure

    launches = [{**LAUNCHES[0], "counters": {**LAUNCHES[0]["counters"], profiler.ISSUE: ("%", 80.0)}},
                {**LAUNCHES[0], "K": 128, "counters": {**LAUNCHES[0]["counters"], profiler.ISSUE: ("%", 10.0)}}]
    written = roofline_figure(_profile_file(tmp_path, launches, PEAKS), tmp_path / "figures")
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in written[-1].read_text().splitlines()
            if line.startswith("| ")]
    assert [row[-3:] for row in rows[1:]] == [["80.0%", "80.0%", "issue"], ["10.0%", "12.5%", "memory"]]


def test_a_kernel_profiled_without_the_flops_set_keeps_its_points_precision_and_blank_flop_columns(tmp_path):
    from bench.figures import roofline_figure

    counted, uncounted = (pd.read_csv(_profile_file(tmp_path, [launch], PEAKS)) for launch in LAUNCHES[1:])
    uncounted = uncounted[~uncounted["metric"].isin(profiler.METRIC_SETS["flops"])].assign(launch=1)
    rows = pd.concat([counted, uncounted]).assign(precision="f64")
    path = tmp_path / "lda-profile.csv"
    rows[["suite", "backend", "K", "precision", *profiler.COLUMNS, *profiler.BOOKKEEPING]].to_csv(path, index=False)
    table = roofline_figure(path, tmp_path / "figures")[-1].read_text()
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()
            if line.startswith("| alg7")]
    assert rows == [["alg7 drawz_alg7_f64", "f64", "1e+03", "2,000", "2,000", "1", "6.7%", "50.0%", "", "50.0%",
                     "memory"],
                    ["alg7 counts", "f64", "2", "", "2,000", "", "", "50.0%", "", "", ""]]


def test_a_profile_without_peaks_has_no_roofline(tmp_path):
    from bench.figures import roofline_figure

    assert roofline_figure(_profile_file(tmp_path, LAUNCHES, None), tmp_path / "figures") == []


def test_the_peaks_measured_apart_fail_in_one_line_without_a_gpu():
    from bench import peaks
    from bench.backend import gpu_available

    if gpu_available():
        pytest.skip("a GPU is here: the peaks are measured")
    with pytest.raises(BenchError, match="measuring the GPU's peaks failed: "):
        peaks.measure_apart()
