"""SaberLDA's CPU twin (the groundwork of the saber suite): Philox against its published
known answers, the warp's scan, sum and vote, the W-ary tree and the alias table against
exact inverse-CDF draws on dyadic weights, Fig. 8's segmented count and Fig. 1/2's
counts, the E-step's topics against their exact probabilities (chi-square), and the
independence of the draws from the order the tokens are visited in."""

import numpy as np
import pytest
from scipy.stats import chisquare

from bench.errors import BenchError
from impls.saber import model, philox, structures
from impls.saber.structures import W, level3_size, padded

TOPIC_COUNTS = [*range(1, 71), 1000, 1024, 1025, 32768]


def dyadic_weights(rng, size: int) -> np.ndarray:
    """Eighths 0..7/8 with at least one non-zero: every prefix sum is exact in float32."""
    weights = rng.integers(0, 8, size).astype(np.float32) / 8
    weights[rng.integers(size)] = np.float32(0.5)
    return weights


def test_philox_gives_the_random123_known_answers():
    # kat_vectors of Random123 for philox4x32-10 (also what randomgen's Philox(number=4, width=32) gives)
    assert philox.philox4x32(0, 0, 0, 0, 0, 0) == (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)
    ones = 0xFFFFFFFF
    assert philox.philox4x32(ones, ones, ones, ones, ones, ones) == (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)
    assert philox.philox4x32(0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344, 0xA4093822, 0x299F31D0) == \
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)


def test_uniforms_are_in_the_open_closed_unit_interval_and_keyed_by_token_and_iteration():
    assert philox.to_uniform(0) == 2.0 ** -24 and philox.to_uniform(0xFFFFFFFF) == 1.0
    draws = {philox.token_uniforms(5, iteration, token) for iteration in range(3) for token in range(100)}
    assert len(draws) == 300
    assert philox.token_uniforms(5, 1, 7) == philox.token_uniforms(5, 1, 7) != philox.token_uniforms(6, 1, 7)


@pytest.mark.parametrize("size", [1, 31, 32, 33, 64, 100, 1025])
def test_chunked_scan_and_lane_partials_scanned_are_exact_on_dyadic_values(size):
    values = dyadic_weights(np.random.default_rng(size), size)
    out = np.empty(padded(size) + W, np.float32)  # a padded tail holds the total
    structures.chunked_scan(values, out)
    exact = np.cumsum(values.astype(np.float64))
    assert np.array_equal(out[:size], exact) and np.all(out[size:] == exact[-1])
    structures.chunked_scan(values, out, np.float32(0.5))  # from a carry
    assert np.array_equal(out[:size], exact + 0.5)
    lanes = np.empty(W, np.float32)
    structures.lane_partials(values, size, lanes)
    structures.warp_scan(lanes)
    by_lane = np.array([values[lane::W].astype(np.float64).sum() for lane in range(W)])
    assert np.array_equal(lanes, np.cumsum(by_lane)) and lanes[-1] == exact[-1]


def _tree(weights):
    l4 = np.empty(padded(weights.size), np.float32)
    l3 = np.empty(level3_size(weights.size), np.float32)
    l2 = np.empty(W, np.float32)
    total = structures.build_tree(weights, l4, l3, l2)
    return total, l4, l3, l2


@pytest.mark.parametrize("topics", TOPIC_COUNTS)
def test_tree_draws_the_exact_inverse_cdf_topic(topics):
    rng = np.random.default_rng(topics)
    weights = dyadic_weights(rng, topics)
    total, l4, l3, l2 = _tree(weights)
    prefix = np.cumsum(weights.astype(np.float64))
    assert total == prefix[-1]
    points = np.concatenate([prefix[weights > 0], rng.random(200) * total, [total, 2.0 ** -24]])
    for x in points.astype(np.float32):
        k = structures.tree_sample(l4, l3, l2, x)
        assert k == np.searchsorted(prefix, x, side="left") and weights[k] > 0


def test_tree_levels_point_at_the_last_prefix_of_each_group():
    weights = np.ones(3000, np.float32)
    total, l4, l3, l2 = _tree(weights)
    assert l3[0] == l4[31] == 32 and l3[1] == l4[63]  # Fig. 6's listing reads L4[-1] here
    assert np.all(l3[3000 // 32 + 1:] == total) and l2[0] == l3[31] and l2[W - 1] == total == 3000


@pytest.mark.parametrize("topics", [1, 100, 1000, 1024, 3000, 32768])
def test_the_compact_third_level_draws_what_one_padded_to_w_squared_draws(topics):
    # L3 holds level3_size nodes (32 at K = 1024), where the paper's fix pads it to W^2.
    weights = dyadic_weights(np.random.default_rng(topics), topics)
    total, l4, l3, l2 = _tree(weights)
    assert l3.size % W == 0 and l3.size * W >= l4.size and l3.size <= W * W
    wide3, wide2 = np.empty(W * W, np.float32), np.empty(W, np.float32)
    assert structures.build_tree(weights, np.empty_like(l4), wide3, wide2) == total
    assert np.array_equal(wide2, l2) and np.array_equal(wide3[:l3.size], l3)
    points = np.random.default_rng(1).random(500) * total * 1.01  # some past the total
    for x in np.concatenate([points, [total, np.nextafter(total, np.float32(np.inf))]]).astype(np.float32):
        assert structures.tree_sample(l4, l3, l2, x) == structures.tree_sample(l4, wide3, wide2, x)


def test_a_draw_at_the_total_stays_below_k():
    # Random float32 weights: the scan padded with zeros ends an ulp above the last
    # prefix for some words; the padding now holds the last prefix, so u = 1 draws K - 1.
    rng = np.random.default_rng(7)
    for topics in range(2, 200):
        for _ in range(5):
            total, l4, l3, l2 = _tree(rng.random(topics, dtype=np.float32))
            assert total == l4[topics - 1]
            assert structures.tree_sample(l4, l3, l2, np.float32(1) * total) == topics - 1


@pytest.mark.parametrize("topics", [1, 2, 3, 17, 64, 100, 1000])
def test_alias_table_holds_the_distribution(topics):
    weights = np.random.default_rng(topics).random(topics).astype(np.float32) + np.float32(0.01)
    total = np.float32(weights.sum())
    probability = np.empty(topics, np.float32)
    alias = np.empty(topics, np.int32)
    structures.build_alias(weights, total, probability, alias)
    mass = probability.astype(np.float64) / topics
    np.add.at(mass, alias, (1 - probability.astype(np.float64)) / topics)
    assert np.allclose(mass, weights / weights.astype(np.float64).sum(), rtol=1e-4, atol=1e-7)
    assert structures.alias_sample(probability, alias, np.float32(1.0)) in (topics - 1, alias[topics - 1])


def test_segmented_count_of_figure_8():
    keys, counts = np.empty(8, np.int32), np.empty(8, np.int32)
    n = structures.segmented_count(np.array([1, 8, 5, 1, 3, 5, 5, 3], np.int32), keys, counts)
    assert n == 4 and keys[:n].tolist() == [1, 3, 5, 8] and counts[:n].tolist() == [2, 2, 3, 1]


def test_counts_of_the_figure_1_example():
    # Doc1: iOS^3 Android^3; Doc2: apple^1 iPhone^1 apple^1 iOS^3; Doc3: apple^2 orange^2 (topics 1-3 -> 0-2)
    ios, android, apple, iphone, orange = range(5)
    words = np.array([ios, android, apple, iphone, apple, ios, apple, orange], np.int32)
    z = np.array([3, 3, 1, 1, 1, 3, 2, 2], np.int32) - 1
    counts = model.count(np.array([0, 2, 6, 8]), words, z, vocabulary=5, topics=3)
    rows = [dict(zip(counts.a_idx[a:b] + 1, counts.a_val[a:b])) for a, b in zip(counts.a_ptr[:-1], counts.a_ptr[1:])]
    assert rows == [{3: 2}, {1: 3, 3: 1}, {2: 2}]  # A_13 = 2; A_21 = 3, A_23 = 1; A_32 = 2
    assert counts.b[apple].tolist() == [2, 1, 0] and counts.topic_totals.tolist() == [3, 2, 3]


@pytest.mark.parametrize("topics", [1, 7, 1000])
def test_segmented_count_and_the_global_sort_rebuild_the_same_counts(topics):
    rng = np.random.default_rng(topics)
    lengths = rng.integers(0, 50, 80)  # empty documents too
    doc_ptr = np.concatenate([[0], np.cumsum(lengths)])
    words = rng.integers(0, 30, doc_ptr[-1]).astype(np.int32)
    z = rng.integers(0, topics, doc_ptr[-1]).astype(np.int32)
    ssc, by_sort = model.count(doc_ptr, words, z, 30, topics), model.count_by_sorting(doc_ptr, words, z, 30, topics)
    for field in ("a_ptr", "a_idx", "a_val", "b", "topic_totals"):
        assert np.array_equal(getattr(ssc, field), getattr(by_sort, field)), field
    dense = np.zeros((80, topics), np.int64)
    np.add.at(dense, (np.repeat(np.arange(80), lengths), z), 1)
    assert ssc.a_val.sum() == z.size and np.array_equal(
        dense[np.repeat(np.arange(80), np.diff(ssc.a_ptr)), ssc.a_idx], ssc.a_val)


def test_sparse_branch_draws_the_exact_inverse_cdf_non_zero():
    """The inverse CDF of the non-zeros in lane order (lane l holds non-zeros l, l + 32, ...),
    whatever their number: one lane, part of a warp, several chunks of a lane."""
    rng = np.random.default_rng(3)
    topics = 2200
    products = np.empty(topics, np.float32)
    prefix = np.empty(W + padded(-(-topics // W)), np.float32)
    for nnz in (1, 5, 32, 75, 2100):
        a_idx = np.sort(rng.choice(topics, nnz, replace=False)).astype(np.int32)
        a_val = rng.integers(1, 5, nnz).astype(np.int32)
        bhat_v = dyadic_weights(rng, topics) + np.float32(0.125)
        in_lanes = np.concatenate([np.arange(lane, nnz, W) for lane in range(W)])
        exact = np.cumsum((a_val * bhat_v[a_idx].astype(np.float64))[in_lanes])
        for u2 in rng.random(100).astype(np.float32):
            k = model.sparse_draw(a_idx, a_val, 0, nnz, bhat_v, np.float32(0), np.float32(1), np.float32(0.5), u2,
                                  products, prefix)
            assert k == a_idx[in_lanes[np.searchsorted(exact, u2 * np.float32(exact[-1]), side="left")]]
        # The own topic left out: its product (A_d,own - 1) bhat_own, in its place in lane order
        at, bhat_own = rng.integers(nnz), np.float32(0.25)
        left_out = a_val * bhat_v[a_idx].astype(np.float64)
        left_out[at] = (a_val[at] - 1) * bhat_own
        exact = np.cumsum(left_out[in_lanes])
        for u2 in rng.random(100).astype(np.float32):
            k = model.sparse_draw(a_idx, a_val, 0, nnz, bhat_v, np.float32(0), np.float32(1), np.float32(0.5), u2,
                                  products, prefix, a_idx[at], bhat_own)
            if exact[-1] > 0:
                assert k == a_idx[in_lanes[np.searchsorted(exact, u2 * np.float32(exact[-1]), side="left")]]
    # x on a prefix sum exactly: that non-zero, not the next (equal products 1/2, u2 = j / 64)
    ones, halves = np.ones(64, np.int32), np.full(topics, 0.5, np.float32)
    in_lanes = np.concatenate([np.arange(lane, 64, W) for lane in range(W)])
    for j in range(1, 65):
        k = model.sparse_draw(a_idx[:64], ones, 0, 64, halves, np.float32(0), np.float32(1), np.float32(0.5),
                              np.float32(j / 64), products, prefix)
        assert k == a_idx[in_lanes[j - 1]]


def _one_document(a_idx, a_val, bhat_v, tokens):
    """tokens of one word in one document whose counts A_d are given (A read-only in the E-step)."""
    counts = model.Counts(np.array([0, a_idx.size]), a_idx, a_val, np.zeros((1, bhat_v.size), np.int32),
                          np.zeros(bhat_v.size, np.int64))
    return counts, np.zeros(tokens, np.int32), np.zeros(tokens, np.int32)


@pytest.mark.parametrize("kind", model.STRUCTURES)
@pytest.mark.parametrize("topics", [5, 100, 3000])
def test_e_step_draws_from_the_exact_conditional(kind, topics):
    rng = np.random.default_rng(topics)
    a_idx = np.sort(rng.choice(topics, min(topics, 12), replace=False)).astype(np.int32)
    a_val = rng.integers(1, 20, a_idx.size).astype(np.int32)
    bhat = (rng.random((1, topics)) + 0.05).astype(np.float32)
    bhat /= bhat.sum()
    tokens = 40_000
    counts, doc_of, words = _one_document(a_idx, a_val, bhat[0], tokens)
    z = model.e_step(np.arange(tokens), doc_of, words, counts, bhat, model.preprocess(bhat, kind), seed=11,
                     iteration=2)
    a_row = np.zeros(topics)
    a_row[a_idx] = a_val
    p = (a_row + model.alpha_of(topics)) * bhat[0]
    p /= p.sum()
    observed = np.bincount(z, minlength=topics)
    # Pool the topics into bins of at least 20 expected draws, as chi-square needs.
    order = np.argsort(p)
    bins = np.minimum(np.cumsum(p[order]) * tokens // 20, tokens // 20 - 1).astype(int)
    expected = np.bincount(bins, p[order] * tokens)
    got = np.bincount(bins, observed[order])
    assert chisquare(got[expected > 0], expected[expected > 0]).pvalue > 1e-4


@pytest.mark.parametrize("document", [(2,), (2, 2, 5)])
def test_e_step_without_the_own_topic_draws_collapsed_gibbs_conditional(document):
    """Documents of one word, each with the old topics `document`, among other words' tokens:
    the tokens of old topic 2 draw from (A_dk - [k = 2] + alpha) (B_vk - [k = 2] + beta) /
    (n_k - [k = 2] + V beta). Alone in its document a token's own count leaves A empty (the
    prior's branch: the tree's draw shifted past the own topic's shrunken interval); in
    (2, 2, 5) A keeps a 2 and a 5 (the sparse branch). Counting the own topic, as ESCA does,
    would weigh topic 2 by 3 alone and by 2 in (2, 2, 5)."""
    rng = np.random.default_rng(1)
    topics, vocabulary, documents, other = 100, 30, 60_000 // len(document), 500
    lengths = np.concatenate([np.full(documents, len(document)), np.ones(other, np.int64)])
    doc_ptr = np.concatenate([[0], np.cumsum(lengths)])
    words = np.concatenate([np.zeros(documents * len(document), np.int32),
                            rng.integers(1, vocabulary, other).astype(np.int32)])
    # Alone, every old topic 0, 1 and 2 among the one-token documents; else the same document throughout.
    mine = rng.integers(0, 3, documents) if len(document) == 1 else np.tile(document, documents)
    z = np.concatenate([mine, rng.integers(0, topics, other)]).astype(np.int32)
    counts = model.count(doc_ptr, words, z, vocabulary, topics)
    bhat = model.b_hat(counts)
    doc_of = np.repeat(np.arange(lengths.size, dtype=np.int32), lengths)
    drawn = model.e_step(np.arange(words.size), doc_of, words, counts, bhat, model.preprocess(bhat, "tree"), seed=5,
                         iteration=1, own_topics=z)
    group = np.flatnonzero(z[:mine.size] == 2)
    own = np.eye(topics)[2]
    a_row = np.bincount(document, minlength=topics) if len(document) > 1 else own
    alpha, beta = float(model.alpha_of(topics)), float(model.BETA)
    p = (a_row - own + alpha) * (counts.b[0] - own + beta) / (counts.topic_totals - own + vocabulary * beta)
    p /= p.sum()
    observed = np.bincount(drawn[group], minlength=topics)
    order = np.argsort(p)  # topics pooled into bins of at least 20 expected draws
    bins = np.minimum(np.cumsum(p[order]) * group.size // 20, group.size // 20 - 1).astype(int)
    expected = np.bincount(bins, p[order] * group.size)
    got = np.bincount(bins, observed[order])
    assert chisquare(got[expected > 0], expected[expected > 0]).pvalue > 1e-4


@pytest.mark.parametrize("topics", [5, 33, 1000])
def test_a_draw_without_the_own_topic_at_u2_one_stays_within_the_topics(topics):
    """Past the own topic's shortened interval the tree is searched at x + shrink, which
    rounding can carry an ulp past the word's total: into the tree's padding, where there
    is no topic, unless clamped (it happened on the GPU at K = 1000)."""
    rng = np.random.default_rng(topics)
    for _ in range(300):
        b = rng.integers(0, 5, (1, topics)).astype(np.int32)
        own = int(rng.integers(0, topics))
        b[0, own] += 1  # the token itself
        counts = model.Counts(np.array([0, 1]), np.array([own], np.int32), np.array([1], np.int32), b,
                              b.sum(axis=0, dtype=np.int64) + rng.integers(0, 100, topics))
        bhat = model.b_hat(counts)
        trees = model.preprocess(bhat, "tree")
        denominator = counts.topic_totals.astype(np.float32) + model.BETA  # V = 1
        bhat_own, mass = map(np.float32, model.own_topic_correction(bhat[0, own], denominator[own], trees.totals[0]))
        drawn = model.tree_draw_without_own(0, np.float32(1.0), mass, trees.level4, trees.level3, trees.level2, own,
                                            bhat[0, own] - bhat_own)
        assert 0 <= drawn < topics


def test_leaving_the_own_topic_out_needs_the_tree():
    counts, doc_of, words = _one_document(np.array([0], np.int32), np.array([3], np.int32),
                                          np.full(4, 0.25, np.float32), 3)
    bhat = model.b_hat(counts)
    with pytest.raises(BenchError, match="tree"):
        model.e_step(np.arange(3), doc_of, words, counts, bhat, model.preprocess(bhat, "alias"), 0, 0,
                     own_topics=np.zeros(3, np.int32))


def test_topics_do_not_depend_on_the_order_tokens_are_visited_in():
    rng = np.random.default_rng(0)
    documents, vocabulary, topics = 60, 50, 70
    lengths = rng.integers(1, 40, documents)
    doc_ptr = np.concatenate([[0], np.cumsum(lengths)])
    words = rng.integers(0, vocabulary, doc_ptr[-1]).astype(np.int32)
    doc_of = np.repeat(np.arange(documents), lengths).astype(np.int32)
    z = model.initial_topics(words.size, topics, seed=4)
    counts = model.count(doc_ptr, words, z, vocabulary, topics)
    bhat = model.b_hat(counts)
    for kind in model.STRUCTURES:
        structures_ = model.preprocess(bhat, kind)
        by_document = model.e_step(np.arange(words.size), doc_of, words, counts, bhat, structures_, 4, 0)
        pdow = model.pdow_order(model.chunk_layout(doc_ptr, words, chunks=4))
        assert sorted(pdow) == list(range(words.size)) and not np.array_equal(pdow, np.arange(words.size))
        assert np.array_equal(model.e_step(pdow, doc_of, words, counts, bhat, structures_, 4, 0), by_document)
        assert not np.array_equal(model.e_step(pdow, doc_of, words, counts, bhat, structures_, 4, 1), by_document)


def test_topic_counts_beyond_the_tree_are_one_line_errors():
    with pytest.raises(BenchError, match="32,768"):
        model.initial_topics(10, 32_769, seed=0)
    assert model.initial_topics(10, 32_768, seed=0).max() < 32_768


def test_stages_with_one_structure_draw_the_same_topics_and_the_suite_sweeps(tmp_path):
    from bench import harness
    from bench.timing import RunContext
    from impls.saber.suite import SUITE, iterate

    point = {"suite": "saber", "backend": "cpu", "dataset": "tiny", "scale": 1.0, "K": 70, "iterations": 2,
             "chunks": 3}
    work = SUITE.prepare(point)
    topics = {}
    for stage in ("G0", "G1", "G2", "G3", "G4"):
        ctx = RunContext("cpu")
        with ctx.timed():
            topics[stage], _ = iterate(work, stage, ctx)
        assert [row["iteration"] for row in ctx.series] == [1, 2] and set(ctx.phases) == {"preprocess", "sample", "rebuild"}
    assert np.array_equal(topics["G0"], topics["G1"])  # PDOW only reorders
    assert np.array_equal(topics["G2"], topics["G3"]) and np.array_equal(topics["G2"], topics["G4"])
    assert not np.array_equal(topics["G0"], topics["G2"])  # alias and tree map u2 to topics differently
    settings = harness.Settings(repeats=2, warmup=0, out_dir=tmp_path / "results" / "cpu-test")
    assert harness.sweep(harness.plan(SUITE, {"dataset": "tiny", "K": "5,70", "iterations": "1"}, "cpu"),
                         settings) == 0
    from bench.figures import render_all

    names = {path.name for path in render_all(tmp_path / "results", tmp_path / "figures", [SUITE])}
    assert {"fig9-phases-by-stage-dataset-tiny-K-5.png", "fig9-phases-by-stage-dataset-tiny-K-70.png",
            "saber-throughput-vs-k.png"} <= names, names
    assert "fig10-tuning.png" not in names  # no axis of Figure 10 was swept
    # G4 alone against its workers, resident (no tuning: Figure 10 is streamed), then within a
    # budget: Figure 10's panel (b), and neither Figure 9 (one stage) nor throughput against K
    # (one K) for those points.
    assert harness.sweep(harness.plan(SUITE, {"dataset": "tiny", "K": "5", "iterations": "1", "workers": "1,2"},
                                      "cpu", variant_names=["G4"]), settings) == 0
    names = {path.name for path in render_all(tmp_path / "results", tmp_path / "figures", [SUITE])}
    assert "fig10-tuning.png" not in names
    assert harness.sweep(harness.plan(SUITE, {"dataset": "tiny", "K": "5", "iterations": "1", "workers": "1,2",
                                              "memory": "1"}, "cpu", variant_names=["G4"]), settings) == 0
    names = {path.name for path in render_all(tmp_path / "results", tmp_path / "figures", [SUITE])}
    assert "fig10-tuning.png" in names
    assert not [name for name in names if "workers-1" in name], names
    assert "saber-gpus-scaling.png" not in names  # one GPU throughout
    # G4 against the number of GPUs (a CPU sweep runs gpus = 1 alone): G4's rows as if from a
    # GPU, and again as if from two GPUs 1.9 times as fast, give the figure and its table.
    import shutil

    import pandas as pd

    gpu_dir = tmp_path / "results-gpu" / "gpu-test"
    gpu_dir.mkdir(parents=True)
    rows = pd.read_csv(settings.out_dir / "saber.csv")
    rows = rows[(rows["K"] == 5) & (rows["variant"] == "G4") & (rows["workers"] == 4)].assign(backend="gpu")
    two = rows.assign(gpus=2, tokens_per_s=rows["tokens_per_s"].median() * 1.9)
    pd.concat([rows, two]).to_csv(gpu_dir / "saber.csv", index=False)
    shutil.copy(settings.out_dir / "saber.json", gpu_dir / "saber.json")
    names = {path.name for path in render_all(tmp_path / "results-gpu", tmp_path / "figures-gpu", [SUITE])}
    assert {"saber-gpus-scaling.png", "saber-gpus-scaling.md"} <= names
    table = (tmp_path / "figures-gpu" / "gpu-test" / "saber-gpus-scaling.md").read_text()
    assert "G4, tiny at 0.001, K = 5" in table and "1.90x" in table and "95%" in table
    # a later run of one GPU alone, 1.5 times as fast: the line stays the run that measured both
    later = rows.assign(run_id="99991231T000000Z-later", tokens_per_s=rows["tokens_per_s"] * 1.5)
    pd.concat([rows, two, later]).to_csv(gpu_dir / "saber.csv", index=False)
    render_all(tmp_path / "results-gpu", tmp_path / "figures-gpu", [SUITE])
    assert "1.90x" in (tmp_path / "figures-gpu" / "gpu-test" / "saber-gpus-scaling.md").read_text()
    with pytest.raises(BenchError, match="32768"):
        harness.plan(SUITE, {"K": "40000"}, "cpu")


def test_stage_changes_are_ratios_within_a_repeat():
    import pandas as pd

    from impls.saber.figures import stage_changes

    rows = []
    for repeat, scale in enumerate((1.0, 3.0)):  # a slower repeat moves every stage alike
        for stage, sample in (("G0", 10.0), ("G1", 6.0)):
            rows.append({"run_id": "r", "group": "g", "repeat": repeat, "variant": stage, "seconds": 20 * scale,
                         "sample_s": sample * scale, "rebuild_s": 1.0, "preprocess_s": 1.0})
    changes = {what: (paper, ours) for what, paper, ours in stage_changes(pd.DataFrame(rows))}
    assert changes == {"SL1 PDOW: sampling": (-0.40, pytest.approx(-0.40))}


def test_verify_compares_each_stage_with_its_structures_twin():
    from impls.saber.suite import SUITE

    point = {"suite": "saber", "backend": "cpu", "dataset": "tiny", "scale": 1.0, "K": 33, "iterations": 1,
             "chunks": 3, "own": "counted"}
    case = SUITE.verify_case(point, seed=5)
    got = SUITE.output(case, "G3", "cpu")
    assert SUITE.agrees(case, got, 1e-3)[0] and set(case["twins"]) == {"G2"}
    got["topics"][7] = (got["topics"][7] + 1) % 33
    ok, detail = SUITE.agrees(case, got, 1e-3)
    assert not ok and detail.startswith("1 of")


def test_verify_with_the_own_topic_left_out_checks_the_tree_stages_against_the_twin_left_out():
    from bench import harness
    from impls.saber.suite import SUITE

    plan = harness.plan(SUITE, {"K": "33", "own": "left-out", "iterations": "1"}, "cpu", verification=True)
    assert [name for name, _ in plan.variants_at(plan.points[0])] == ["G2", "G3", "G4"]
    assert any("G0's alias table cannot leave the own topic out" in line for line in plan.describe_skips())
    case = SUITE.verify_case(plan.points[0], seed=5)
    got = SUITE.output(case, "G4", "cpu")
    assert SUITE.agrees(case, got, 1e-3)[0]
    counted = SUITE.output({**case, "without_own": False}, "G4", "cpu")
    assert not np.array_equal(got["topics"], counted["topics"])  # the correction changes draws


@pytest.mark.parametrize("header, missing", [("0\n0\n0\n", "documents"), ("3\n0\n0\n", "words in its vocabulary"),
                                             ("3\n5\n0\n", "tokens")])
def test_a_corpus_with_nothing_to_sample_is_a_one_line_error(tmp_path, header, missing):
    from bench import harness
    from impls.saber.suite import SUITE

    path = tmp_path / "docword.empty.txt"
    path.write_text(header)
    plan = harness.plan(SUITE, {"dataset": str(path), "K": "5"}, "cpu")
    with pytest.raises(BenchError, match=f"has no {missing}"):
        SUITE.check(plan.points)  # what a sweep and a verification do before anything else


def test_chunk_layout_keeps_documents_whole_and_cuts_segments_of_one_word():
    rng = np.random.default_rng(2)
    lengths = np.concatenate([rng.integers(1, 60, 100), [0, 6000]])
    doc_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    words = np.minimum(rng.zipf(1.2, doc_ptr[-1]) - 1, 24).astype(np.int32)
    layout = model.chunk_layout(doc_ptr, words, chunks=4)
    assert max(np.bincount(c.words).max() for c in layout) > model.SEGMENT_TOKENS  # a word cut into segments
    assert [c.first_token for c in layout] == [int(doc_ptr[c.first_document]) for c in layout]
    assert sum(c.documents for c in layout) == lengths.size and sum(c.tokens for c in layout) == words.size
    for chunk in layout:
        assert np.array_equal(chunk.doc_ptr, doc_ptr[chunk.first_document:chunk.first_document + chunk.documents + 1]
                              - chunk.first_token)
        sizes = np.diff(chunk.segment_ptr)
        assert sizes.min() > 0 and sizes.max() <= model.SEGMENT_TOKENS and chunk.segment_ptr[-1] == chunk.tokens
        assert np.all(np.diff(sizes[chunk.schedule]) <= 0)  # the longest segment first
        for first, last in zip(chunk.segment_ptr[:-1], chunk.segment_ptr[1:]):
            assert np.unique(chunk.words[chunk.by_word[first:last]]).size == 1
        per_word = np.bincount(chunk.words)
        assert chunk.schedule.size == (-(-per_word // model.SEGMENT_TOKENS)).sum()  # as few segments as that allows
    assert sorted(model.pdow_order(layout)) == list(range(words.size))
    assert len(model.chunk_layout(doc_ptr, words, chunks=100)) <= lengths.size  # never an empty chunk


def test_memory_budget_chooses_chunks_or_is_a_one_line_error():
    from impls.saber import stream

    doc_ptr = np.arange(0, 100_001, 100, dtype=np.int64)  # 1000 documents of 100 tokens
    model_gib = stream.model_bytes(500, 1000) / stream.GIB
    corpus_gib = stream.chunk_bytes(100_000, 1000) / stream.GIB
    assert stream.chunks_for_budget(doc_ptr, 500, 1000, 4, 2, 0.0) == (4, True)  # no budget
    assert stream.chunks_for_budget(doc_ptr, 500, 1000, 4, 2, model_gib + corpus_gib) == (4, True)
    chunks, resident = stream.chunks_for_budget(doc_ptr, 500, 1000, 4, 2, model_gib + corpus_gib / 4)
    assert not resident and chunks >= 8  # a quarter of the corpus for 2 workers: an eighth each
    with pytest.raises(BenchError, match="too small for one chunk"):
        stream.chunks_for_budget(doc_ptr, 500, 1000, 4, 2, model_gib)
    # Two GPUs: each holds half the corpus within its own budget.
    assert stream.chunks_for_budget(doc_ptr, 500, 1000, 4, 2, model_gib + corpus_gib / 2 + 1e-6, gpus=2) == (4, True)
    assert not stream.chunks_for_budget(doc_ptr, 500, 1000, 4, 2, model_gib + corpus_gib / 2 - 1e-4, gpus=2)[1]


def test_the_code_chooses_one_chunk_where_the_corpus_is_resident_and_overlap_where_it_streams():
    """chunks = 0: one chunk where the corpus is resident (more would only add launches), else
    the fewest the budget allows, more than the workers (a slot each)."""
    from impls.saber import stream

    doc_ptr = np.arange(0, 100_001, 100, dtype=np.int64)
    model_gib = stream.model_bytes(500, 1000) / stream.GIB
    corpus_gib = stream.chunk_bytes(100_000, 1000) / stream.GIB
    assert stream.chunks_for_budget(doc_ptr, 500, 1000, 0, 4, 0.0) == (1, True)
    assert stream.chunks_for_budget(doc_ptr, 500, 1000, 0, 4, model_gib + corpus_gib) == (1, True)
    chunks, resident = stream.chunks_for_budget(doc_ptr, 500, 1000, 0, 4, model_gib + corpus_gib / 2)
    assert not resident and 8 <= chunks <= 10  # a half for 4 workers: an eighth each, +1 for uneven chunks


@pytest.mark.parametrize("chunks, gpus", [(1, 1), (4, 1), (4, 2), (7, 2), (8, 3), (3, 3)])
def test_each_gpu_takes_a_contiguous_even_run_of_chunks(chunks, gpus):
    from impls.saber import stream

    gpu_of = stream.gpu_of_chunks(chunks, gpus)
    assert gpu_of == sorted(gpu_of) and set(gpu_of) == set(range(gpus))
    runs = np.bincount(gpu_of)
    assert runs.max() - runs.min() <= 1


def test_fewer_chunks_than_gpus_is_a_one_line_error():
    from impls.saber import stream

    with pytest.raises(BenchError, match="2 chunk.s. for 3 GPUs"):
        stream.gpu_of_chunks(2, 3)


def test_latest_only_keeps_the_latest_value_alone():
    calls = []

    @model.latest_only
    def square(x):
        calls.append(x)
        return [x * x]

    first = square(3)
    assert square(3) is first and calls == [3]
    assert square(4) == [16] and square(3) is not first and calls == [3, 4, 3]


def test_several_gpus_are_no_point_of_a_cpu_sweep():
    from bench import harness
    from impls.saber.suite import SUITE

    with pytest.raises(BenchError, match="CPU twins run at gpus = 1 only"):
        harness.plan(SUITE, {"K": "5", "gpus": "2"}, "cpu")
    assert len(harness.plan(SUITE, {"K": "5", "gpus": "1,2"}, "gpu").points) == 2
