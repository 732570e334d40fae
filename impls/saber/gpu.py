"""SaberLDA's structures and E-step on the GPU (kernels/saber.cu): the twin's float32
operations in its order, so that the GPU draws the topics the CPU twin draws.

CuPy is imported inside the functions: importing this module needs no GPU.
"""

from dataclasses import dataclass
from importlib.resources import files

import numpy as np

from bench.backend import device_attribute, multiprocessors, raw_kernel
from impls.saber.model import BETA, Structures, alpha_of, check_without_own
from impls.saber.structures import LEVEL3, W, padded

KERNEL_SOURCE = files("impls.saber") / "kernels" / "saber.cu"  # package data (pyproject.toml)
BLOCK = 256  # threads: 8 warps, a warp per word or token
NULL = np.uintp(0)  # a null pointer argument: CuPy passes None as 0xffffffff (cupy issue 9046)


def _warp_grid(items: int, grid_stride: bool = False, block: int = BLOCK) -> int:
    """Blocks of `block` threads for a warp per item; for a grid-stride loop, no more than
    the GPU holds at once."""
    blocks = max(1, -(-items * W // block))
    return min(blocks, _resident_blocks(block)) if grid_stride else blocks


def _resident_blocks(block: int = BLOCK) -> int:
    return multiprocessors() * (2048 // block)


TOTALS_ROWS = 512  # words a block of saber_topic_totals sums


def topic_totals(b):
    """n_k: B's column sums, int64 (cupy's sum over the first axis read B at 4-40% of the copy bandwidth)."""
    import cupy

    vocabulary, topics = b.shape
    totals = cupy.zeros(topics, cupy.int64)
    grid = (-(-topics // W), -(-vocabulary // TOTALS_ROWS))
    raw_kernel(KERNEL_SOURCE, "saber_topic_totals")(grid, (BLOCK,), (b, np.int32(vocabulary), np.int32(topics),
                                                                     np.int32(TOTALS_ROWS), totals))
    return totals


def preprocess(b, kind: str) -> tuple[object, object, Structures]:
    """B^ (Eq. 2 as the twin rounds it: (B_vk + beta) / (float32(n_k) + float32(V) * beta)),
    its denominators and every word's structure, a warp per word reading B once and zeroing
    it, so that B counts the next iteration's topics."""
    import cupy

    vocabulary, topics = b.shape
    width = padded(topics)
    denominator = topic_totals(b).astype(cupy.float32) + np.float32(vocabulary) * BETA
    bhat = cupy.empty((vocabulary, topics), cupy.float32)
    totals = cupy.empty(vocabulary, cupy.float32)
    common = (b, denominator, BETA, np.int32(vocabulary), np.int32(topics), np.int32(width), bhat)
    grid = (_warp_grid(vocabulary),), (BLOCK,)
    if kind == "tree":
        l4 = cupy.empty((vocabulary, width), cupy.float32)
        l3 = cupy.empty((vocabulary, LEVEL3), cupy.float32)
        l2 = cupy.empty((vocabulary, W), cupy.float32)
        raw_kernel(KERNEL_SOURCE, "saber_preprocess_tree")(*grid, (*common, l4, l3, l2, totals))
        return bhat, denominator, Structures("tree", totals, l4, l3, l2)
    # The alias tables: a thread per word, sequential, as the paper's G0 builds them.
    raw_kernel(KERNEL_SOURCE, "saber_preprocess_totals")(*grid, (*common, totals))
    probability = cupy.empty((vocabulary, topics), cupy.float32)
    alias = cupy.empty((vocabulary, topics), cupy.int32)
    stacks = cupy.empty((vocabulary, topics), cupy.int32)
    raw_kernel(KERNEL_SOURCE, "saber_build_aliases")((-(-vocabulary // BLOCK),), (BLOCK,), (
        bhat, totals, np.int32(vocabulary), np.int32(topics), probability, alias, stacks))
    return bhat, denominator, Structures("alias", totals, probability, alias,
                                         cupy.empty((vocabulary, 0), cupy.float32))


@dataclass
class ChunkArrays:
    """One chunk's arrays, in pinned host memory or on the device, positions local: its
    layout (model.Chunk), the positions of its documents longer than SSC_CAP, its counts A
    (by slot: document d's non-zeros at doc_ptr[d] + [0, n_keys[d]), so a chunk's A has a
    fixed size and needs no compaction) and its topics z."""

    first_token: int
    segment_sizes: np.ndarray  # on the host: the segments' tokens in schedule order (descending)
    doc_ptr: object
    doc_of: object
    words: object
    by_word: object
    segment_ptr: object
    schedule: object
    long_positions: object
    a_idx: object
    a_val: object
    n_keys: object
    z: object

    LAYOUT = ("doc_ptr", "doc_of", "words", "by_word", "segment_ptr", "schedule", "long_positions")
    STATE = ("a_idx", "a_val", "n_keys", "z")
    ARRAYS = LAYOUT + STATE

    @property
    def tokens(self) -> int:
        return int(self.z.size)

    @property
    def documents(self) -> int:
        return int(self.n_keys.size)


def long_positions(doc_ptr: np.ndarray) -> np.ndarray:
    """The positions of the tokens of documents longer than SSC_CAP (sorted by cupy, not in
    shared memory)."""
    lengths = np.diff(doc_ptr)
    return np.flatnonzero(np.repeat(lengths > SSC_CAP, lengths)).astype(np.int32)


def e_step(chunk: ChunkArrays, bhat, structures: Structures, seed: int, iteration: int, by_word: bool,
           threads: int = 0, denominator=None) -> None:
    """New topics of the chunk's tokens into chunk.z, from its A, B^ and the structures: a
    warp per token in document order (G0), or a block per word segment (G1 on); blocks of
    `threads` (a multiple of W), or (0) the sizes chosen below. With B^'s `denominator`,
    each token's own topic (chunk.z on entry) is left out of its draw (model.e_step)."""
    import cupy

    if denominator is not None:
        check_without_own(structures.kind)
    topics = int(bhat.shape[1])
    tokens = chunk.tokens
    common = (np.int64(chunk.first_token), chunk.doc_of, chunk.words, chunk.doc_ptr, chunk.n_keys, chunk.a_idx,
              chunk.a_val, bhat, np.int32(topics), alpha_of(topics), structures.totals,
              NULL if denominator is None else denominator)
    if structures.kind == "tree":
        name, extra = "saber_sample_tree", (structures.level4, structures.level3, structures.level2,
                                            np.int32(structures.level4.shape[1]))
    else:
        name, extra = "saber_sample_alias", (structures.level4, structures.level3)
    if not by_word:
        block = threads or BLOCK
        raw_kernel(KERNEL_SOURCE, name)((_warp_grid(tokens, True, block),), (block,), (
            *common, *extra, np.int32(tokens), np.uint32(seed), np.uint32(iteration), chunk.z))
        return
    # The segments long enough to give every warp of a staged block a token copy B^_v to
    # shared memory, in blocks large enough for full occupancy where shared memory allows;
    # the rest (a suffix of the schedule: its sizes descend) read it in place.
    staged_block, global_block = (threads, threads) if threads else (_staged_threads(topics), BLOCK)
    staged = int(np.count_nonzero(chunk.segment_sizes >= staged_block // W))
    segments = int(chunk.segment_sizes.size)
    shared = topics * 4
    for suffix, first, last, block, shared_mem, per_sm in (
            ("_by_word", 0, staged, staged_block, shared, _blocks_per_sm(shared, staged_block)),
            ("_by_word_global", staged, segments, global_block, 0, 2048 // global_block)):
        if first == last:
            continue
        kernel = raw_kernel(KERNEL_SOURCE, name + suffix)
        if shared_mem > kernel.max_dynamic_shared_size_bytes:  # past the 48 KiB a launch gets without asking
            kernel.max_dynamic_shared_size_bytes = shared_mem
        blocks = min(last - first, multiprocessors() * per_sm)
        kernel((blocks,), (block,), (*common, *extra, chunk.by_word, chunk.segment_ptr, chunk.schedule,
                                     np.int32(last), cupy.full(1, first, cupy.int32), np.uint32(seed),
                                     np.uint32(iteration), chunk.z), shared_mem=shared_mem)


def _blocks_per_sm(shared: int, threads: int) -> int:
    """Blocks of `threads` an SM holds with `shared` bytes each (threads or shared memory)."""
    per_sm = device_attribute("MaxSharedMemoryPerMultiprocessor")
    return max(1, min(2048 // threads, per_sm // (shared + 1024)))  # 1 KiB the runtime reserves per block


def _staged_threads(topics: int) -> int:
    """Threads of a staged block: 256, or more (up to 1024) where B^_v's shared memory
    leaves room for fewer than 8 blocks an SM, so that 64 warps (or 32) stay resident."""
    blocks = _blocks_per_sm(topics * 4, BLOCK)
    return min(1024, 1 << (-(-2048 // blocks) - 1).bit_length())


def rebuild(chunk: ChunkArrays, topics: int, ssc: bool, b) -> None:
    """The M-step of one chunk: its A from its z (in place: the chunk is sampled), by SSC
    (G3 on) or one sort of its tokens by (document, topic) (G0-G2); its tokens added to B."""
    (_segmented_count if ssc else _count_by_sorting)(chunk, topics)
    tokens = chunk.tokens
    raw_kernel(KERNEL_SOURCE, "saber_word_counts")((max(1, min(-(-tokens // BLOCK), _resident_blocks())),),
                                                   (BLOCK,), (np.int32(tokens), chunk.words, chunk.z,
                                                              np.int32(topics), b))


def _count_by_sorting(chunk: ChunkArrays, topics: int) -> None:
    """A as G0-G2 rebuild it: the chunk's tokens sorted by (document, topic) at once, the
    runs of equal keys (cupy.unique), each written to its document's next slot."""
    import cupy

    keys, runs = cupy.unique(chunk.doc_of.astype(cupy.int64) * topics + chunk.z, return_counts=True)
    documents = (keys // topics).astype(cupy.int32)
    firsts = cupy.searchsorted(documents, cupy.arange(chunk.documents + 1, dtype=cupy.int32))
    slot = chunk.doc_ptr[documents] + (cupy.arange(keys.size, dtype=cupy.int32) - firsts[documents])
    chunk.a_idx[slot] = (keys % topics).astype(cupy.int32)
    chunk.a_val[slot] = runs.astype(cupy.int32)
    chunk.n_keys[...] = cupy.diff(firsts).astype(cupy.int32)


def _segmented_count(chunk: ChunkArrays, topics: int) -> None:
    """A by a segmented count per document (SSC, Fig. 8): a warp per document sorts its
    topics in shared memory; the long documents' segments are sorted by cupy first."""
    import cupy

    sorted_z = chunk.z
    if chunk.long_positions.size:  # one radix sort of (document, topic) keys
        sorted_z = chunk.z.copy()
        keys = chunk.doc_of[chunk.long_positions].astype(cupy.int64) * topics + chunk.z[chunk.long_positions]
        keys.sort()
        sorted_z[chunk.long_positions] = (keys % topics).astype(cupy.int32)
    scratch = cupy.empty(chunk.tokens, cupy.int32)
    raw_kernel(KERNEL_SOURCE, "saber_segmented_count")((_warp_grid(chunk.documents, grid_stride=True),), (BLOCK,), (
        chunk.doc_ptr, np.int32(chunk.documents), chunk.z, sorted_z, np.int32(SSC_CAP), scratch, chunk.a_idx,
        chunk.a_val, chunk.n_keys), shared_mem=2 * SSC_CAP * 4 * (BLOCK // W))


SSC_CAP = 512  # tokens of a document sorted in shared memory (a power of two); longer ones by cupy first
assert SSC_CAP & (SSC_CAP - 1) == 0, "the bitonic sort pads a document to a power of two no larger than SSC_CAP"
