"""Floors against the measured ceilings (bench.ceilings): the arithmetic, the suites'
counts, the report's flag on a kernel that beats its floor, and on a GPU that a sweep's
kernels never do."""

import numpy as np
import pandas as pd
import pytest

from bench import ceilings, harness, results
from bench.ceilings import Work
from bench.suite import get_suite
from impls.lda.kernel_suite import _counts, draw_work

LIMITS = {"copy_gbps": 1000.0, "l2_gbps": 5000.0, "fma_gflops_f32": 40_000.0, "fma_gflops_f64": 20_000.0,
          "launch_s": 2e-6}


def test_the_floor_is_the_largest_ceilings_time_and_names_it():
    work = Work(dram_bytes=1e9, l2_bytes=2e9, fma=1e12, precision="f64", launches=3)
    got = ceilings.floors(work, LIMITS, seconds=0.2)
    assert got["dram_floor_s"] == pytest.approx(1e-3) and got["l2_floor_s"] == pytest.approx(4e-4)
    assert got["fma_floor_s"] == pytest.approx(0.1)  # an FMA is 2 flops of the 20 TFLOP/s f64 peak
    assert got["launch_floor_s"] == pytest.approx(6e-6)
    assert (got["bound"], got["floor_s"], got["floor_frac"]) == ("fma", got["fma_floor_s"], pytest.approx(0.5))
    assert got["fma_gflops"] == 20_000.0  # the precision's peak, kept beside the floor
    tiny = ceilings.floors(Work(dram_bytes=8, launches=20), LIMITS, seconds=1e-4)
    assert tiny["bound"] == "launch" and tiny["floor_frac"] == pytest.approx(0.4)


def test_the_dense_draw_counts_each_document_word_pair_once():
    # documents [w0 w0 w1] [w1] [] [w0 w2 w2 w2]: 5 pairs, 3 documents with tokens, 3 words
    doc_ptr, words = np.array([0, 3, 4, 4, 8]), np.array([0, 0, 1, 1, 0, 2, 2, 2])
    counts = _counts(doc_ptr, words, vocab_size=5)
    assert counts == {"tokens": 8, "docs": 3, "words": 3, "pairs": 5}
    work = draw_work(counts, K=16, itemsize=4, precision="f32")
    assert work.l2_bytes == (5 + 3) * 16 * 4 and work.fma == 5 * 16 and work.launches == 1
    assert work.dram_bytes == (3 + 3) * 16 * 4 + 8 * (4 + 4 + 4) + 4 * 8


def test_suites_that_state_their_work_carry_the_floor_columns():
    for name in ("lda-kernels", "sumrv", "admodel"):
        columns = results.schema_for(get_suite(name))["columns"]
        assert {"floor_s", "bound", "floor_frac", "l2_gbps", "launch_s"} <= set(columns), name
    assert "floor_frac" not in results.schema_for(get_suite("saber"))["columns"]


def test_a_kernel_that_beats_its_floor_is_flagged():
    rows = pd.DataFrame({"K": [64, 64, 1024, 1024], "variant": ["alg1"] * 2 + ["warpscan"] * 2,
                         "precision": "f32", "bound": ["l2", "l2", "l2", "l2"],
                         "floor_frac": [0.5, 0.6, 1.3, 1.4]})
    table, above = ceilings.summary(rows, ["K"])
    assert "warpscan" in table and "alg1" in table
    assert "1024" in above and "warpscan" in above and "alg1" not in above
    assert ceilings.summary(rows.drop(columns="floor_frac"), ["K"]) == ("", "")


@pytest.mark.gpu
@pytest.mark.parametrize("suite, axes", [
    ("lda-kernels", {"dataset": "tiny", "K": "64,1024", "precision": "f32,f64"}),
    ("sumrv", {"m": "256,1024", "n": "1024", "batch": "1,1024", "precision": "f32,f64", "space": "lin,log"}),
])
def test_no_gpu_kernel_beats_its_floor(tmp_path, suite, axes):
    settings = harness.settings_for(harness.plan(get_suite(suite), axes, "gpu"), tmp_path, repeats=3)
    assert harness.sweep(harness.plan(get_suite(suite), axes, "gpu"), settings) == 0
    rows = results.read_csv(tmp_path / f"{suite}.csv")
    gpu = rows[rows["device"] == "gpu"]
    assert gpu["floor_frac"].notna().all() and (gpu["floor_frac"] > 0).all()
    above = ceilings.above_ceiling(gpu)
    assert above.empty, above[["variant", "precision", "bound", "floor_frac"]].to_string()
