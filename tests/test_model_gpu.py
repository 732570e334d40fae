"""The LDA application on the GPU: consistent counts and distributions, and a
GPU sweep through the harness (skipped, and reported, without a GPU)."""

import numpy as np
import pandas as pd
import pytest

from bench import harness
from bench.corpus import load_corpus
from bench.suite import get_suite
from bench.timing import make_timer
from impls.lda import model

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("update", ["mfm", "dirichlet"])
@pytest.mark.parametrize("variant", ["alg1", "alg4", "alg7"])
@pytest.mark.parametrize("precision", ["f32", "f64"])
def test_gpu_iteration_counts_and_distributions(update, variant, precision):
    from impls.lda import model_gpu

    work = model_gpu.to_gpu(model.make_workload(load_corpus("tiny"), K=40, W=32, precision=precision,
                                                update=update))
    state = work.fresh_state()
    timer = make_timer("gpu")
    with timer.run():
        model_gpu.iterate(work, state, variant, 2, timer)
    assert set(timer.phases) == set(model.PHASES)
    assert 0 < sum(timer.phases.values()) <= timer.seconds * 1.001
    host = work.host
    np.testing.assert_array_equal(state.ndk.sum(axis=1).get(), np.diff(host.doc_ptr))
    np.testing.assert_array_equal(state.nwk.sum(axis=1).get(), np.bincount(host.words, minlength=host.vocab_size))
    tolerance = 1e-5 if precision == "f32" else 1e-12
    np.testing.assert_allclose(state.theta.sum(axis=1).get(), 1, rtol=tolerance)
    np.testing.assert_allclose(state.phi.sum(axis=0).get(), 1, rtol=tolerance)


def test_gpu_sweep_rows_carry_bandwidth(tmp_path):
    suite = get_suite("lda")
    points = suite.points({"k": "32,64", "dataset": "tiny", "precision": "f32", "iterations": 2}, "gpu")
    settings = harness.SweepSettings(["alg1", "alg7"], repeats=2, warmup=1, backend="gpu", out_dir=tmp_path)
    assert harness.sweep(suite, points, settings) == 0
    df = pd.read_csv(tmp_path / "lda.csv")
    assert len(df) == 2 * 2 * 2 and set(df["backend"]) == {"gpu"}
    assert (df["copy_gbps"] > 0).all() and (df["draw_z_frac"] > 0).all()
    assert (df["draw_z_s"] < df["seconds"]).all()
