"""The LDA application on the GPU: consistent counts and distributions, and a
GPU sweep through the harness (skipped, and reported, without a GPU)."""

import numpy as np
import pandas as pd
import pytest

from bench import harness
from bench.corpus import load_corpus
from bench.suite import get_suite
from bench.timing import RunContext
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
    timer = RunContext("gpu")
    with timer.timed():
        model_gpu.iterate(work, state, variant, 2, timer)
    assert set(timer.phases) == set(model.PHASES)
    assert 0 < sum(timer.phases.values()) <= timer.seconds * 1.001
    host = work.host
    np.testing.assert_array_equal(state.ndk.sum(axis=1).get(), np.diff(host.doc_ptr))
    np.testing.assert_array_equal(state.nwk.sum(axis=1).get(), np.bincount(host.words, minlength=host.vocab_size))
    np.testing.assert_array_equal(state.nk.get(), state.nwk.sum(axis=0).get())
    tolerance = 1e-5 if precision == "f32" else 1e-12
    np.testing.assert_allclose(state.theta.sum(axis=1).get(), 1, rtol=tolerance)
    np.testing.assert_allclose(state.phi.sum(axis=0).get(), 1, rtol=tolerance)


def test_gpu_topic_counts_match_numpy():
    """The counts kernel against numpy on the host, twice per K with fresh z:
    the second pass must overwrite the first, not add to it."""
    import cupy

    from impls.lda import model_gpu

    rng = np.random.default_rng(7)
    M, V = 300, 500
    lengths = rng.integers(0, 150, M)  # empty documents too
    doc_of_token = np.repeat(np.arange(M, dtype=np.int64), lengths)  # tokens of a document contiguous
    words = np.minimum(rng.zipf(1.3, doc_of_token.size) - 1, V - 1).astype(np.int32)  # hot words
    for K in (1, 4, 40, 64, 1030):
        ndk = cupy.zeros((M, K), dtype=cupy.int32)
        nwk = cupy.zeros((V, K), dtype=cupy.int32)
        nk = cupy.zeros(K, dtype=cupy.int32)
        for _ in range(2):
            z = rng.integers(0, K, doc_of_token.size, dtype=np.int32)
            model_gpu.topic_counts(cupy.asarray(doc_of_token), cupy.asarray(words), cupy.asarray(z), ndk, nwk, nk)
            expected = np.zeros((M, K), dtype=np.int64)
            np.add.at(expected, (doc_of_token, z), 1)
            np.testing.assert_array_equal(ndk.get(), expected, err_msg=f"ndk, K = {K}")
            expected = np.bincount(words.astype(np.int64) * K + z, minlength=V * K).reshape(V, K)
            np.testing.assert_array_equal(nwk.get(), expected, err_msg=f"nwk, K = {K}")
            np.testing.assert_array_equal(nk.get(), np.bincount(z, minlength=K), err_msg=f"nk, K = {K}")


def test_gpu_sweep_rows_carry_the_copy_and_the_draws_time(tmp_path):
    plan = harness.plan(get_suite("lda"), {"k": "32,64", "dataset": "tiny", "precision": "f32", "iterations": "2"},
                        "gpu", ["alg1", "alg7"])
    assert harness.sweep(plan, harness.Settings(repeats=2, warmup=1, out_dir=tmp_path)) == 0
    df = pd.read_csv(tmp_path / "lda.csv")
    assert len(df) == 2 * 2 * 2 and set(df["backend"]) == {"gpu"}
    assert (df["copy_gbps"] > 0).all() and (df["draw_z_s"] > 0).all()
    assert (df["draw_z_s"] < df["seconds"]).all()
    assert set(df["device"]) == {"gpu"} and df["sm_clock_mhz_min"].notna().all()
    assert df["throttled"].notna().all()


def test_gpu_sweep_times_each_variant_on_its_own_device(tmp_path):
    import fake_suite

    plan = harness.plan(fake_suite.SUITE, {"n": "64", "method": "vector"}, "gpu")
    assert plan.variants == [("plain", "cpu"), ("twice", "cpu"), ("gpuonly", "gpu")]
    assert harness.sweep(plan, harness.Settings(repeats=3, warmup=1, out_dir=tmp_path, flush_l2=True)) == 0
    df = pd.read_csv(tmp_path / "fake.csv")
    assert df.groupby("variant")["device"].first().to_dict() == {"gpuonly": "gpu", "plain": "cpu", "twice": "cpu"}
    assert (df["copy_gbps"] > 100).all() and (df["calibration_s"] > 0).all()


def test_kernel_suite_on_the_gpu(tmp_path):
    plan = harness.plan(get_suite("lda-kernels"), {"dataset": "tiny", "k": "40", "precision": "f32",
                                                   "storage": "auto,global"}, "gpu")
    settings = harness.Settings(repeats=3, warmup=1, out_dir=tmp_path, max_noise=0.01, budget_s=1.0)
    assert harness.sweep(plan, settings) == 0
    df = pd.read_csv(tmp_path / "lda-kernels.csv")
    assert set(df["storage"]) == {"auto", "global"}
    assert df["floor_frac"].between(0, 1, inclusive="neither").all() and df["bound"].notna().all()
    assert df.groupby(["storage", "variant"]).size().min() >= 3
