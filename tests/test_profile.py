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
from bench.suite import get_suite

SAMPLE = Path(__file__).resolve().parent / "data" / "ncu-raw-sample.csv"


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


def test_a_profile_run_writes_tidy_rows_and_its_sidecar(tmp_path, monkeypatch):
    """ncu stood in for by a script that writes the report and prints the sample on --import
    (and a GPU by a name in the machine's description)."""
    collect_env = profiler.envinfo.collect_env
    monkeypatch.setattr(profiler.envinfo, "collect_env", lambda argv: {**collect_env(argv), "gpu_name": "Stand-in"})
    ncu = tmp_path / "ncu"
    ncu.write_text(f"""#!/bin/sh
case "$1" in
  --version) echo "Version 2099.1 (stand-in)" ;;
  --import) cat "{SAMPLE}" ;;
  *) while [ $# -gt 0 ]; do [ "$1" = --export ] && touch "$2"; shift; done ;;
esac
""")
    ncu.chmod(ncu.stat().st_mode | stat.S_IEXEC)
    plan = harness.plan(get_suite("lda"), {"K": "64,128", "precision": "f32"}, "gpu", ["alg4", "alg7"])
    metrics = profiler.metrics_of(["time", "occupancy", "stalls"])
    path = profiler.profile(plan, str(ncu), metrics, "drawz", 2, tmp_path / "out", echo=lambda _: None)
    rows = pd.read_csv(path)
    assert len(rows) == 2 * 2 * 6  # points x variants x the sample's counters among those asked for
    assert "lts__t_sector_hit_rate.pct" not in set(rows["metric"])
    assert set(rows["variant"]) == {"alg4", "alg7"} and set(rows["K"]) == {64, 128}
    assert rows["code_version"].nunique() == 1 and rows["run_id"].nunique() == 1
    assert set(rows["machine"]) == {"stand-in"}
    [run] = json.loads(path.with_suffix(".json").read_text())["runs"].values()
    assert run["ncu_version"] == "Version 2099.1 (stand-in)" and len(run["commands"]) == 4
    assert all("--kernel-id ::regex:drawz:2" in c and " -m bench run lda --backend gpu --variant " in c
               for c in run["commands"])
    assert any("--K=128" in c for c in run["commands"])


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
