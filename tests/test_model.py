"""One iteration of the LDA application: counts and updates are consistent."""

import numpy as np
import pytest

from bench.corpus import load_corpus
from bench.timing import RunContext
from impls.lda import model


@pytest.mark.parametrize("update", ["mfm", "dirichlet"])
@pytest.mark.parametrize("variant", ["alg1", "alg4", "alg7"])
def test_iteration_counts_and_distributions(update, variant):
    corpus = load_corpus("tiny")
    work = model.make_workload(corpus, K=20, W=32, precision="f64", update=update)
    state = work.fresh_state()
    timer = RunContext("cpu")
    with timer.timed():
        model.iterate(work, state, variant, 2, timer)
    assert set(timer.phases) == set(model.PHASES)
    lengths = np.diff(work.doc_ptr)
    np.testing.assert_array_equal(state.ndk.sum(axis=1), lengths)
    np.testing.assert_array_equal(state.nwk.sum(axis=1), np.bincount(work.words, minlength=work.vocab_size))
    np.testing.assert_array_equal(state.nk, state.nwk.sum(axis=0))
    np.testing.assert_allclose(state.theta.sum(axis=1), 1, rtol=1e-9)
    np.testing.assert_allclose(state.phi.sum(axis=0), 1, rtol=1e-9)
    assert (work.doc_ptr.size - 1) % 32 == 0  # padded to whole warps


def test_variants_agree_on_a_real_corpus_run():
    # Real-valued weights: the variants add in different orders, so a rare token
    # may differ by rounding; the overwhelming majority must agree.
    corpus = load_corpus("tiny")
    work = model.make_workload(corpus, K=64, W=32, precision="f64", update="mfm")
    z = {}
    for variant in ("alg1", "alg4", "alg7"):
        state = work.fresh_state()
        model.iterate(work, state, variant, 1, RunContext("cpu"))
        z[variant] = state.z
    assert np.mean(z["alg4"] == z["alg1"]) > 0.999
    assert np.mean(z["alg7"] == z["alg1"]) > 0.999


def test_uniforms_are_shared_and_per_iteration():
    a = model.uniforms(1, 0, 100, np.float32)
    assert np.array_equal(a, model.uniforms(1, 0, 100, np.float32))
    assert not np.array_equal(a, model.uniforms(1, 1, 100, np.float32))
    assert a.dtype == np.float32 and ((a >= 0) & (a < 1)).all()
