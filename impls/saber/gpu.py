"""SaberLDA's structures and E-step on the GPU (kernels/saber.cu): the twin's float32
operations in its order, so that the GPU draws the topics the CPU twin draws.

CuPy is imported inside the functions: importing this module needs no GPU.
"""

from functools import cache
from pathlib import Path

import numpy as np

from impls.cuda import raw_kernel
from impls.saber.model import BETA, Counts, Structures, alpha_of
from impls.saber.structures import LEVEL3, W, padded

KERNEL_SOURCE = Path(__file__).parent / "kernels" / "saber.cu"
BLOCK = 256  # threads: 8 warps, a warp per word or token


def _warp_grid(items: int, grid_stride: bool = False) -> int:
    """Blocks for a warp per item; for a grid-stride loop, no more than the GPU holds at once."""
    blocks = max(1, -(-items * W // BLOCK))
    return min(blocks, _resident_blocks()) if grid_stride else blocks


@cache
def _resident_blocks() -> int:
    import cupy

    return cupy.cuda.Device().attributes["MultiProcessorCount"] * 2048 // BLOCK


def b_hat(counts: Counts):
    """Eq. 2 as the twin rounds it: (B_vk + beta) / (float32(n_k) + float32(V) * beta)."""
    import cupy

    denominator = counts.topic_totals.astype(cupy.float32) + np.float32(counts.b.shape[0]) * BETA
    return (counts.b.astype(cupy.float32) + BETA) / denominator


def build_trees(bhat) -> Structures:
    """The W-ary tree of every word, a warp per word."""
    import cupy

    vocabulary, topics = bhat.shape
    width = padded(topics)
    l4 = cupy.empty((vocabulary, width), cupy.float32)
    l3 = cupy.empty((vocabulary, LEVEL3), cupy.float32)
    l2 = cupy.empty((vocabulary, W), cupy.float32)
    totals = cupy.empty(vocabulary, cupy.float32)
    raw_kernel(KERNEL_SOURCE, "saber_build_trees")((_warp_grid(vocabulary),), (BLOCK,), (
        bhat, np.int32(vocabulary), np.int32(topics), np.int32(width), l4, l3, l2, totals))
    return Structures("tree", totals, l4, l3, l2)


def build_aliases(bhat) -> Structures:
    """Every word's alias table, a thread per word (sequential, as the paper's G0), after its
    total by the chunked scan, a warp per word."""
    import cupy

    vocabulary, topics = bhat.shape
    totals = cupy.empty(vocabulary, cupy.float32)
    raw_kernel(KERNEL_SOURCE, "saber_word_totals")((_warp_grid(vocabulary),), (BLOCK,), (
        bhat, np.int32(vocabulary), np.int32(topics), np.int32(padded(topics)), totals))
    probability = cupy.empty((vocabulary, topics), cupy.float32)
    alias = cupy.empty((vocabulary, topics), cupy.int32)
    stacks = cupy.empty((vocabulary, topics), cupy.int32)
    raw_kernel(KERNEL_SOURCE, "saber_build_aliases")((-(-vocabulary // BLOCK),), (BLOCK,), (
        bhat, totals, np.int32(vocabulary), np.int32(topics), probability, alias, stacks))
    return Structures("alias", totals, probability, alias, cupy.empty((vocabulary, 0), cupy.float32))


def preprocess(bhat, kind: str) -> Structures:
    return build_trees(bhat) if kind == "tree" else build_aliases(bhat)


def e_step(order, doc_of, words, counts: Counts, bhat, structures: Structures, seed: int, iteration: int):
    """New topics of every token (device arrays in, int32 z out), a warp per token taken in
    `order`; counts' A and the structures on the device."""
    import cupy

    tokens = int(words.size)
    topics = int(bhat.shape[1])
    z = cupy.empty(tokens, cupy.int32)
    common = (order, np.int64(tokens), doc_of, words, counts.a_ptr, counts.a_idx, counts.a_val, bhat,
              np.int32(topics), alpha_of(topics), structures.totals)
    if structures.kind == "tree":
        name, extra = "saber_sample_tree", (structures.level4, structures.level3, structures.level2,
                                            np.int32(structures.level4.shape[1]))
    else:
        name, extra = "saber_sample_alias", (structures.level4, structures.level3)
    raw_kernel(KERNEL_SOURCE, name)((_warp_grid(tokens, grid_stride=True),), (BLOCK,), (
        *common, *extra, np.uint32(seed), np.uint32(iteration), z))
    return z


def to_device(counts: Counts) -> Counts:
    import cupy

    return Counts(*(cupy.asarray(a) for a in (counts.a_ptr, counts.a_idx, counts.a_val, counts.b,
                                              counts.topic_totals)))


def count_by_sorting(doc_of, words, z, documents: int, vocabulary: int, topics: int) -> Counts:
    """A and B from z as G0-G2 rebuild them: every token sorted by (document, topic) at
    once, the runs of equal keys (cupy.unique), B by one bincount. Equal to the twin's."""
    import cupy

    keys, runs = cupy.unique(doc_of.astype(cupy.int64) * topics + z, return_counts=True)
    a_ptr = cupy.searchsorted(keys // topics, cupy.arange(documents + 1), side="left").astype(cupy.int64)
    return Counts(a_ptr, (keys % topics).astype(cupy.int32), runs.astype(cupy.int32),
                  *_word_counts(words, z, vocabulary, topics))


SSC_CAP = 512  # tokens of a document sorted in shared memory (a power of two); longer ones by cupy first
assert SSC_CAP & (SSC_CAP - 1) == 0, "the bitonic sort pads a document to a power of two no larger than SSC_CAP"


def count(doc_ptr, doc_of, words, z, vocabulary: int, topics: int) -> Counts:
    """A by a segmented count per document (SSC, Fig. 8: a warp per document, sorted in
    shared memory), B by one bincount. Equal to the twin's `count`."""
    import cupy

    documents = int(doc_ptr.size - 1)
    tokens = int(z.size)
    lengths = cupy.diff(doc_ptr)
    sorted_z = z
    long_tokens = cupy.flatnonzero((lengths > SSC_CAP)[doc_of])
    if long_tokens.size:  # the few long documents: their segments sorted by (document, topic) at once
        sorted_z = z.copy()
        segment = z[long_tokens]
        sorted_z[long_tokens] = segment[cupy.lexsort(cupy.stack([segment, doc_of[long_tokens]]))]
    keys = cupy.empty(tokens, cupy.int32)
    runs = cupy.empty(tokens, cupy.int32)
    scratch = cupy.empty(tokens, cupy.int32)
    n_keys = cupy.empty(documents, cupy.int32)
    raw_kernel(KERNEL_SOURCE, "saber_segmented_count")((_warp_grid(documents, grid_stride=True),), (BLOCK,), (
        doc_ptr, np.int32(documents), z, sorted_z, np.int32(SSC_CAP), scratch, keys, runs, n_keys),
        shared_mem=2 * SSC_CAP * 4 * (BLOCK // W))
    a_ptr = cupy.concatenate([cupy.zeros(1, cupy.int64), cupy.cumsum(n_keys, dtype=cupy.int64)])
    kept = (cupy.arange(tokens) - doc_ptr[doc_of]) < n_keys[doc_of]  # the first n_keys slots of each document
    return Counts(a_ptr, keys[kept], runs[kept], *_word_counts(words, z, vocabulary, topics))


def _word_counts(words, z, vocabulary: int, topics: int):
    """B [V, K] by one bincount, and its topic totals."""
    import cupy

    b = cupy.bincount(words.astype(cupy.int64) * topics + z, minlength=vocabulary * topics).astype(cupy.int32)
    b = b.reshape(vocabulary, topics)
    return b, b.sum(axis=0, dtype=cupy.int64)
