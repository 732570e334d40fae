"""SaberLDA's GPU kernels against the CPU twin (needs CuPy and a GPU): B^, every word's
tree and alias table, the E-step's topics and the rebuilt counts identical, bit for bit
and topic for topic, for K from 1 to 32,768 (through the padding at multiples of 32 and
the tree's levels), with both structures, the GPU taking a chunk's tokens by word or in
document order; every stage's iterations equal to the twins', resident or streamed within
a memory budget, on one stream or on asynchronous workers, on one GPU or several."""

import numpy as np
import pytest

from impls.saber import gpu, model, stream

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")
SEED = 3


def _gpu_count() -> int:
    try:
        return cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError:  # no driver: the gpu mark skips these tests anyway
        return 0


def _corpus(rng, documents: int, vocabulary: int):
    lengths = rng.integers(1, 60, documents)
    doc_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    words = np.minimum(rng.zipf(1.3, doc_ptr[-1]) - 1, vocabulary - 1).astype(np.int32)
    doc_of = np.repeat(np.arange(documents, dtype=np.int32), lengths)
    return doc_ptr, words, doc_of


def _state(topics: int, documents: int = 120, vocabulary: int = 300, seed: int = 0):
    rng = np.random.default_rng(seed + topics)
    doc_ptr, words, doc_of = _corpus(rng, documents, vocabulary)
    z = model.initial_topics(words.size, topics, SEED)
    counts = model.count(doc_ptr, words, z, vocabulary, topics)
    return doc_ptr, words, doc_of, counts


def _preprocess(b, kind: str) -> tuple:
    """gpu.preprocess's B^, denominators and structures, into new arrays, n_k B's column sums."""
    model_ = gpu.preprocess(b, b.sum(axis=0, dtype=cupy.int64), kind)
    return model_.bhat, model_.denominator, model_.structures


def _assert_structures_equal(device, cpu) -> None:
    for level in ("totals", "level4", "level3", "level2"):
        np.testing.assert_array_equal(cupy.asnumpy(getattr(device, level)), getattr(cpu, level), err_msg=level)


@pytest.mark.parametrize("kind", ["tree", "alias"])
@pytest.mark.parametrize("topics", [1, 2, 31, 32, 33, 100, 1000, 1025])
def test_b_hat_and_structures_are_the_twins_bit_for_bit_and_the_counts_are_zeroed(kind, topics):
    _, _, _, counts = _state(topics)
    b, topic_counts = cupy.asarray(counts.b), cupy.asarray(counts.topic_totals)
    model_ = gpu.preprocess(b, topic_counts, kind)
    expected = model.b_hat(counts)
    np.testing.assert_array_equal(cupy.asnumpy(model_.bhat), expected)
    np.testing.assert_array_equal(cupy.asnumpy(model_.denominator), counts.topic_totals.astype(np.float32)
                                  + np.float32(counts.b.shape[0]) * model.BETA)
    _assert_structures_equal(model_.structures, model.preprocess(expected, kind))
    assert not b.any() and not topic_counts.any(), "B and n_k are zeroed, to count the next iteration's topics"


# K beyond a block's default shared memory (12,288 ints) and to the tree's limit, or in ranges
# (as where a block's shared memory holds fewer counts than K); chunks of no tokens, of fewer
# than a block's and of several blocks' worth, added to the same n_k
@pytest.mark.parametrize("topics, most", [(1, None), (33, None), (1000, None), (20_000, None),
                                          (model.MAX_TOPICS, None), (100, 1), (2500, 1000)])
def test_topic_histograms_of_several_chunks_add_up_to_n_k(topics, most):
    rng = np.random.default_rng(topics)
    sizes = [0, 1, 1000, 300_000]
    zs = [np.minimum(rng.zipf(1.2, size) - 1, topics - 1).astype(np.int32) for size in sizes]
    zs[-1][::7] = rng.integers(0, topics, zs[-1][::7].size)  # every range sees tokens
    totals = cupy.zeros(topics, cupy.int64)
    for z in zs:
        gpu.topic_histogram(cupy.asarray(z), topics, totals, most)
    np.testing.assert_array_equal(cupy.asnumpy(totals), np.bincount(np.concatenate(zs), minlength=topics))


def test_the_largest_tree_is_the_twins():
    rng = np.random.default_rng(1)
    tokens = 300_000  # about three per (word, topic): B^ varies from topic to topic
    z = rng.integers(0, model.MAX_TOPICS, tokens).astype(np.int32)
    counts = model.count(np.array([0, tokens]), rng.integers(0, 3, tokens).astype(np.int32), z, 3, model.MAX_TOPICS)
    _, _, structures = _preprocess(cupy.asarray(counts.b), "tree")
    _assert_structures_equal(structures, model.preprocess(model.b_hat(counts), "tree"))


def _device_chunks(doc_ptr, words, counts, chunks: int) -> list:
    """The chunks on the device, each with the twin's A by slot (a document's non-zeros from its first position)."""
    placed = []
    for chunk in model.chunk_layout(doc_ptr, words, chunks):
        host = stream.host_chunk(chunk, pinned=False)
        for d in range(chunk.documents):
            first, last = counts.a_ptr[chunk.first_document + d:chunk.first_document + d + 2]
            at = host.doc_ptr[d]
            host.a_idx[at:at + last - first] = counts.a_idx[first:last]
            host.a_val[at:at + last - first] = counts.a_val[first:last]
            host.n_keys[d] = last - first
        placed.append(stream.on_device(host))
    return placed


def _gathered_z(chunks) -> np.ndarray:
    return np.concatenate([cupy.asnumpy(chunk.z) for chunk in chunks])


# prefetch: each next token's row of A (where A outgrows L2; forced here, A is small)
@pytest.mark.parametrize("by_word, prefetch", [(False, None), (True, False), (True, True)])
@pytest.mark.parametrize("kind", ["tree", "alias"])
@pytest.mark.parametrize("topics", [1, 5, 32, 33, 1000, 4097, 32768])
def test_e_step_draws_the_twins_topics_by_token_and_by_word(kind, topics, by_word, prefetch):
    doc_ptr, words, doc_of, counts = _state(topics)
    bhat = model.b_hat(counts)
    structures = model.preprocess(bhat, kind)
    chunks = _device_chunks(doc_ptr, words, counts, 3)
    if by_word:  # segments long enough to copy B^_v to shared memory, and shorter ones
        sizes = np.concatenate([c.segment_sizes for c in chunks])
        warps = gpu.staged_threads(f"saber_sample_{kind}_by_word", topics) // 32
        assert (sizes >= warps).any() and (sizes < warps).any()
    device_bhat, _, device_structures = _preprocess(cupy.asarray(counts.b), kind)
    for iteration in (0, 7):
        expected = model.e_step(np.arange(words.size), doc_of, words, counts, bhat, structures, SEED, iteration)
        b = cupy.zeros(counts.b.shape, cupy.int32) if by_word else None  # by word the draw counts the next B
        for chunk in chunks:
            gpu.e_step(chunk, device_bhat, device_structures, SEED, iteration, by_word, b=b, prefetch=prefetch)
        np.testing.assert_array_equal(_gathered_z(chunks), expected)
        if by_word:
            np.testing.assert_array_equal(cupy.asnumpy(b), model.count(doc_ptr, words, expected, *counts.b.shape).b)


@pytest.mark.parametrize("by_word", [False, True])
@pytest.mark.parametrize("threads", [32, 96, 1024])
@pytest.mark.parametrize("topics", [33, 4097])
@pytest.mark.parametrize("kind", ["tree", "alias"])
def test_e_step_draws_the_twins_topics_with_any_block_size(kind, topics, threads, by_word):
    # 32 threads: a warp's share of a segment takes several batches of 32 tokens' inputs
    doc_ptr, words, doc_of, counts = _state(topics)
    bhat = model.b_hat(counts)
    chunks = _device_chunks(doc_ptr, words, counts, 2)
    device_bhat, _, device_structures = _preprocess(cupy.asarray(counts.b), kind)
    expected = model.e_step(np.arange(words.size), doc_of, words, counts, bhat, model.preprocess(bhat, kind), SEED, 4)
    for chunk in chunks:
        gpu.e_step(chunk, device_bhat, device_structures, SEED, 4, by_word, threads)
    np.testing.assert_array_equal(_gathered_z(chunks), expected)


@pytest.mark.parametrize("topics", [1, 5, 33, 1000, 4097])
def test_the_own_topic_correction_and_its_tree_draw_are_the_twins_bit_for_bit(topics):
    """The probe kernel: for each (word, u2, own topic), the corrected B^ and mass bit for
    bit, and the tree's draw, the twin's; u2 = 1 among them, where rounding carries x past
    the word's total unless clamped (a test of the topics alone could miss either)."""
    from bench.backend import raw_kernel

    rng = np.random.default_rng(topics)
    vocabulary, draws = 50, 3000
    b = rng.integers(0, 4, (vocabulary, topics)).astype(np.int32)
    v = rng.integers(0, vocabulary, draws).astype(np.int32)
    own = rng.integers(0, topics, draws).astype(np.int32)
    np.add.at(b, (v, own), 1)  # each drawing token counted in its own topic
    counts = model.Counts(None, None, None, b, b.sum(axis=0, dtype=np.int64))
    bhat = model.b_hat(counts)
    trees = model.preprocess(bhat, "tree")
    denominator = counts.topic_totals.astype(np.float32) + np.float32(vocabulary) * model.BETA
    u2 = rng.random(draws).astype(np.float32)
    u2[::5] = 1.0
    expected = np.empty((draws, 3))
    for i in range(draws):
        own_bhat, mass = map(np.float32, model.own_topic_correction(bhat[v[i], own[i]], denominator[own[i]],
                                                                    trees.totals[v[i]]))  # numba returns floats
        expected[i] = own_bhat, mass, model.tree_draw_without_own(v[i], u2[i], mass, trees.level4, trees.level3,
                                                                  trees.level2, own[i], bhat[v[i], own[i]] - own_bhat)
    device_bhat, device_denominator, device_trees = _preprocess(cupy.asarray(b), "tree")
    got = [cupy.empty(draws, cupy.float32), cupy.empty(draws, cupy.float32), cupy.empty(draws, cupy.int32)]
    raw_kernel(gpu.KERNEL_SOURCE, "saber_own_topic_draws")((-(-draws * 32 // gpu.BLOCK),), (gpu.BLOCK,), (
        device_bhat, np.int32(topics), device_denominator, device_trees.totals, device_trees.level4,
        device_trees.level3, device_trees.level2, np.int32(device_trees.level4.shape[1]), np.int32(draws),
        cupy.asarray(v), cupy.asarray(u2), cupy.asarray(own), *got))
    np.testing.assert_array_equal(cupy.asnumpy(got[0]), expected[:, 0].astype(np.float32))
    np.testing.assert_array_equal(cupy.asnumpy(got[1]), expected[:, 1].astype(np.float32))
    np.testing.assert_array_equal(cupy.asnumpy(got[2]), expected[:, 2].astype(np.int32))
    assert (cupy.asnumpy(got[2]) < topics).all()


# 32: several batches of 32 tokens a warp; 1024: the _wide kernels (48 KiB of shared memory for the
# short segments' batches)
@pytest.mark.parametrize("threads", [0, 32, 1024])
@pytest.mark.parametrize("by_word, prefetch", [(False, None), (True, False), (True, True)])
@pytest.mark.parametrize("topics", [1, 5, 33, 1000, 4097, 32768])
def test_e_step_leaves_the_own_topic_out_as_the_twin_does(topics, by_word, prefetch, threads):
    """Collapsed Gibbs's conditional (model.e_step with own_topics): the twin's topics, in
    the sparse branch and through the tree's shortened interval; the alias table refuses."""
    from bench.errors import BenchError

    doc_ptr, words, doc_of, counts = _state(topics)
    z = model.initial_topics(words.size, topics, SEED)  # the topics `counts` counts
    bhat = model.b_hat(counts)
    structures = model.preprocess(bhat, "tree")
    chunks = _device_chunks(doc_ptr, words, counts, 3)
    device_bhat, denominator, device_structures = _preprocess(cupy.asarray(counts.b), "tree")
    expected = model.e_step(np.arange(words.size), doc_of, words, counts, bhat, structures, SEED, 7, own_topics=z)
    b = cupy.zeros(counts.b.shape, cupy.int32) if by_word else None
    for chunk in chunks:
        chunk.z[...] = cupy.asarray(z[chunk.first_token:chunk.first_token + chunk.tokens])
        gpu.e_step(chunk, device_bhat, device_structures, SEED, 7, by_word, threads, denominator=denominator, b=b,
                   prefetch=prefetch)
    np.testing.assert_array_equal(_gathered_z(chunks), expected)
    if by_word:  # the draw counted the next B
        np.testing.assert_array_equal(cupy.asnumpy(b), model.count(doc_ptr, words, expected, *counts.b.shape).b)
    if topics > 1:  # the correction changes draws
        assert not np.array_equal(expected, model.e_step(np.arange(words.size), doc_of, words, counts, bhat,
                                                         structures, SEED, 7))
    with pytest.raises(BenchError, match="alias"):
        gpu.e_step(chunks[0], device_bhat, _preprocess(cupy.asarray(counts.b), "alias")[2], SEED, 7, by_word,
                   denominator=denominator)


@pytest.mark.parametrize("topics", [1, 33, 1024, 1025, 4097])
def test_own_positions_are_each_tokens_topic_in_its_documents_counts(topics):
    """The left-out draw's positions (saber_own_positions, written where e_step is given room
    for them): each token's own topic's non-zero in its document's A, -1 where A_d lacks it."""
    doc_ptr, words, doc_of, counts = _state(topics)
    z = model.initial_topics(words.size, topics, SEED)
    z[::7] = (z[::7] + 1) % topics  # some tokens' topics no longer counted in their document
    bhat, denominator, structures = _preprocess(cupy.asarray(counts.b), "tree")
    for chunk in _device_chunks(doc_ptr, words, counts, 2):
        own_z = z[chunk.first_token:chunk.first_token + chunk.tokens]
        chunk.z[...] = cupy.asarray(own_z)
        own_at = cupy.full(chunk.tokens + 5, -7, cupy.int32)
        gpu.e_step(chunk, bhat, structures, SEED, 7, True, denominator=denominator, own_at=own_at)
        expected = _own_positions(chunk, own_z)
        got = cupy.asnumpy(own_at)
        np.testing.assert_array_equal(got[:chunk.tokens], expected)
        assert (got[chunk.tokens:] == -7).all() and (expected == -1).any() == (topics > 1)


def _own_positions(chunk, z) -> np.ndarray:
    """Each token's topic's non-zero in its document's A (the chunk's, on the device), -1 where absent."""
    a_idx, starts, n_keys = (cupy.asnumpy(a) for a in (chunk.a_idx, chunk.doc_ptr, chunk.n_keys))
    expected = np.full(chunk.tokens, -1)
    for p, (d, k) in enumerate(zip(cupy.asnumpy(chunk.doc_of), z)):
        found = np.flatnonzero(a_idx[starts[d]:starts[d] + n_keys[d]] == k)
        expected[p] = starts[d] + found[0] if found.size else -1
    return expected


@pytest.mark.parametrize("ssc, rank_shared", [(False, None), (True, None), (True, 3)])  # 3: most counts global
@pytest.mark.parametrize("topics", [1, 31, 32, 33, 1000, 1025, 4097, model.MAX_TOPICS])  # bitmaps of 1 to 1024 words
def test_rebuild_is_the_twins_for_short_long_and_empty_documents(topics, ssc, rank_shared, monkeypatch):
    if rank_shared:  # SSC counts a document with more non-zeros than this in global memory
        monkeypatch.setattr(gpu, "RANK_SHARED", rank_shared)
    rng = np.random.default_rng(topics)
    lengths = np.concatenate([rng.integers(1, 60, 50), [0, 31, 32, 33, 3000, 0], [1, 2, 700], [9000]])
    doc_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    words = rng.integers(0, 40, doc_ptr[-1]).astype(np.int32)
    z = np.minimum(rng.zipf(1.5, doc_ptr[-1]) - 1, topics - 1).astype(np.int32)
    expected = model.count(doc_ptr, words, z, 40, topics)
    b, topic_counts = cupy.zeros((40, topics), cupy.int32), cupy.zeros(topics, cupy.int64)
    non_zeros = cupy.zeros(1, cupy.uint64)
    a_idx, a_val, a_ptr = [], [], [0]
    writes_positions = ssc  # SSC's count writes each token's non-zero, given room
    for chunk in _device_chunks(doc_ptr, words, expected, 2):
        chunk.z[...] = cupy.asarray(z[chunk.first_token:chunk.first_token + chunk.tokens])
        chunk.a_idx[...] = -1  # the twin's A, overwritten
        own_at = cupy.full(chunk.tokens + 5, -7, cupy.int32) if writes_positions else None
        gpu.rebuild(chunk, topics, ssc, b, topic_counts, non_zeros, own_at)
        if writes_positions:  # each token's topic's non-zero in the new A, none left out
            got = cupy.asnumpy(own_at)
            np.testing.assert_array_equal(got[:chunk.tokens], _own_positions(chunk, cupy.asnumpy(chunk.z)))
            assert (got[:chunk.tokens] >= 0).all() and (got[chunk.tokens:] == -7).all()
        doc_ptr_c, n_keys = cupy.asnumpy(chunk.doc_ptr), cupy.asnumpy(chunk.n_keys)
        for d in range(chunk.documents):
            a_idx.append(cupy.asnumpy(chunk.a_idx[doc_ptr_c[d]:doc_ptr_c[d] + n_keys[d]]))
            a_val.append(cupy.asnumpy(chunk.a_val[doc_ptr_c[d]:doc_ptr_c[d] + n_keys[d]]))
            a_ptr.append(a_ptr[-1] + n_keys[d])
    np.testing.assert_array_equal(np.array(a_ptr), expected.a_ptr)
    np.testing.assert_array_equal(np.concatenate(a_idx), expected.a_idx)
    np.testing.assert_array_equal(np.concatenate(a_val), expected.a_val)
    np.testing.assert_array_equal(cupy.asnumpy(b), expected.b)
    np.testing.assert_array_equal(cupy.asnumpy(topic_counts), expected.topic_totals)
    assert int(non_zeros[0]) == expected.a_idx.size


@pytest.mark.parametrize("own", ["counted", "left-out"])
@pytest.mark.parametrize("memory, chunks, graphs", [("resident", 2, 1), ("resident", 2, 0), ("resident", 1, 1),
                                                    ("streamed", 2, 1)])
def test_every_stage_on_the_gpu_is_its_twin_resident_or_streamed(memory, chunks, graphs, own):
    from bench.timing import RunContext
    from impls.saber.suite import SUITE, iterate

    point = {"suite": "saber", "backend": "gpu", "dataset": "tiny", "scale": 1.0, "K": 70, "iterations": 3,
             "chunks": chunks, "workers": 3, "memory": 0.0, "graphs": graphs}
    if memory == "streamed":  # room for the model and a sixth of the corpus per worker
        work = SUITE.prepare({**point, "backend": "cpu"})
        point["memory"] = (stream.model_bytes(work.vocabulary, 70)
                           + stream.chunk_bytes(work.tokens, work.doc_ptr.size - 1) / 2) / stream.GIB
    work = SUITE.prepare(point)
    assert (work.corpus.device is None) == (memory == "streamed")
    assert len(work.layout) >= (4 if memory == "streamed" else chunks)
    for stage in ("G0", "G1", "G2", "G3", "G4") if own == "counted" else ("G2", "G3", "G4"):
        topics, kd_means = {}, {}
        for device in ("cpu", "gpu"):
            ctx = RunContext(device)
            with ctx.timed():
                topics[device], metrics = iterate(work, stage, ctx, device, without_own=own == "left-out")
            assert [row["iteration"] for row in ctx.series] == [1, 2, 3]
            kd_means[device] = [row["kd_mean"] for row in ctx.series]  # every iteration's count of A's non-zeros
            # G4's workers overlap chunks, and one chunk runs as G3's, which a graph replays where resident
            overlapped = stage == "G4" and len(work.layout) > 1
            graphed = device == "gpu" and stage in ("G3", "G4") and not overlapped and graphs and memory == "resident"
            if device == "gpu":
                assert metrics["graphed"] == graphed, stage
            phases = {"capture", "graph"} if graphed else {"preprocess", "overlapped"} if device == "gpu" and \
                overlapped else {"preprocess", "sample", "rebuild"} | ({"transfer"} if device == "gpu" else set())
            assert set(ctx.phases) == phases, stage
        np.testing.assert_array_equal(topics["gpu"], topics["cpu"], err_msg=stage)
        assert kd_means["gpu"] == kd_means["cpu"], stage


def test_streamed_topics_are_the_resident_ones():
    """Nothing is lost on the streaming path: G4 within a budget that holds half of the
    chunks (more chunks than its workers' slots, copied in and out every iteration) draws
    the resident run's topic for every token."""
    from bench.timing import RunContext
    from impls.saber.suite import SUITE, iterate

    point = {"suite": "saber", "backend": "gpu", "dataset": "nytimes-synth", "scale": 0.001, "K": 1000,
             "iterations": 3, "chunks": 4, "workers": 4, "gpus": 1}
    host = SUITE.prepare({**point, "backend": "cpu", "memory": 0.0})
    budget = (stream.model_bytes(host.vocabulary, 1000)
              + stream.chunk_bytes(host.tokens, host.doc_ptr.size - 1) / 2) / stream.GIB
    topics = {}
    for memory in (0.0, budget):
        work = SUITE.prepare({**point, "memory": memory})
        assert (work.corpus.device is None) == (memory > 0)
        assert len(work.layout) > (point["workers"] if memory else 0)
        ctx = RunContext("gpu")
        with ctx.timed():
            topics[memory], _ = iterate(work, "G4", ctx, "gpu")
    np.testing.assert_array_equal(topics[budget], topics[0.0])


@pytest.mark.real_corpus("kos")
@pytest.mark.parametrize("system, twin", [("G4", "esca-cpu"), ("delayed-gibbs", "delayed-gibbs-cpu")])
def test_saber_fit_on_the_gpu_scores_what_its_twin_on_the_cpu_scores(system, twin):
    """G4 draws the topics of G3's twin (ESCA on the CPU), delayed-gibbs those of the twin
    left out, so the counts handed to the evaluator, and the held-out log-likelihoods, are
    the same at every evaluation."""
    from bench.timing import RunContext
    from impls.saber.fit_suite import SUITE

    work = SUITE.prepare({"suite": "saber-fit", "backend": "gpu", "dataset": "kos", "scale": 1.0, "K": 33,
                          "iterations": 4, "eval_every": 2, "chunks": 3, "workers": 2, "memory": 0.0, "gpus": 1})
    assert work.gpu_evaluator
    curves = {}
    for variant in (system, twin):
        ctx = RunContext("cpu" if variant == twin else "gpu")
        with ctx.timed():
            SUITE.run(work, variant, ctx)
        curves[variant] = [(row["iteration"], row["loglik"]) for row in ctx.series if "loglik" in row]
    assert [iteration for iteration, _ in curves[system]] == [0, 2, 4] == [iteration for iteration, _ in curves[twin]]
    # Both evaluated on the GPU (a GPU run's), by the same code on the same counts.
    assert [value for _, value in curves[system]] == [value for _, value in curves[twin]]


@pytest.mark.parametrize("topics", [1, 333])
def test_the_held_out_evaluator_on_the_gpu_scores_what_it_scores_on_every_core(topics, monkeypatch):
    """heldout.fold_in with CuPy: the numba loop's value (its sums in another order), phi formed
    on the GPU from B there or on the host alike, the pairs gathered in many blocks."""
    from bench.corpus import cached_corpus
    from impls.saber import heldout

    monkeypatch.setattr(heldout, "PAIR_BLOCK_BYTES", 1 << 20)
    corpus = cached_corpus("nytimes-synth", 0.01)
    evaluation, rows = heldout.compact(heldout.split(corpus))
    b = np.random.default_rng(topics).integers(0, 20, size=(corpus.vocab_size, topics)).astype(np.int32)
    phi = heldout.phi_of(b, 0.01, rows)
    for on_gpu in (heldout.phi_of(cupy.asarray(b), 0.01, rows, gpu=True), heldout.phi_of(b, 0.01, rows, gpu=True)):
        np.testing.assert_allclose(cupy.asnumpy(on_gpu), phi, rtol=1e-15)
        assert heldout.log_likelihood(evaluation, on_gpu, 0.3, 8) == pytest.approx(
            heldout.log_likelihood(evaluation, phi, 0.3, 8), rel=1e-12)
    # evaluate: the same value from a pool of its own, emptied after; the run's pool untouched.
    pool, device_b = cupy.get_default_memory_pool(), cupy.asarray(b)
    held_by_the_run = pool.total_bytes()
    assert heldout.evaluate(evaluation, device_b, 0.01, rows, 0.3, gpu=True) == pytest.approx(
        heldout.evaluate(evaluation, b, 0.01, rows, 0.3, gpu=False), rel=1e-12)
    assert pool.total_bytes() == held_by_the_run and heldout._gpu_pool.total_bytes() == 0


def test_the_chunk_layout_sorted_on_the_gpu_is_numpys():
    rng = np.random.default_rng(5)
    doc_ptr, words, _ = _corpus(rng, 400, 900)
    for on_gpu, on_cpu in zip(model.chunk_layout(doc_ptr, words, 3, cupy), model.chunk_layout(doc_ptr, words, 3, np)):
        for name in ("by_word", "segment_ptr", "schedule", "doc_of", "words"):
            np.testing.assert_array_equal(getattr(on_gpu, name), getattr(on_cpu, name), err_msg=name)


@pytest.mark.skipif(_gpu_count() < 2, reason="needs 2 GPUs")
@pytest.mark.parametrize("memory", ["resident", "streamed"])
@pytest.mark.parametrize("stage, without_own", [("G0", False), ("G3", False), ("G4", False), ("G4", True)])
def test_two_gpus_draw_the_twins_topics_and_sum_b_every_iteration(stage, without_own, memory):
    """Each GPU samples its share with the summed B: the topics of one GPU's, and of the twin's."""
    from bench.timing import RunContext
    from impls.saber.suite import SUITE, iterate

    point = {"suite": "saber", "backend": "gpu", "dataset": "tiny", "scale": 1.0, "K": 70, "iterations": 3,
             "chunks": 2, "workers": 2, "memory": 0.0, "gpus": 2}
    if memory == "streamed":  # each GPU: room for the model and a sixth of the corpus per worker
        work = SUITE.prepare({**point, "backend": "cpu"})
        point["memory"] = (stream.model_bytes(work.vocabulary, 70)
                           + stream.chunk_bytes(work.tokens, work.doc_ptr.size - 1) / 4) / stream.GIB
    work = SUITE.prepare(point)
    assert work.corpus.gpus == 2 and (work.corpus.device is None) == (memory == "streamed")
    if work.corpus.device:
        assert {chunk.z.device.id for chunk in work.corpus.device} == {0, 1}
    seen = []

    def observe(iteration, b):  # the summed B on GPU 0: every token counted
        seen.append(int(b.sum()))
        return {}

    ctx = RunContext("gpu")
    with ctx.timed():
        topics, _ = iterate(work, stage, ctx, "gpu", observe, without_own)
    assert seen == [work.tokens] * 4
    assert {"preprocess", "overlapped", "reduce"} <= set(ctx.phases)
    twin = RunContext("cpu")
    with twin.timed():
        expected, _ = iterate(work, "G0" if stage == "G0" else "G2", twin, "cpu", without_own=without_own)
    np.testing.assert_array_equal(topics, expected)
    # every iteration's non-zeros of A, summed over the GPUs' series
    assert [row["kd_mean"] for row in ctx.series] == [row["kd_mean"] for row in twin.series]


@pytest.mark.real_corpus("kos")
def test_saber_fit_dense_gpu_peer_learns_topics():
    """The dense GPU sampler at alpha = 50/K: its held-out curve rises from the random start."""
    from bench.timing import RunContext
    from impls.saber.fit_suite import SUITE

    work = SUITE.prepare({"suite": "saber-fit", "backend": "gpu", "dataset": "kos", "scale": 1.0, "K": 20,
                          "iterations": 10, "eval_every": 5, "chunks": 1, "workers": 1, "memory": 0.0, "gpus": 1})
    ctx = RunContext("gpu")
    with ctx.timed():
        SUITE.run(work, "dense-gpu", ctx)
    curve = [(row["iteration"], row["loglik"]) for row in ctx.series]
    assert [iteration for iteration, _ in curve] == [0, 5, 10]
    assert curve[-1][1] > curve[0][1] + 0.05  # as esca-cpu and tomotopy on kos (tests/test_saber_fit.py)


@pytest.mark.parametrize("backend, variants", [("gpu", "G4,G0,delayed-gibbs"), ("cpu", "esca-cpu,delayed-gibbs-cpu")])
def test_no_first_iteration_is_far_slower_than_the_others(tmp_path, backend, variants):
    """Every kernel a timed run launches was built and launched before the clock started, on
    every path: in a fresh process with empty compile caches (numba's, CuPy's), on a corpus
    with documents for every rebuild path, no system's first iteration takes far longer than
    its median one (a compilation takes a second or more)."""
    import os
    import subprocess
    import sys

    import pandas as pd

    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba"), "CUPY_CACHE_DIR": str(tmp_path / "cupy")}
    subprocess.run([sys.executable, "-m", "bench", "sweep", "saber-fit", "--backend", backend, "--variant", variants,
                    "--dataset", "nytimes-synth", "--scale", "0.003", "--k", "100", "--iterations", "8",
                    "--eval_every", "8", "--out", str(tmp_path)], env=env, check=True, capture_output=True)
    series = pd.read_csv(tmp_path / "saber-fit-series.csv")
    assert set(series["variant"]) == set(variants.split(","))
    for variant, rows in series.groupby("variant"):
        took = rows.sort_values("iteration")["wall_s"].diff().dropna().to_numpy()
        assert took.size == 8, variant
        assert took[0] < 5 * np.median(took) + 0.05, \
            f"{variant}: first iteration {took[0]:.3f} s, median {np.median(took):.4f} s"
