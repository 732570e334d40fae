"""The CPU draw-z variants: identical z with dyadic weights, right distribution."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from bench import harness
from bench.suite import get_suite
from impls.lda import drawz_cpu
from impls.lda.verify import chi_square_p, token_probabilities, verify_point

VARIANTS = list(drawz_cpu.VARIANTS)
ISSUE_KS = list(range(1, 71)) + list(range(480, 545)) + [961, 992, 1024]  # 961, 992: warpscan's widened chunk


@pytest.mark.parametrize("W", [8, 16, 32])
@pytest.mark.parametrize("precision", ["f32", "f64"])
def test_every_variant_gives_identical_z_with_dyadic_weights(W, precision):
    for K in ISSUE_KS:
        small = K > 70  # large K: fewer, shorter documents keep the test quick
        report = verify_point(K, W, precision, seed=2024, num_warps=2 if small else 4,
                              max_length=40 if small else 150)
        assert report["tokens"] > 0
        assert report["mismatches"] == {v: 0 for v in VARIANTS}, (K, report["mismatches"])


def test_warpscan_chunks_avoid_a_multiple_of_31():
    """Lanes 31 topics apart read one bank of the GPU tile (a pad word per 32): such chunks widen
    by one, and the last lanes' chunks may be short or empty."""
    chunks = {K: drawz_cpu.warpscan_chunk(K) for K in (1, 32, 33, 960, 961, 992, 993, 1024, 1953, 1985)}
    assert chunks == {1: 1, 32: 1, 33: 2, 960: 30, 961: 32, 992: 32, 993: 32, 1024: 32, 1953: 63, 1985: 63}


@pytest.mark.parametrize("precision", ["f32", "f64"])
def test_segscan_up_to_its_32_segments_gives_identical_z_and_refuses_more(precision):
    """segscan's segments are 32 lanes x 16 bytes: K up to 4096 in f32 and 2048 in f64 (a last
    segment part full, a lane's chunk part past K); one more topic is a one-line error."""
    largest = 4096 if precision == "f32" else 2048
    for K in (1025, 1027, largest - 1, largest):
        report = verify_point(K, 32, precision, seed=2025, num_warps=1, max_length=20, variants=("alg1", "segscan"))
        assert report["tokens"] > 0 and report["mismatches"] == {"alg1": 0, "segscan": 0}, (K, report)
    with pytest.raises(ValueError, match=f"segscan holds K <= {largest}"):
        drawz_cpu.segscan_segments(largest + 1, 4 if precision == "f32" else 8)


def test_segscans_kernel_has_a_segment_per_lane_at_least():
    # 128 topics a segment in f32, 64 in f64; kernels for 1, 2, 4, .., 32 segments, _full
    # where K fills them all.
    from impls.lda.drawz_gpu import kernel_name

    names = {(p, K): kernel_name("segscan", p, "auto", K=K)
             for p in ("f32", "f64") for K in (1, 128, 129, 1000, 1024, 2048)}
    assert names["f32", 1] == "drawz_segscan_1_f32" and names["f32", 129] == "drawz_segscan_2_f32"
    assert names["f32", 128] == "drawz_segscan_1_full_f32" and names["f64", 128] == "drawz_segscan_2_full_f64"
    assert names["f32", 1000] == "drawz_segscan_8_f32" and names["f64", 1000] == "drawz_segscan_16_f64"
    assert names["f32", 1024] == "drawz_segscan_8_full_f32" and names["f64", 1024] == "drawz_segscan_16_full_f64"
    assert names["f64", 2048] == "drawz_segscan_32_full_f64" and names["f64", 129] == "drawz_segscan_4_f64"
    with pytest.raises(ValueError, match="depends on K"):
        kernel_name("segscan", "f32", "auto")


def test_a_sweep_skips_segscan_beyond_its_k_in_one_line():
    plan = harness.plan(get_suite("lda-kernels"), {"k": "1024,2049,4096,4100", "precision": "f32,f64",
                                                   "dataset": "tiny"}, "cpu", ["alg1", "segscan"])
    skipped = {(p["K"], p["precision"]) for p, variant, _ in plan.skipped_at if variant == "segscan"}
    assert skipped == {(2049, "f64"), (4096, "f64"), (4100, "f64"), (4100, "f32")}
    assert plan.describe_skips() == ["variant segscan skipped at 4 point(s): segscan holds K <= 4096 in f32, "
                                     "2048 in f64"]


@pytest.mark.parametrize("K", [1, 5, 31, 32, 33, 100, 1024])
def test_draws_follow_the_exact_probabilities(K):
    report = verify_point(K, 32, "f32", seed=7)
    assert min(report["chi2_p"].values()) > 1e-4, report["chi2_p"]


def _dyadic(data, K, num_docs, vocab_size, dtype):
    ints = st.integers(0, 7)
    theta = np.array(data.draw(st.lists(ints, min_size=num_docs * K, max_size=num_docs * K)), dtype) / 8
    phi = np.array(data.draw(st.lists(ints, min_size=vocab_size * K, max_size=vocab_size * K)), dtype) / 8
    return theta.reshape(num_docs, K), phi.reshape(vocab_size, K)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), K=st.integers(1, 80), W=st.sampled_from([8, 16, 32]),
       precision=st.sampled_from([np.float32, np.float64]))
def test_hypothesis_weights_and_lengths(data, K, W, precision):
    num_warps = data.draw(st.integers(1, 2))
    lengths = data.draw(st.lists(st.integers(0, 12), min_size=num_warps * W, max_size=num_warps * W))
    doc_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    vocab_size = 5
    words = np.array(data.draw(st.lists(st.integers(0, vocab_size - 1), min_size=int(doc_ptr[-1]),
                                        max_size=int(doc_ptr[-1]))), dtype=np.int32)
    theta, phi = _dyadic(data, K, num_warps * W, vocab_size, precision)
    u = np.array(data.draw(st.lists(st.integers(0, 2**20 - 1), min_size=words.size, max_size=words.size)),
                 dtype=precision) / 2**20
    draws = {}
    for variant in VARIANTS:
        z = np.full(words.size, -1, dtype=np.int32)
        drawz_cpu.draw_z(variant, doc_ptr, words, theta, phi, u, z, W)
        draws[variant] = z
    for variant in VARIANTS:
        np.testing.assert_array_equal(draws[variant], draws["alg1"], err_msg=variant)
    assert (draws["alg1"] >= 0).all() and (draws["alg1"] < K).all()


@pytest.mark.parametrize("variant", VARIANTS)
def test_real_valued_weights_are_drawn_in_proportion(variant):
    rng = np.random.default_rng(3)
    K, W, num_docs = 40, 32, 64
    lengths = np.sort(rng.integers(0, 200, num_docs))[::-1]
    doc_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    words = rng.integers(0, 30, int(doc_ptr[-1])).astype(np.int32)
    theta = rng.dirichlet(np.full(K, 0.5), num_docs)
    phi = rng.random((30, K)) ** 3
    u = rng.random(words.size)
    z = np.full(words.size, -1, dtype=np.int32)
    drawz_cpu.draw_z(variant, doc_ptr, words, theta, phi, u, z, W)
    assert chi_square_p(z, token_probabilities(doc_ptr, words, theta, phi)) > 1e-4


def test_last_word_redrawn_by_the_master_index_is_idempotent():
    # Lanes of short documents repeat their last token while the warp's longest
    # document goes on; the shared uniform makes the repeat write the same z.
    report = verify_point(48, 8, "f64", seed=11, num_warps=1, max_length=100)
    assert report["mismatches"]["alg7"] == 0 and report["mismatches"]["alg4"] == 0


def test_unknown_variant_is_an_error():
    with pytest.raises(ValueError, match="unknown draw-z variant"):
        drawz_cpu.draw_z("alg9", np.zeros(2, np.int64), np.zeros(0, np.int32), np.ones((1, 4)),
                         np.ones((1, 4)), np.zeros(0), np.zeros(0, np.int32))


@pytest.mark.parametrize("precision", ["f32", "f64"])
def test_pairscan_draws_what_warpscan_draws_where_pairs_repeat(precision):
    """pairscan keeps a repeated (document, word) pair's sums: the same numbers, so the same
    topics as warpscan for any weights, on documents whose tokens repeat words side by side."""
    rng = np.random.default_rng(7)
    dtype = np.float32 if precision == "f32" else np.float64
    lengths = rng.integers(0, 60, 40)
    doc_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    words = np.sort(rng.integers(0, 6, (40, 60)), axis=1)  # runs of one word in every document
    words = np.concatenate([row[:n] for row, n in zip(words, lengths)]).astype(np.int32)
    assert (np.diff(words) == 0).mean() > 0.5
    for K in (1, 31, 100, 1024):
        theta, phi = rng.random((40, K), dtype=dtype), rng.random((6, K), dtype=dtype)
        u = rng.random(words.size, dtype=dtype)
        z = {v: np.full(words.size, -1, np.int32) for v in ("warpscan", "pairscan")}
        for variant, out in z.items():
            drawz_cpu.draw_z(variant, doc_ptr, words, theta, phi, u, out)
        assert (z["pairscan"] >= 0).all() and (z["pairscan"] == z["warpscan"]).all(), K
