"""A stage's iterations on the GPU, chunk by chunk (Sec. 3, Fig. 3).

The documents are cut into chunks (model.chunk_layout). Each iteration computes B^ and the
structures once, then for every chunk samples its tokens, rebuilds its A and adds its
tokens to the next B. Where the memory budget holds the whole corpus, every chunk's
arrays stay on the device (resident); otherwise they live in pinned host memory and are
copied in and out of a slot per worker every iteration (streaming). G0-G3 take the chunks
one after another on one stream, each phase timed; G4 gives them to `workers` CUDA
streams, so that one chunk's copies overlap another's kernels, and is timed as a whole
(its phase "overlapped").

The budget is enforced: the run raises CuPy's OutOfMemoryError rather than use more.
"""

import contextlib
from dataclasses import dataclass

import numpy as np

from bench.errors import BenchError
from impls.saber import gpu, model
from impls.saber.structures import LEVEL3, W, padded

GIB = 2**30
# Device bytes per token of a chunk on the device: its layout (doc_of, words, by_word and at
# most a segment, a schedule entry and a long position), its state (A by slot: 2, z) and
# the rebuild's temporaries at their peak (the sort of G0-G2 in cupy.unique: the int64
# keys, their copy, the radix sort's buffer, the mask, the run starts and counts; more than
# SSC needs). Per document: doc_ptr, n_keys and the sort's bounds.
LAYOUT_BYTES_PER_TOKEN = 6 * 4
STATE_BYTES_PER_TOKEN = 3 * 4
WORK_BYTES_PER_TOKEN = 64
BYTES_PER_DOCUMENT = 3 * 4


def model_bytes(vocabulary: int, topics: int) -> int:
    """B, B^, n_k and its denominators, and the larger of the two structures (alias:
    probabilities, aliases and the build's stacks; tree: its three levels; the totals)."""
    dense = vocabulary * topics * 4
    tree = vocabulary * (padded(topics) + LEVEL3 + W) * 4
    return 2 * dense + topics * 12 + vocabulary * 4 + max(3 * dense, tree)


def chunk_bytes(tokens: int, documents: int) -> int:
    return tokens * (LAYOUT_BYTES_PER_TOKEN + STATE_BYTES_PER_TOKEN + WORK_BYTES_PER_TOKEN) + \
        documents * BYTES_PER_DOCUMENT


def chunks_for_budget(doc_ptr: np.ndarray, vocabulary: int, topics: int, chunks: int, workers: int,
                      budget_gib: float) -> tuple[int, bool]:
    """(chunks, resident): the chunks asked for, or more if a slot per worker must hold a
    chunk within the budget; resident when the budget (0: none) holds them all. A one-line
    BenchError when the budget does not hold the model and, per worker, the longest document."""
    if budget_gib == 0:
        return chunks, True
    budget = int(budget_gib * GIB)
    tokens, documents = int(doc_ptr[-1]), doc_ptr.size - 1
    free = budget - model_bytes(vocabulary, topics)
    if free >= chunk_bytes(tokens, documents):
        return chunks, True
    longest = int(np.diff(doc_ptr).max())
    if free < workers * chunk_bytes(longest, 1):
        raise BenchError(f"memory budget {budget_gib:g} GiB is too small for one chunk: the model at K = {topics} "
                         f"takes {_size(model_bytes(vocabulary, topics))} and {workers} worker(s) need "
                         f"{_size(workers * chunk_bytes(longest, 1))} for the longest document")
    per_slot = free // workers
    return max(chunks, -(-chunk_bytes(tokens, documents) // per_slot) + 1), False  # +1: chunks are uneven


def _size(size: int) -> str:
    return f"{size / GIB:.2f} GiB" if size >= GIB else f"{size / 2**20:.2f} MiB"


@dataclass
class Corpus:
    """The chunks' arrays on the host (pinned where streaming) and, where resident, on the device."""

    host: list[gpu.ChunkArrays]
    device: list[gpu.ChunkArrays] | None  # resident: every chunk's arrays on the device
    vocabulary: int
    budget: int  # bytes (0: none)

    @property
    def device_bytes(self) -> int:
        return sum(getattr(c, name).nbytes for c in self.device or () for name in gpu.ChunkArrays.ARRAYS)

    def bytes_of(self, names) -> int:
        """The bytes of the chunks' arrays `names`, all of them (on the host)."""
        return sum(getattr(c, name).nbytes for c in self.host for name in names)


def host_chunk(chunk: model.Chunk, pinned: bool) -> gpu.ChunkArrays:
    import cupyx

    def place(array):
        if not pinned:
            return np.ascontiguousarray(array)
        out = cupyx.empty_pinned(array.shape, array.dtype)
        out[...] = array
        return out

    n, documents = chunk.tokens, chunk.documents
    layout = {name: getattr(chunk, name) for name in gpu.ChunkArrays.LAYOUT if name != "long_positions"}
    return gpu.ChunkArrays(chunk.first_token, np.diff(chunk.segment_ptr)[chunk.schedule],
                           **{name: place(a) for name, a in layout.items()},
                           long_positions=place(gpu.long_positions(chunk.doc_ptr)),
                           a_idx=place(np.zeros(n, np.int32)), a_val=place(np.zeros(n, np.int32)),
                           n_keys=place(np.zeros(documents, np.int32)), z=place(np.zeros(n, np.int32)))


def on_device(chunk: gpu.ChunkArrays) -> gpu.ChunkArrays:
    import cupy

    return gpu.ChunkArrays(chunk.first_token, chunk.segment_sizes,
                           **{name: cupy.asarray(getattr(chunk, name)) for name in gpu.ChunkArrays.ARRAYS})


def load(layout: list[model.Chunk], vocabulary: int, resident: bool, budget_gib: float) -> Corpus:
    """The chunks' arrays: uploaded once where resident, pinned on the host where streaming."""
    host = [host_chunk(chunk, pinned=not resident) for chunk in layout]
    return Corpus(host, [on_device(chunk) for chunk in host] if resident else None, vocabulary,
                  int(budget_gib * GIB))


class _Slot:
    """A worker's device arrays, large enough for the largest chunk, and its stream."""

    def __init__(self, host: list[gpu.ChunkArrays], stream):
        import cupy

        self.stream = stream
        self.buffers = {name: cupy.empty(max(getattr(c, name).size for c in host), np.int32)
                        for name in gpu.ChunkArrays.ARRAYS}

    def copy_in(self, chunk: gpu.ChunkArrays, names) -> gpu.ChunkArrays:
        """A view of the slot sized to `chunk`, with the arrays `names` copied in (async)."""
        views = {name: buffer[:getattr(chunk, name).size] for name, buffer in self.buffers.items()}
        for name in names:
            views[name].set(getattr(chunk, name), stream=self.stream)
        return gpu.ChunkArrays(chunk.first_token, chunk.segment_sizes, **views)

    def copy_out(self, device: gpu.ChunkArrays, host: gpu.ChunkArrays) -> None:
        for name in gpu.ChunkArrays.STATE:
            getattr(device, name).get(stream=self.stream, out=getattr(host, name), blocking=False)


def no_observation(iteration: int, b) -> dict:
    return {}


def iterate(corpus: Corpus, topics: int, iterations: int, structure: str, by_word: bool, ssc: bool,
            workers: int, seed: int, ctx, threads: int = 0, observe=no_observation) -> tuple[np.ndarray, dict]:
    """The iterations of a stage from the seeded initial topics (the twin's): z on the host,
    and the final kd_mean and the bytes of B + B^, of the structures and of the device
    memory the run held (CuPy's pool: the resident chunks and the run's peak).
    workers > 1: G4's asynchronous workers; threads: the sampling kernels' blocks (gpu.e_step);
    observe(iteration, b): values to record beside kd_mean, untimed (iteration 0: the initial counts)."""
    import cupy

    pool = cupy.get_default_memory_pool()
    pool.free_all_blocks()  # what the pool holds after the run is then the run's
    if corpus.budget:  # the run's arrays and the resident chunks within it, besides what others hold
        pool.set_limit(size=pool.used_bytes() - corpus.device_bytes + corpus.budget)
    try:
        z, metrics = _iterate(corpus, topics, iterations, structure, by_word, ssc, workers, seed, ctx, threads,
                              observe)
        return z, {**metrics, "bytes_device": pool.total_bytes()}
    finally:
        pool.set_limit(size=0)


def _iterate(corpus: Corpus, topics: int, iterations: int, structure: str, by_word: bool, ssc: bool, workers: int,
             seed: int, ctx, threads: int, observe) -> tuple[np.ndarray, dict]:
    import cupy

    host = corpus.host
    documents = sum(c.documents for c in host)
    streams = [cupy.cuda.Stream(non_blocking=False) for _ in range(workers)] if workers > 1 else \
        [cupy.cuda.Stream.null]
    slots = None if corpus.device else [_Slot(host, s) for s in streams]

    def place(index: int, names) -> tuple[gpu.ChunkArrays, object]:
        """Chunk `index` on the device (its arrays `names` copied in where streaming) and its slot."""
        if corpus.device:
            return corpus.device[index], None
        slot = slots[index % workers]
        return slot.copy_in(host[index], names), slot

    with ctx.untimed():  # the initial topics and counts
        z = model.initial_topics(sum(c.tokens for c in host), topics, seed)
        b = cupy.zeros((corpus.vocabulary, topics), cupy.int32)
        for index, chunk in enumerate(host):
            placed, slot = place(index, gpu.ChunkArrays.LAYOUT)
            placed.z.set(z[chunk.first_token:chunk.first_token + chunk.tokens])
            gpu.rebuild(placed, topics, ssc, b)
            if slot:
                slot.copy_out(placed, chunk)
        cupy.cuda.Device().synchronize()
        initial = observe(0, b)
    if initial:
        ctx.record(0, **initial)

    def step(index: int, chunk: gpu.ChunkArrays, bhat, structures, iteration: int, phase):
        """One chunk's iteration: copied in (streaming), sampled, A and B rebuilt, copied out;
        its number of non-zeros of A (on the device)."""
        with phase("transfer"):
            placed, slot = place(index, gpu.ChunkArrays.LAYOUT + gpu.ChunkArrays.STATE[:3])
        with phase("sample"):
            gpu.e_step(placed, bhat, structures, seed, iteration, by_word, threads)
        with phase("rebuild"):
            gpu.rebuild(placed, topics, ssc, b)
            non_zeros = placed.n_keys.sum(dtype=cupy.int64)
        with phase("transfer"):
            if slot:
                slot.copy_out(placed, chunk)
        return non_zeros

    for iteration in range(iterations):
        with ctx.phase("preprocess"):
            bhat, structures = gpu.preprocess(b, structure)  # b is zeroed: the next B, which every chunk adds to
        if workers == 1:
            non_zeros = [step(index, chunk, bhat, structures, iteration, ctx.phase) for index, chunk in enumerate(host)]
        else:
            non_zeros = []
            with ctx.phase("overlapped"):
                for index, chunk in enumerate(host):
                    with streams[index % workers]:
                        non_zeros.append(step(index, chunk, bhat, structures, iteration,
                                              lambda name: contextlib.nullcontext()))
                for stream in streams:  # the null stream (the clock's) waits for every worker
                    cupy.cuda.Stream.null.wait_event(stream.record())
        sizes = {"bytes_b": b.nbytes + bhat.nbytes, "bytes_structures": structures.nbytes}
        del bhat, structures
        kd_mean = float(sum(int(n) for n in non_zeros)) / documents
        with ctx.untimed():
            observed = observe(iteration + 1, b)
        ctx.record(iteration + 1, kd_mean=kd_mean, **observed)

    cupy.cuda.Device().synchronize()
    with ctx.untimed():  # every token counted once in the last B: no chunk was lost on the way
        counted = int(b.sum(dtype=cupy.int64))
        if counted != z.size:
            raise BenchError(f"the last iteration counted {counted} of {z.size} tokens")
    for index, chunk in enumerate(host):
        if corpus.device:
            corpus.device[index].z.get(out=z[chunk.first_token:chunk.first_token + chunk.tokens])
        else:
            z[chunk.first_token:chunk.first_token + chunk.tokens] = chunk.z
    return z, {"final_kd_mean": kd_mean, **sizes}
