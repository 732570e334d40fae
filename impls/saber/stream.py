"""A stage's iterations on the GPU, chunk by chunk (Sec. 3, Fig. 3).

The documents are cut into chunks (model.chunk_layout). Each iteration computes B^ and the
structures once, then for every chunk samples its tokens, rebuilds its A and adds its
tokens to the next B. Where the memory budget holds the whole corpus, every chunk's
arrays stay on the device (resident); otherwise they live in pinned host memory and are
copied in and out of a slot per worker every iteration (streaming). G0-G3 take the chunks
one after another on one stream, each phase timed (where one GPU holds the corpus and the
rebuild is the suite's kernels alone, G3's iteration is captured once as a CUDA graph and
replayed, timed as phases "capture" and "graph": axis graphs); G4 gives them to `workers` CUDA
streams, so that one chunk's copies overlap another's kernels, and is timed as a whole
(its phase "overlapped"); with one chunk on one GPU there is nothing to overlap, and G4
runs as G3 (the streams' events cost kos 7% an iteration, H200).

On several GPUs (data parallel) each GPU holds a contiguous share of the chunks, its z and
A, and counts its own tokens into its own B; every iteration the GPUs sum their B's
through NCCL (an in-place all-reduce, phase "reduce") and each computes B^ and the
structures from the sum. A host thread per GPU issues its chunks (a chunk's sort of long
documents waits on its GPU), and the chunks' work is timed as "overlapped". The uniforms
are per token, so any number of GPUs draws the one-GPU topics.

The budget is enforced: the run raises CuPy's OutOfMemoryError rather than use more.
"""

import contextlib
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache

import numpy as np

from bench.errors import BenchError
from impls.saber import gpu, model
from impls.saber.structures import W, level3_size, padded

GIB = 2**30
# Device bytes per token of a chunk on the device: its layout (doc_of, words, by_word and at
# most a segment, a schedule entry and a long position), its state (A by slot: 2, z) and
# the rebuild's temporaries at their peak (the sort of G0-G2 in cupy.unique: the int64
# keys, their copy, the radix sort's buffer, the mask, the run starts and counts; more than
# SSC needs, and room beside them for the own topic's positions where a draw leaves it out:
# 4 bytes a token, of every chunk where resident and SSC's rebuild writes them). Per
# document: doc_ptr, n_keys and the sort's bounds.
LAYOUT_BYTES_PER_TOKEN = 6 * 4
STATE_BYTES_PER_TOKEN = 3 * 4
WORK_BYTES_PER_TOKEN = 64
BYTES_PER_DOCUMENT = 3 * 4


def model_bytes(vocabulary: int, topics: int) -> int:
    """B, B^, n_k and its denominators, and the larger of the two structures (alias:
    probabilities, aliases and the build's stacks; tree: its three levels; the totals)."""
    dense = vocabulary * topics * 4
    tree = vocabulary * (padded(topics) + level3_size(topics) + W) * 4
    return 2 * dense + topics * 12 + vocabulary * 4 + max(3 * dense, tree)


def chunk_bytes(tokens: int, documents: int) -> int:
    return tokens * (LAYOUT_BYTES_PER_TOKEN + STATE_BYTES_PER_TOKEN + WORK_BYTES_PER_TOKEN) + \
        documents * BYTES_PER_DOCUMENT


def chunks_for_budget(doc_ptr: np.ndarray, vocabulary: int, topics: int, chunks: int, workers: int,
                      budget_gib: float, gpus: int = 1) -> tuple[int, bool]:
    """(chunks, resident) per GPU, each GPU holding a 1/gpus share of the corpus and the
    budget: the chunks asked for, or more if a slot per worker must hold a chunk within
    the budget; resident when the budget (0: none) holds them all. chunks = 0 leaves the
    count to the code: one where the corpus is resident (more would only add launches: there
    is no copy to overlap), else the fewest the budget allows (more than the workers, whose
    slots hold a chunk each, so that copies overlap kernels). A one-line BenchError when
    the budget does not hold the model and, per worker, the longest document."""
    if budget_gib == 0:
        return chunks or 1, True
    budget = int(budget_gib * GIB)
    tokens, documents = -(-int(doc_ptr[-1]) // gpus), -(-(doc_ptr.size - 1) // gpus)
    free = budget - model_bytes(vocabulary, topics)
    if free >= chunk_bytes(tokens, documents):
        return chunks or 1, True
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
    """The chunks' arrays on the host (pinned where streaming) and, where resident, on
    their GPUs: chunk i on GPU gpu_of[i], each GPU a contiguous run of chunks."""

    host: list[gpu.ChunkArrays]
    device: list[gpu.ChunkArrays] | None  # resident: every chunk's arrays on its GPU
    vocabulary: int
    budget: int  # bytes per GPU (0: none)
    gpu_of: list[int]

    @property
    def gpus(self) -> int:
        return max(self.gpu_of) + 1

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
    return gpu.ChunkArrays(chunk.first_token, np.diff(chunk.segment_ptr)[chunk.schedule],
                           **{name: place(getattr(chunk, name)) for name in gpu.ChunkArrays.LAYOUT},
                           a_idx=place(np.zeros(n, np.int32)), a_val=place(np.zeros(n, np.int32)),
                           n_keys=place(np.zeros(documents, np.int32)), z=place(np.zeros(n, np.int32)))


def on_device(chunk: gpu.ChunkArrays) -> gpu.ChunkArrays:
    import cupy

    return gpu.ChunkArrays(chunk.first_token, chunk.segment_sizes,
                           **{name: cupy.asarray(getattr(chunk, name)) for name in gpu.ChunkArrays.ARRAYS})


def gpu_of_chunks(chunks: int, gpus: int) -> list[int]:
    """The GPU of each chunk: `gpus` contiguous runs of chunks, as even as the count allows
    (the chunks have about equal tokens)."""
    if chunks < gpus:
        raise BenchError(f"{chunks} chunk(s) for {gpus} GPUs: the corpus has too few documents to share")
    return [index * gpus // chunks for index in range(chunks)]


def load(layout: list[model.Chunk], vocabulary: int, resident: bool, budget_gib: float, gpus: int = 1) -> Corpus:
    """The chunks' arrays: uploaded once to their GPUs where resident, pinned on the host
    where streaming; the chunks in `gpus` contiguous runs of about equal tokens."""
    import cupy

    gpu_of = gpu_of_chunks(len(layout), gpus)
    if not resident:  # pinned blocks an earlier corpus left in CuPy's pool go back first (tens of GB)
        cupy.get_default_pinned_memory_pool().free_all_blocks()
    host = [host_chunk(chunk, pinned=not resident) for chunk in layout]
    device = None
    if resident:
        device = []
        for chunk, g in zip(host, gpu_of):
            with cupy.cuda.Device(g):
                device.append(on_device(chunk))
    return Corpus(host, device, vocabulary, int(budget_gib * GIB), gpu_of)


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


@cache
def communicators(gpus: int) -> list:
    """NCCL communicators of GPUs 0 to gpus - 1, one process driving them all."""
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # no NVLink multicast: it can take a shared host's GPUs down
    try:
        from cupy.cuda import nccl
    except ImportError as error:
        raise BenchError(f"several GPUs need NCCL, which CuPy cannot load here ({error})") from error
    return nccl.NcclCommunicator.initAll(list(range(gpus)))


class _Shard:
    """One GPU's part of a run: its chunks (indices into the corpus), its counts B and n_k, B^ and
    the structures (allocated once, refilled every iteration), its workers' streams and,
    where streaming, their slots; on the device, the iteration being drawn, the dynamic
    schedules' counters of every chunk, the iteration's non-zeros of A and every iteration's,
    which the end of each iteration (gpu.next_iteration) advances, and, with the own topic left
    out, room for the own topics' positions in A (each resident chunk's, where its rebuild
    writes them for its next draw, else each worker's, where the draw finds them), so that an
    iteration needs neither an allocation nor the host's attention, and one captured as a
    CUDA graph can be replayed. The streams are blocking ones, so that work on the GPU's legacy null stream
    (the initial counts, pre-processing, the all-reduce) and the workers' stay ordered."""

    def __init__(self, corpus: Corpus, gpu_id: int, topics: int, workers: int, structure: str, iterations: int,
                 without_own: bool, ssc: bool):
        import cupy

        self.device, self.ssc = cupy.cuda.Device(gpu_id), ssc
        self.chunks = [i for i, g in enumerate(corpus.gpu_of) if g == gpu_id]
        with self.device:
            self.streams = [cupy.cuda.Stream(non_blocking=False) for _ in range(workers)] if workers > 1 else \
                [cupy.cuda.Stream.null]
            self.slots = None if corpus.device else \
                [_Slot([corpus.host[i] for i in self.chunks], s) for s in self.streams]
            self.b = cupy.zeros((corpus.vocabulary, topics), cupy.int32)
            self.topic_counts = cupy.zeros(topics, cupy.int64)  # n_k, counted with B
            self.model = gpu.allocate(corpus.vocabulary, topics, structure)
            self.iteration = cupy.zeros(1, cupy.uint32)
            self.counters = cupy.zeros((len(self.chunks), 2), cupy.int32)
            self.non_zeros = cupy.zeros(1, cupy.uint64)
            self.series = cupy.zeros(iterations, cupy.uint64)
            self.own_at_written = without_own and corpus.device is not None and ssc
            sizes = [corpus.host[i].tokens for i in self.chunks] if self.own_at_written else \
                [max(corpus.host[i].tokens for i in self.chunks)] * len(self.streams)
            self.own_at = [cupy.empty(size, cupy.int32) for size in sizes] if without_own else None

    def own_at_of(self, position: int):
        """The room for the own topics' positions of the chunk at `position` (None: counted)."""
        return None if self.own_at is None else self.own_at[position % len(self.own_at)]

    def rebuild(self, chunk: gpu.ChunkArrays, position: int, non_zeros=None, drawn_into_b: bool = False) -> None:
        """The chunk's A, and its tokens in B unless its draw added them (drawn_into_b); the own
        topics' positions where it writes them."""
        gpu.rebuild(chunk, self.b.shape[1], self.ssc, None if drawn_into_b else self.b, self.topic_counts, non_zeros,
                    self.own_at_of(position) if self.own_at_written else None)

    def preprocess(self, structure: str) -> None:
        """B^ and the structures from the counts, zeroed: the next B and n_k, which every chunk adds to."""
        gpu.preprocess(self.b, self.topic_counts, structure, self.model)

    def end_iteration(self) -> None:
        gpu.next_iteration(self.iteration, self.non_zeros, self.series, self.counters)

    def place(self, corpus: Corpus, position: int, names) -> tuple[gpu.ChunkArrays, object]:
        """This GPU's chunk at `position` on the GPU (its arrays `names` copied in where
        streaming, through the slot of worker position % workers) and that slot."""
        index = self.chunks[position]
        if corpus.device:
            return corpus.device[index], None
        slot = self.slots[position % len(self.slots)]
        return slot.copy_in(corpus.host[index], names), slot

    def done(self):
        """An event on this GPU's null stream after everything issued to it."""
        import cupy

        with self.device:
            for stream in self.streams:
                cupy.cuda.Stream.null.wait_event(stream.record())
            return cupy.cuda.Stream.null.record()


def _sum_counts(shards: list[_Shard]) -> None:
    """Every GPU's B and n_k become the sums of all of them (in place, on each GPU's null
    stream), and GPU 0's null stream (the clock's) waits for every GPU."""
    import cupy
    from cupy.cuda import nccl

    if len(shards) == 1:
        return
    group = communicators(len(shards))  # made outside the group: their creation is no group call
    nccl.groupStart()
    try:
        for shard, communicator in zip(shards, group):
            with shard.device:
                for counts, kind in ((shard.b, nccl.NCCL_INT32), (shard.topic_counts, nccl.NCCL_INT64)):
                    communicator.allReduce(counts.data.ptr, counts.data.ptr, counts.size, kind, nccl.NCCL_SUM,
                                           cupy.cuda.Stream.null.ptr)
    finally:
        nccl.groupEnd()
    _wait_for(shards)


def _wait_for(shards: list[_Shard], events=None) -> None:
    """GPU 0's null stream, where the timing clock records its events, waits for the other
    GPUs: for `events` (one a GPU, GPU 0's first), or for all each GPU was given so far."""
    import cupy

    events = events or [shard.done() for shard in shards]
    with shards[0].device:
        for event in events[1:]:
            cupy.cuda.Stream.null.wait_event(event)


def iterate(corpus: Corpus, topics: int, iterations: int, structure: str, by_word: bool, ssc: bool,
            workers: int, seed: int, ctx, threads: int = 0, observe=no_observation,
            without_own: bool = False, graphs: bool = False) -> tuple[np.ndarray, dict]:
    """The iterations of a stage from the seeded initial topics (the twin's): z on the host,
    and the final kd_mean and the bytes of B + B^, of the structures and of the device
    memory the run held (CuPy's pools of every GPU: the resident chunks and the run's peak).
    workers > 1: G4's asynchronous workers; threads: the sampling kernels' blocks (gpu.e_step);
    observe(iteration, b): values to record beside kd_mean, untimed (iteration 0: the initial counts);
    without_own: each token's own topic left out of its draw (gpu.e_step); graphs: an iteration
    captured once as a CUDA graph and replayed, where one GPU holds the corpus and takes its
    chunks in turn and the rebuild is the suite's kernels alone (G3, G4 with one chunk: metric
    graphed), its time the phase "graph"."""
    import cupy

    pool = cupy.get_default_memory_pool()
    devices = [cupy.cuda.Device(g) for g in range(corpus.gpus)]
    for g, device in enumerate(devices):
        with device:
            pool.free_all_blocks()  # what the pool holds after the run is then the run's
            if corpus.budget:  # the run's arrays and the resident chunks within it, besides what others hold
                resident = sum(getattr(c, name).nbytes for c, on in zip(corpus.device or (), corpus.gpu_of)
                               if on == g for name in gpu.ChunkArrays.ARRAYS)
                # The limit bounds the pool's total: what others hold, and the free pieces of
                # their split blocks, which free_all_blocks cannot return, are not the run's.
                pool.set_limit(size=pool.total_bytes() - resident + corpus.budget)
    try:
        z, metrics = _iterate(corpus, topics, iterations, structure, by_word, ssc, workers, seed, ctx, threads,
                              observe, without_own, graphs)
        held = 0
        for device in devices:
            with device:
                held += pool.total_bytes()
        return z, {**metrics, "bytes_device": held}
    finally:
        for device in devices:
            with device:
                pool.set_limit(size=0)


def _iterate(corpus: Corpus, topics: int, iterations: int, structure: str, by_word: bool, ssc: bool, workers: int,
             seed: int, ctx, threads: int, observe, without_own: bool, graphs: bool) -> tuple[np.ndarray, dict]:
    import cupy

    host = corpus.host
    documents = sum(c.documents for c in host)
    shards = [_Shard(corpus, g, topics, workers, structure, iterations, without_own, ssc) for g in range(corpus.gpus)]

    with ctx.untimed():  # the initial topics and counts
        z = model.initial_topics(sum(c.tokens for c in host), topics, seed)
        for shard in shards:
            with shard.device:
                for position, index in enumerate(shard.chunks):
                    chunk = host[index]
                    placed, slot = shard.place(corpus, position, gpu.ChunkArrays.LAYOUT)
                    placed.z.set(z[chunk.first_token:chunk.first_token + chunk.tokens])
                    shard.rebuild(placed, position)
                    if slot:
                        slot.copy_out(placed, chunk)
        _sum_counts(shards)
        for shard in shards:
            shard.device.synchronize()
        with shards[0].device:  # B's GPU, where an evaluation on the GPU runs
            initial = observe(0, shards[0].b)
    if initial:
        ctx.record(0, **initial)

    # A chunk's arrays copied in where streaming: z is overwritten, unless the draw reads each token's own topic there
    copied_in = gpu.ChunkArrays.LAYOUT + (gpu.ChunkArrays.STATE if without_own else gpu.ChunkArrays.STATE[:3])

    def step(shard: _Shard, position: int, phase) -> None:
        """One chunk's iteration: copied in (streaming), sampled, A and B rebuilt, copied out."""
        with phase("transfer"):
            placed, slot = shard.place(corpus, position, copied_in)
        with phase("sample"):
            gpu.e_step(placed, shard.model.bhat, shard.model.structures, seed, shard.iteration, by_word, threads,
                       shard.model.denominator if without_own else None, shard.counters[position],
                       shard.own_at_of(position), shard.own_at_written, shard.b if by_word else None)
        with phase("rebuild"):
            shard.rebuild(placed, position, shard.non_zeros, drawn_into_b=by_word)
        with phase("transfer"):
            if slot:
                slot.copy_out(placed, host[shard.chunks[position]])

    def issue(shard: _Shard):
        """A GPU's chunks on its workers' streams (from its own host thread where there are
        several GPUs); an event after them."""
        with shard.device:
            for position in range(len(shard.chunks)):
                with shard.streams[position % workers]:
                    step(shard, position, _untimed_phase)
        return shard.done()

    def in_turn(phase) -> None:
        """An iteration of one GPU that takes its chunks one after another (nothing to overlap)."""
        shard = shards[0]
        with phase("preprocess"):
            shard.preprocess(structure)
        for position in range(len(shard.chunks)):
            step(shard, position, phase)
        shard.end_iteration()

    @cache
    def kd_means() -> np.ndarray:
        """Every iteration's mean non-zeros per row of A (read once the run is done)."""
        non_zeros = 0
        for shard in shards:
            with shard.device:
                non_zeros = non_zeros + shard.series.get()
        return non_zeros / documents

    launched = gpu.launches
    one_by_one = len(shards) == 1 and (workers == 1 or len(shards[0].chunks) == 1)
    graph = None
    if graphs and one_by_one and corpus.device and ssc:  # SSC's rebuild: the suite's kernels alone (gpu.rebuild)
        with ctx.phase("capture"):  # the host's launches of one iteration, once (in the run's time)
            graph = _captured(lambda: in_turn(_untimed_phase))
    issuers = ThreadPoolExecutor(len(shards)) if len(shards) > 1 else None  # a host thread per GPU
    try:
        for iteration in range(iterations):
            if graph is not None:
                with ctx.phase("graph"):
                    gpu.launch_graph(graph)
            elif one_by_one:
                in_turn(ctx.phase)
            else:
                with ctx.phase("preprocess"):
                    for shard in shards:
                        with shard.device:
                            shard.preprocess(structure)
                    if len(shards) > 1:
                        _wait_for(shards)
                with ctx.phase("overlapped"):
                    events = list(issuers.map(issue, shards) if issuers else [issue(shards[0])])
                    _wait_for(shards, events)
                for shard in shards:
                    with shard.device:
                        shard.end_iteration()
            if len(shards) > 1:
                with ctx.phase("reduce"):
                    _sum_counts(shards)
            with ctx.untimed(), shards[0].device:
                observed = observe(iteration + 1, shards[0].b)
            ctx.record(iteration + 1, kd_mean=lambda i=iteration: float(kd_means()[i]), **observed)
    finally:
        if issuers:
            issuers.shutdown()
    launches = (gpu.launches - launched) / iterations

    for shard in shards:
        shard.device.synchronize()
    with ctx.untimed():  # every token counted once in the last B: no chunk was lost on the way
        with shards[0].device:
            counted = int(shards[0].b.sum(dtype=cupy.int64))
        if counted != z.size:
            raise BenchError(f"the last iteration counted {counted} of {z.size} tokens")
    for index, chunk in enumerate(host):
        if corpus.device:
            with cupy.cuda.Device(corpus.gpu_of[index]):
                corpus.device[index].z.get(out=z[chunk.first_token:chunk.first_token + chunk.tokens])
        else:
            z[chunk.first_token:chunk.first_token + chunk.tokens] = chunk.z
    first = shards[0].model
    return z, {"final_kd_mean": float(kd_means()[-1]), "bytes_b": shards[0].b.nbytes + first.bhat.nbytes,
               "bytes_structures": first.structures.nbytes, "launches_per_iteration": launches,
               "graphed": int(graph is not None)}


def _untimed_phase(name: str):
    return contextlib.nullcontext()


def _captured(issue):
    """The work issue() launches, captured as a CUDA graph (instantiated, not run) on a stream
    of its own: the legacy null stream cannot be captured. An allocation from CuPy's pool
    inside the capture is refused: the graph would keep memory that the pool hands out again."""
    import cupy

    pool = cupy.get_default_memory_pool()
    stream, used = cupy.cuda.Stream(non_blocking=True), pool.used_bytes()
    with stream:
        stream.begin_capture()
        try:
            issue()
        except BaseException:
            with contextlib.suppress(Exception):  # the capture's own error would hide issue()'s
                stream.end_capture()
            raise
        graph = stream.end_capture()
    if pool.used_bytes() != used:
        raise BenchError("an iteration captured as a CUDA graph allocated memory: run it with graphs 0")
    return graph
