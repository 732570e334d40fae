"""SaberLDA's structures and E-step on the GPU (kernels/saber.cu): the twin's float32
operations in its order, so that the GPU draws the topics the CPU twin draws.

CuPy is imported inside the functions: importing this module needs no GPU.
"""

import threading
from dataclasses import dataclass
from importlib.resources import files

import numpy as np

from bench.backend import NULL, allow_shared_memory, device_attribute, multiprocessors, raw_kernel
from bench.errors import BenchError
from impls.saber.model import BETA, Structures, alpha_of, check_without_own
from impls.saber.structures import W, level3_size, padded

KERNEL_SOURCE = files("impls.saber") / "kernels" / "saber.cu"  # package data (pyproject.toml)
BLOCK = 256  # threads: 8 warps, a warp per word or token
HISTOGRAM_BLOCK, HISTOGRAM_ITEMS = 1024, 16  # saber_topic_histogram's threads and tokens a thread a round
RANK_SHARED = 512  # saber_rank_count: a document of at most this many non-zeros of A is counted in shared memory


def _warp_grid(items: int, grid_stride: bool = False, block: int = BLOCK) -> int:
    """Blocks of `block` threads for a warp per item; for a grid-stride loop, no more than
    the GPU holds at once."""
    blocks = max(1, -(-items * W // block))
    return min(blocks, _resident_blocks(block)) if grid_stride else blocks


def _thread_grid(items: int) -> int:
    """Blocks of BLOCK threads for a thread per item in a grid-stride loop: no more than the
    GPU holds at once."""
    return max(1, min(-(-items // BLOCK), _resident_blocks()))


def _resident_blocks(block: int = BLOCK) -> int:
    return multiprocessors() * (2048 // block)


launches = 0  # kernels and memsets issued through _launch and _zero, so that a run counts an iteration's
_launches_lock = threading.Lock()  # several GPUs issue from threads of their own


def _count_launch() -> None:
    global launches
    with _launches_lock:
        launches += 1


def _launch(name: str, grid: tuple, block: tuple, args: tuple, shared_mem: int = 0) -> None:
    _count_launch()
    raw_kernel(KERNEL_SOURCE, name)(grid, block, args, shared_mem=shared_mem)


def _zero(array) -> None:
    """array = 0, by a memset on the current stream."""
    import cupy

    _count_launch()
    cupy.cuda.runtime.memsetAsync(array.data.ptr, 0, array.nbytes, cupy.cuda.get_current_stream().ptr)


def launch_graph(graph) -> None:
    """A captured iteration (stream._captured), replayed on the current stream: one launch."""
    _count_launch()
    graph.launch()


def topic_histogram(z, topics: int, totals, most: int | None = None) -> None:
    """totals (n_k, int64 on the device) += the count of each topic in z (a chunk's topics): a
    launch per range of `most` topics (default: as many as a block's shared memory holds)."""
    kernel = raw_kernel(KERNEL_SOURCE, "saber_topic_histogram")
    most = most or _most_shared(kernel) // 4
    tokens = z.size
    for first in range(0, topics, most):
        count = min(most, topics - first)
        shared = count * 4
        allow_shared_memory(kernel, shared)
        # Each block's flush is `count` atomics: a block a round of its threads' loads (saber.cu's
        # HISTOGRAM_ITEMS) or more, no more blocks than the GPU holds at once.
        blocks = min(-(-tokens // (HISTOGRAM_BLOCK * HISTOGRAM_ITEMS)),
                     multiprocessors() * _blocks_per_sm(shared, HISTOGRAM_BLOCK))
        _launch("saber_topic_histogram", (max(1, blocks),), (HISTOGRAM_BLOCK,),
                (np.int32(tokens), z, np.int32(first), np.int32(count), totals), shared_mem=shared)


@dataclass
class Model:
    """One GPU's B^, its denominators (n_k + V beta) and every word's structure: allocated
    once for a run (allocate), refilled every iteration (preprocess). The alias tables'
    stacks are preprocess's scratch."""

    bhat: object
    denominator: object
    structures: Structures
    stacks: object


def allocate(vocabulary: int, topics: int, kind: str) -> Model:
    import cupy

    totals = cupy.empty(vocabulary, cupy.float32)
    if kind == "tree":
        structures = Structures("tree", totals, cupy.empty((vocabulary, padded(topics)), cupy.float32),
                                cupy.empty((vocabulary, level3_size(topics)), cupy.float32),
                                cupy.empty((vocabulary, W), cupy.float32))
        stacks = None
    else:
        structures = Structures("alias", totals, cupy.empty((vocabulary, topics), cupy.float32),
                                cupy.empty((vocabulary, topics), cupy.int32), cupy.empty((vocabulary, 0), cupy.float32))
        stacks = cupy.empty((vocabulary, topics), cupy.int32)
    return Model(cupy.empty((vocabulary, topics), cupy.float32), cupy.empty(topics, cupy.float32), structures,
                 stacks)


def preprocess(b, topic_counts, kind: str, into: Model | None = None) -> Model:
    """B^ (Eq. 2 as the twin rounds it: (B_vk + beta) / (float32(n_k) + float32(V) * beta)),
    its denominators and every word's structure (into the arrays of `into`, or new ones) from
    the counts B and n_k (int64, topic_histogram's), which it zeroes, so that they count the
    next iteration's topics: a warp per word reading B once."""
    vocabulary, topics = b.shape
    model = into or allocate(vocabulary, topics, kind)
    _launch("saber_denominators", (-(-topics // BLOCK),), (BLOCK,),
            (topic_counts, np.int32(topics), np.float32(vocabulary) * BETA, model.denominator))
    structures = model.structures
    common = (b, model.denominator, BETA, np.int32(vocabulary), np.int32(topics), np.int32(padded(topics)),
              model.bhat)
    grid = (_warp_grid(vocabulary),), (BLOCK,)
    if kind == "tree":
        _launch("saber_preprocess_tree", *grid, (*common, structures.level4, structures.level3, structures.level2,
                                                 structures.totals))
        return model
    # The alias tables: a thread per word, sequential, as the paper's G0 builds them.
    _launch("saber_preprocess_totals", *grid, (*common, structures.totals))
    _launch("saber_build_aliases", (-(-vocabulary // BLOCK),), (BLOCK,), (
        model.bhat, structures.totals, np.int32(vocabulary), np.int32(topics), structures.level4, structures.level3,
        model.stacks))
    return model


@dataclass
class ChunkArrays:
    """One chunk's arrays, in pinned host memory or on the device, positions local: its
    layout (model.Chunk), its counts A (by slot: document d's non-zeros at doc_ptr[d] +
    [0, n_keys[d]), so a chunk's A has a fixed size and needs no compaction) and its topics z."""

    first_token: int
    segment_sizes: np.ndarray  # on the host: the segments' tokens in schedule order (descending)
    doc_ptr: object
    doc_of: object
    words: object
    by_word: object
    segment_ptr: object
    schedule: object
    a_idx: object
    a_val: object
    n_keys: object
    z: object

    LAYOUT = ("doc_ptr", "doc_of", "words", "by_word", "segment_ptr", "schedule")
    STATE = ("a_idx", "a_val", "n_keys", "z")
    ARRAYS = LAYOUT + STATE

    @property
    def tokens(self) -> int:
        return int(self.z.size)

    @property
    def documents(self) -> int:
        return int(self.n_keys.size)


def e_step(chunk: ChunkArrays, bhat, structures: Structures, seed: int, iteration, by_word: bool,
           threads: int = 0, denominator=None, counters=None, own_at=None, own_at_written: bool = False,
           b=None, prefetch: bool | None = None) -> None:
    """New topics of the chunk's tokens into chunk.z, from its A, B^ and the structures: a
    warp per token in document order (G0), or a block per word segment (G1 on); blocks of
    `threads` (a multiple of W), or (0) the sizes chosen below. With B^'s `denominator`,
    each token's own topic (chunk.z on entry) is left out of its draw (model.e_step).
    iteration: the draws' iteration, an int or a device uint32 holding it (a run's, which
    next_iteration advances, so that a captured iteration draws anew at each replay).
    counters: two int32 zeros for the segments' dynamic schedule (a run's, which
    next_iteration zeroes), or None: made here. own_at: int32 room for the chunk's tokens'
    own topics' non-zeros in A where the own topic is left out (a run's, so that a captured
    iteration allocates nothing), or None: made here; found here (saber_own_positions)
    unless own_at_written: the chunk's rebuild wrote them (SSC, given room). b (G1 on
    only): the next B, to which the draw adds the chunk's new topics (then rebuild need not).
    prefetch (G1 on): whether the draw prefetches each next token's row of A (None: where the
    chunk's A outgrows L2, prefetches)."""
    import cupy

    tokens = chunk.tokens
    if denominator is not None:
        check_without_own(structures.kind)
        own_at = cupy.empty(tokens, cupy.int32) if own_at is None else own_at[:tokens]
        if not own_at_written:
            _launch("saber_own_positions", (_thread_grid(tokens),), (BLOCK,), (
                np.int32(tokens), chunk.doc_of, chunk.doc_ptr, chunk.n_keys, chunk.a_idx, chunk.z, own_at))
    if isinstance(iteration, (int, np.integer)):
        iteration = cupy.full(1, iteration, cupy.uint32)
    topics = int(bhat.shape[1])
    common = (np.int64(chunk.first_token), chunk.doc_of, chunk.words, chunk.doc_ptr, chunk.n_keys, chunk.a_idx,
              chunk.a_val, NULL if denominator is None else own_at, bhat, np.int32(topics), alpha_of(topics),
              structures.totals, NULL if denominator is None else denominator)
    if structures.kind == "tree":
        name, extra = "saber_sample_tree", (structures.level4, structures.level3, structures.level2,
                                            np.int32(structures.level4.shape[1]))
    else:
        name, extra = "saber_sample_alias", (structures.level4, structures.level3)
    if not by_word:
        assert b is None, "G0's draw, a warp a token, leaves B to rebuild"
        block = threads or BLOCK
        _launch(name, (_warp_grid(tokens, True, block),), (block,), (
            *common, *extra, np.int32(tokens), np.uint32(seed), iteration, chunk.z))
        return
    counters = cupy.zeros(2, cupy.int32) if counters is None else counters
    # The segments long enough to give every warp of a staged block a token copy B^_v to
    # shared memory, in the blocks that keep the most warps resident; the rest (a suffix of
    # the schedule: its sizes descend) read it in place, in blocks of SHORT_BLOCK.
    left_out = denominator is not None
    prefetch = prefetches(chunk) if prefetch is None else prefetch
    # ESCA's kernels hold no code for the own topic, and those without _prefetch none for it
    suffix = ("_left_out" if left_out else "") + ("_prefetch" if prefetch else "")
    staged_block = threads or staged_threads(f"{name}_by_word{suffix}", topics, left_out)
    staged = int(np.count_nonzero(chunk.segment_sizes >= staged_block // W))
    segments = int(chunk.segment_sizes.size)
    global_block = threads or SHORT_BLOCK
    for kernel_name, first, last, block, shared_mem, counter in (
            (f"{name}_by_word{suffix}", 0, staged, staged_block, by_word_shared(staged_block, topics, left_out),
             counters[0:]),
            (f"{name}_by_word_global{suffix}", staged, segments, global_block,
             by_word_shared(global_block, 0, left_out), counters[1:])):
        if first == last:
            continue
        kernel_name, kernel = _by_word_kernel(kernel_name, block)
        if shared_mem > _most_shared(kernel):
            raise BenchError(f"K = {topics:,}, {block} threads a block: {shared_mem:,} bytes of shared memory a block, "
                             f"more than this GPU gives one; use fewer threads")
        allow_shared_memory(kernel, shared_mem)
        blocks = min(last - first, multiprocessors() * _blocks_per_sm(shared_mem, block, kernel.num_regs))
        _launch(kernel_name, (blocks,), (block,), (
            *common, *extra, chunk.by_word, chunk.segment_ptr, chunk.schedule, np.int32(first), np.int32(last), counter,
            np.uint32(seed), iteration, chunk.z, NULL if b is None else b), shared_mem=shared_mem)


def prefetches(chunk: ChunkArrays) -> bool:
    """Whether the word-segment draw prefetches each next token's row of A into L2 (saber.cu's
    prefetch_row): where the chunk's A, at most a non-zero a token (8 bytes), outgrows the GPU's
    L2, so that the rows a word's tokens read come from DRAM. H200, G4, 100 iterations:
    nytimes-synth (A of 800 MB) 11-12% faster a run at K = 1000 and 10,000; kos and nips (4 and
    15 MB, held in L2) 9-10% slower, where it adds instructions and saves no wait."""
    return chunk.a_idx.nbytes + chunk.a_val.nbytes > device_attribute("L2CacheSize")


# Threads of a block per word segment: 512 ran kos and nips 1.1-1.6x faster than 256 (H100,
# K = 100 and 1024; 1024 was slower on nips), and nytimes-synth as fast.
WORD_BLOCK = 512
# ... and of a block per short segment (fewer tokens than a staged block has warps, B^_v read
# in place): two warps, each one batch of its share of the tokens, not a staged block's many
# warps, most of them with none, waiting at the block's barrier. kos and nips, K = 1024, H200: G4 4-5% and
# delayed-gibbs 6% faster a whole run than with 512 (a scratch comparison of 512, 256, 128, 64).
SHORT_BLOCK = 64


def _by_word_kernel(name: str, block: int) -> tuple[str, object]:
    """The word-segment kernel `name` for blocks of `block` threads: the one bounded for
    three blocks of up to 512 an SM (40 registers, saber.cu), or its _wide copy beyond."""
    kernel = raw_kernel(KERNEL_SOURCE, name)
    if block > kernel.max_threads_per_block:
        name += "_wide"
        kernel = raw_kernel(KERNEL_SOURCE, name)
    return name, kernel


def by_word_shared(block: int, topics: int, left_out: bool) -> int:
    """Bytes of dynamic shared memory of a word-segment block of `block` threads (saber.cu's
    batch_bytes): its warps' batches of token inputs (16 bytes a thread, 48 with the own topic
    left out), then B^_v's `topics` floats where the block stages them (0: it does not)."""
    return block * (48 if left_out else 16) + topics * 4


def staged_threads(name: str, topics: int, left_out: bool = False) -> int:
    """Threads of a block of the staged word-segment kernel `name` (B^_v's K floats in its
    shared memory): WORD_BLOCK, or 1024 where that keeps more warps resident (where shared
    memory holds one block an SM: on an H100 or H200, K beyond about 27,000, or 23,000 with
    the own topic left out)."""
    def resident_warps(block: int) -> int:  # 0 where a block's shared memory exceeds the GPU's
        kernel, shared = _by_word_kernel(name, block)[1], by_word_shared(block, topics, left_out)
        fits = shared <= _most_shared(kernel)
        return block // W * _blocks_per_sm(shared, block, kernel.num_regs) if fits else 0

    return max((WORD_BLOCK, 1024), key=resident_warps)  # WORD_BLOCK where equal (e_step refuses where none fits)


def _most_shared(kernel) -> int:
    """Bytes of dynamic shared memory a block of `kernel` may have on this GPU: its limit a
    block (opt-in), less the kernel's static shared memory."""
    return device_attribute("MaxSharedMemoryPerBlockOptin") - kernel.shared_size_bytes


def _blocks_per_sm(shared: int, threads: int, registers: int = 0) -> int:
    """Blocks of `threads` an SM holds with `shared` bytes and `registers` a thread each
    (by threads, shared memory and registers, a warp's allocated in steps of 256)."""
    shared_per_sm = device_attribute("MaxSharedMemoryPerMultiprocessor")
    registers_per_sm = device_attribute("MaxRegistersPerMultiprocessor")
    by_registers = registers_per_sm // (-(-registers * W // 256) * 256 * (threads // W)) if registers else 2048
    return max(1, min(2048 // threads, shared_per_sm // (shared + 1024), by_registers))  # 1 KiB reserved a block


def rebuild(chunk: ChunkArrays, topics: int, ssc: bool, b, topic_counts, non_zeros=None, own_at=None) -> None:
    """The M-step of one chunk: its A from its z (in place: the chunk is sampled), by SSC
    (G3 on) or one sort of its tokens by (document, topic) (G0-G2); its tokens added to B
    (None: the draw added them, e_step's b) and to n_k (topic_counts), and its number of
    non-zeros of A to non_zeros (a uint64 on the device; None: dropped). own_at (SSC only):
    room for each token's own topic's non-zero in the new A, which the next left-out draw
    reads (e_step's own_at_written). With SSC an iteration issues the suite's kernels alone
    (a CUDA graph can capture it); G0-G2's sort is CuPy's, which may allocate or wait for the
    host."""
    import cupy

    non_zeros = cupy.zeros(1, cupy.uint64) if non_zeros is None else non_zeros
    if ssc:
        _segmented_count(chunk, topics, non_zeros, own_at)
    else:
        _count_by_sorting(chunk, topics, non_zeros)
    topic_histogram(chunk.z, topics, topic_counts)
    if b is not None:
        tokens = chunk.tokens
        _launch("saber_word_counts", (_thread_grid(tokens),), (BLOCK,),
                (np.int32(tokens), chunk.words, chunk.z, np.int32(topics), b))


def next_iteration(iteration, non_zeros, series, counters) -> None:
    """The end of an iteration, on the device (saber_next_iteration): the iteration's count of
    A's non-zeros (non_zeros) into series at the iteration, and zeroed; the schedules'
    counters zeroed; the iteration (a device uint32) advanced."""
    _launch("saber_next_iteration", (1,), (BLOCK,), (iteration, non_zeros, series, counters, np.int32(counters.size)))


def _count_by_sorting(chunk: ChunkArrays, topics: int, non_zeros) -> None:
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
    non_zeros += keys.size


def _segmented_count(chunk: ChunkArrays, topics: int, non_zeros, own_at) -> None:
    """A by a segmented count per document (SSC, Fig. 8): a warp per document ranks its topics
    in a bitmap of K bits in shared memory, no sort (saber_rank_count), and counts them there
    where they are at most RANK_SHARED; given own_at, each token's non-zero is written there."""
    kernel = raw_kernel(KERNEL_SOURCE, "saber_rank_count")
    words, warps = -(-topics // W), BLOCK // W
    # A warp's bitmap and its words' ranks (2 x words ints), then `most` ranks' counts and topics, as
    # many as a block's shared memory holds beside the bitmaps (on an H100 or H200 RANK_SHARED).
    most = max(0, min(topics, RANK_SHARED, (_most_shared(kernel) // (4 * warps) - 2 * words) // 2))
    shared_mem = (2 * words + 2 * most) * 4 * warps
    allow_shared_memory(kernel, shared_mem)
    _launch("saber_rank_count", (_warp_grid(chunk.documents, grid_stride=True),), (BLOCK,), (
        chunk.doc_ptr, np.int32(chunk.documents), chunk.z, np.int32(topics), np.int32(most), chunk.a_idx,
        chunk.a_val, chunk.n_keys, non_zeros, NULL if own_at is None else own_at[:chunk.tokens]),
        shared_mem=shared_mem)
