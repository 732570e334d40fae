"""Floors against the measured ceilings (bench.ceilings): the arithmetic, the suites'
counts, results files with the floor columns (and without them), the report's flag on a
kernel that beats its floor, and on a GPU the ceilings themselves and that no kernel of a
sweep beats its floor."""

import numpy as np
import pandas as pd
import pytest

from bench import ceilings, harness, results
from bench.ceilings import Work
from bench.suite import get_suite
from impls.lda.kernel_suite import _counts, draw_work

LIMITS = {"dram_gbps": 1000.0, "l2_gbps": 5000.0, "l2_size": 50e6, "fma_gflops_f32": 40_000.0,
          "fma_gflops_f64": 20_000.0, "launch_s": 2e-6}


def test_the_floor_is_the_largest_ceilings_time_and_names_it():
    work = Work(footprint_bytes=1.05e9, fma=1e11, precision="f64", launches=3, calls=2)
    got = ceilings.floors(work, LIMITS, seconds=0.04)
    assert got["dram_floor_s"] == pytest.approx(2 * 1e9 / 1e12)  # what the L2 cannot hold, every call
    assert got["l2_floor_s"] == pytest.approx(2 * 1.05e9 / 5e12)
    assert got["fma_floor_s"] == pytest.approx(2 * 2 * 1e11 / 2e13)  # an FMA is 2 flops of the f64 peak
    assert got["launch_floor_s"] == pytest.approx(6 * 2e-6)
    assert (got["bound"], got["floor_s"], got["floor_frac"]) == ("fma", got["fma_floor_s"], pytest.approx(0.5))
    assert got["fma_gflops"] == 20_000.0  # the precision's peak, kept beside the floor
    flushed = ceilings.floors(work, LIMITS, seconds=0.04, l2_flushed=True)
    assert flushed["dram_floor_s"] == pytest.approx(2 * 1.05e9 / 1e12)  # a cold L2: the whole footprint
    small = ceilings.floors(Work(footprint_bytes=1e6, calls=20), LIMITS, seconds=1e-4)
    assert small["dram_floor_s"] == 0 and small["bound"] == "launch" and small["floor_frac"] == pytest.approx(0.4)


def test_the_dense_draw_counts_rows_of_the_documents_and_words_that_occur():
    # documents [w0 w0 w1] [w1] [] [w0 w2 w2 w2]: 3 with tokens, 3 words, 5 runs of a word
    doc_ptr, words = np.array([0, 3, 4, 4, 8]), np.array([0, 0, 1, 1, 0, 2, 2, 2])
    counts = _counts(doc_ptr, words)
    assert counts == {"tokens": 8, "docs": 3, "words": 3, "runs": 5}  # w1 w1 span two documents: two runs
    work = draw_work(counts, K=16, itemsize=4, precision="f32", variant="warpscan")
    assert work.footprint_bytes == (3 + 3) * 16 * 4 + 8 * (4 + 4 + 4) + 4 * 8
    # A distribution a token, each of its K products and K sums an FMA-pipe instruction.
    assert (work.fma, work.launches, work.calls) == (2 * 8 * 16, 1, 1)
    for variant in ("pairscan", "segscan"):  # a distribution a run of a word
        assert draw_work(counts, K=16, itemsize=4, precision="f32", variant=variant).fma == 2 * 5 * 16


def test_a_run_profiled_under_ncu_measures_no_ceilings(monkeypatch):
    # ncu serialises launches: the launch latency cannot be measured there (bench profile
    # measures the ceilings in a process of its own).
    monkeypatch.setenv(harness.PROFILED, "1")
    assert harness._limits(get_suite("lda-kernels"), "gpu") == {}


def test_suites_that_state_their_work_carry_the_floor_columns():
    for name in ("lda-kernels", "sumrv", "admodel", "saber"):
        columns = results.schema_for(get_suite(name))["columns"]
        assert {"floor_s", "floor_frac", "dram_gbps", "l2_gbps", "launch_s"} <= set(columns), name
        assert columns["bound"]["role"] == "bookkeeping"  # text, never parsed as a number
    assert "floor_frac" not in results.schema_for(get_suite("saber-fit"))["columns"]


def _rows(schema: dict, n: int) -> pd.DataFrame:
    row = {c: 1.0 for c in results.row_columns(schema)}
    row.update(suite="sumrv", backend="gpu", variant="strip", device="gpu", repeat=0, run_id="r", group="g",
               code_version="c", machine="m", timestamp="t", precision="f32", space="lin", bound="fma")
    return pd.DataFrame([{**row, "repeat": i} for i in range(n)])


def test_results_with_the_floor_columns_load_and_older_ones_without_them_too(tmp_path):
    schema = results.schema_for(get_suite("sumrv"))
    path = tmp_path / "sumrv.csv"
    _rows(schema, 2).to_csv(path, index=False)
    df, _, _ = results.load(path, "sumrv", lambda name: schema)
    assert list(df["bound"]) == ["fma", "fma"]
    old = _rows(schema, 2).drop(columns=[m.name for m in ceilings.METRICS] + ["bound"])
    old.to_csv(path, index=False)  # written before the floor existed: no value, not an error
    df, _, _ = results.load(path, "sumrv", lambda name: schema)
    assert df["floor_frac"].isna().all() and len(df) == 2


def test_a_kernel_that_beats_its_floor_is_flagged():
    rows = pd.DataFrame({"K": [64, 64, 1024, 1024], "variant": ["alg1"] * 2 + ["warpscan"] * 2,
                         "precision": "f32", "bound": "dram", "floor_frac": [0.5, 0.6, 1.3, 1.4]})
    table, above = ceilings.summary(rows, ["K"])
    assert "warpscan" in table and "alg1" in table
    assert "1024" in above and "warpscan" in above and "alg1" not in above
    assert ceilings.summary(rows.drop(columns="floor_frac"), ["K"]) == ("", "")


@pytest.mark.gpu
def test_the_ceilings_are_in_the_order_of_the_memory_hierarchy():
    from bench import peaks
    from bench.timing import calibrate

    limits = peaks.limits()
    copy = max(calibrate("gpu")["copy_gbps"] for _ in range(3))
    assert 0.8 * copy < limits["dram_gbps"] < 2 * copy  # a read stream: near a copy's bytes a second
    assert 1.5 * limits["dram_gbps"] < limits["l2_gbps"] < 20 * limits["dram_gbps"]
    assert limits["fma_gflops_f64"] < limits["fma_gflops_f32"]
    assert 3e-7 < limits["launch_s"] < 2e-5


@pytest.mark.gpu
@pytest.mark.parametrize("suite, axes", [
    ("lda-kernels", {"dataset": "tiny,wiki-synth", "scale": "0.1", "K": "64,1024", "precision": "f32,f64"}),
    ("sumrv", {"m": "256,1024", "n": "1024", "batch": "1,1024", "precision": "f32,f64", "space": "lin,log"}),
])
def test_no_gpu_kernel_beats_its_floor(tmp_path, suite, axes):
    plan = harness.plan(get_suite(suite), axes, "gpu")
    assert harness.sweep(plan, harness.settings_for(plan, tmp_path, repeats=3)) == 0
    rows, _, _ = results.load(tmp_path / f"{suite}.csv", suite)
    gpu = rows[rows["device"] == "gpu"]
    assert gpu["floor_frac"].notna().all() and (gpu["floor_frac"] > 0).all()
    above = ceilings.above_ceiling(gpu)
    assert above.empty, above[["variant", "precision", "bound", "floor_frac"]].to_string()
    if suite == "sumrv":  # the strip kernel at m = n = 1024, batch 1024 is near its FMA floor
        assert gpu["floor_frac"].max() > 0.2


def test_the_report_shows_the_floors_and_the_points_above_them(tmp_path):
    from bench.report import render

    suite = get_suite("sumrv")
    rows = _rows(results.schema_for(suite), 4).assign(m=[256, 256, 1024, 1024], floor_frac=[0.4, 0.5, 1.5, 1.6])
    rows.to_csv(tmp_path / "sumrv.csv", index=False)
    text = render(tmp_path, tmp_path / "figures", [suite])
    section = text[text.index("### Against the ceilings"):]
    assert "| strip" in section and "Above the floor" in section and "1024" in section.split("Above the floor")[1]
    assert "sumrv-floors" not in section  # not drawn here
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "sumrv-floors.png").touch()
    section = render(tmp_path, tmp_path / "figures", [suite]).split("### Against the ceilings")[1]
    assert "![sumrv-floors](figures/sumrv-floors.png)" in section


def test_a_suite_with_floors_gets_the_floor_figure_and_one_without_none(tmp_path):
    from bench.figures import floor_figure

    schema = results.schema_for(get_suite("sumrv"))
    rows = _rows(schema, 3).assign(seconds=[2e-3, 3e-3, 4e-3], floor_s=1e-3, timestamp="2026-11-27T00:00:00+00:00")
    meta = {"schema": schema, "runs": {}, "machine": "m"}
    paths = floor_figure(rows, meta, tmp_path, "sumrv")
    assert [p.name for p in paths] == ["sumrv-floors.png", "sumrv-floors.pdf"] and all(p.exists() for p in paths)
    assert floor_figure(rows.assign(floor_s=float("nan")), meta, tmp_path / "none", "sumrv") == []  # CPU rows
    assert floor_figure(rows.drop(columns="floor_s"), meta, tmp_path / "none", "sumrv") == []  # older results
