"""SaberLDA's GPU kernels against the CPU twin (needs CuPy and a GPU): B^, every word's
tree and alias table, and the E-step's topics identical, bit for bit and topic for topic,
for K from 1 to 32,768 (through the padding at multiples of 32 and the tree's levels),
with both structures and the GPU taking tokens in PDOW order while the twin takes document
order; the GPU stages' iterations equal to the twins'."""

import numpy as np
import pytest

from impls.saber import gpu, model

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")
SEED = 3


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


@pytest.mark.parametrize("kind", ["tree", "alias"])
@pytest.mark.parametrize("topics", [1, 2, 31, 32, 33, 100, 1000, 1025])
def test_b_hat_and_structures_are_the_twins_bit_for_bit(kind, topics):
    _, _, _, counts = _state(topics)
    bhat = model.b_hat(counts)
    device_bhat = gpu.b_hat(gpu.to_device(counts))
    np.testing.assert_array_equal(cupy.asnumpy(device_bhat), bhat)
    cpu, dev = model.preprocess(bhat, kind), gpu.preprocess(device_bhat, kind)
    for level in ("totals", "level4", "level3", "level2"):
        np.testing.assert_array_equal(cupy.asnumpy(getattr(dev, level)), getattr(cpu, level), err_msg=level)


def test_the_largest_tree_is_the_twins():
    rng = np.random.default_rng(1)
    bhat = rng.random((3, model.MAX_TOPICS), dtype=np.float32)
    cpu, dev = model.preprocess(bhat, "tree"), gpu.build_trees(cupy.asarray(bhat))
    for level in ("totals", "level4", "level3", "level2"):
        np.testing.assert_array_equal(cupy.asnumpy(getattr(dev, level)), getattr(cpu, level), err_msg=level)


@pytest.mark.parametrize("kind", ["tree", "alias"])
@pytest.mark.parametrize("topics", [1, 5, 32, 33, 1000, 4097])
def test_e_step_draws_the_twins_topics_in_any_order(kind, topics):
    doc_ptr, words, doc_of, counts = _state(topics)
    bhat = model.b_hat(counts)
    structures = model.preprocess(bhat, kind)
    pdow = model.pdow_order(doc_ptr, words, 4)
    for iteration in (0, 7):
        expected = model.e_step(np.arange(words.size), doc_of, words, counts, bhat, structures, SEED, iteration)
        got = gpu.e_step(cupy.asarray(pdow), cupy.asarray(doc_of), cupy.asarray(words), gpu.to_device(counts),
                         cupy.asarray(bhat), gpu.preprocess(cupy.asarray(bhat), kind), SEED, iteration)
        np.testing.assert_array_equal(cupy.asnumpy(got), expected)


@pytest.mark.parametrize("topics", [1, 33, 1000])
def test_segmented_count_is_the_twins_for_short_long_and_empty_documents(topics):
    rng = np.random.default_rng(topics)
    lengths = np.concatenate([rng.integers(1, 60, 50), [0, gpu.SSC_CAP, gpu.SSC_CAP + 1, 3000, 0], [1, 2, 700]])
    doc_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    words = rng.integers(0, 40, doc_ptr[-1]).astype(np.int32)
    doc_of = np.repeat(np.arange(lengths.size, dtype=np.int32), lengths)
    z = np.minimum(rng.zipf(1.5, doc_ptr[-1]) - 1, topics - 1).astype(np.int32)
    expected = model.count(doc_ptr, words, z, 40, topics)
    got = gpu.count(cupy.asarray(doc_ptr), cupy.asarray(doc_of), cupy.asarray(words), cupy.asarray(z), 40, topics)
    for field in ("a_ptr", "a_idx", "a_val", "b", "topic_totals"):
        np.testing.assert_array_equal(cupy.asnumpy(getattr(got, field)), getattr(expected, field), err_msg=field)


def test_gpu_counts_and_iterations_are_the_twins():
    from bench.timing import RunContext
    from impls.saber.suite import SUITE, iterate

    doc_ptr, words, doc_of, counts = _state(70)
    z = model.initial_topics(words.size, 70, SEED)
    device = gpu.count_by_sorting(cupy.asarray(doc_of), cupy.asarray(words), cupy.asarray(z), doc_ptr.size - 1, 300,
                                  70)
    for field in ("a_ptr", "a_idx", "a_val", "b", "topic_totals"):
        np.testing.assert_array_equal(cupy.asnumpy(getattr(device, field)), getattr(counts, field), err_msg=field)
    point = {"suite": "saber", "backend": "gpu", "dataset": "tiny", "scale": 1.0, "K": 70, "iterations": 3,
             "chunks": 3}
    work = SUITE.prepare(point)
    for stage in ("G0", "G1", "G2", "G3"):
        topics = {}
        for device in ("cpu", "gpu"):
            ctx = RunContext(device)
            with ctx.timed():
                topics[device], _ = iterate(work, stage, ctx, device)
            assert [row["iteration"] for row in ctx.series] == [1, 2, 3] and set(ctx.phases) == set(SUITE.phases)
        np.testing.assert_array_equal(topics["gpu"], topics["cpu"], err_msg=stage)
