"""The `saber` suite: SaberLDA's sparsity-aware LDA (ESCA) by stage, G0 to G4, each a variant,
on the GPU (impls/saber/gpu.py, stream.py) and as CPU twins (numba, impls/saber/model.py).

A stage is (token order, per-word structure, how A is rebuilt): G0 document order, alias
table, a sort of each chunk's tokens; G1 PDOW (a block per word segment of a chunk, B^_v in
shared memory), alias, sort; G2 PDOW, W-ary tree, sort; G3 PDOW, tree, segmented count
(SSC); G4 as G3 with asynchronous workers (CUDA streams) on the GPU, the same computation
as G3 on the CPU. The topics do not depend on the order (counter-based uniforms per token),
so G0 and G1 draw the same topics, and G2, G3 and G4 the same. Each iteration is timed by
phase: preprocess (B^ and the structures), transfer (chunks in and out, when streaming),
sample (the E-step), rebuild (A and B from z); G4's chunks as one phase, overlapped (one
chunk on one GPU: as G3's). On the GPU, G3 and G4 with one chunk capture an iteration as a
CUDA graph and replay it (axis graphs), timed as one phase, graph, after its capture.
"""

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from bench.ceilings import Work
from bench.corpus import cached_corpus, is_synthetic, parse_datasets
from bench.errors import BenchError
from bench.specs import parse_choices, parse_floats, parse_ints
from bench.suite import Axis, Defaults, Metric, Plot, Suite, Variant
from bench.timing import RunContext
from impls.saber import gpu, model, stream
from impls.saber.recipes import CLAIMS, RECIPES
from impls.saber.structures import MAX_TOPICS, W, level3_size, padded

STAGES = {  # variant: (PDOW order, structure, rebuild by SSC, asynchronous workers)
    "G0": (False, "alias", False, False),
    "G1": (True, "alias", False, False),
    "G2": (True, "tree", False, False),
    "G3": (True, "tree", True, False),
    "G4": (True, "tree", True, True),
}
DOCS = {"G0": "document order, alias tables, counts by sorting",
        "G1": "G0 + PDOW: documents in chunks, tokens by word inside a chunk, a block per word with B^_v in shared memory",
        "G2": "G1 with the W-ary tree (W = 32) instead of the alias table",
        "G3": "G2 + SSC: A rebuilt by a segmented count per document",
        "G4": "G3 + asynchronous workers: chunks on several CUDA streams (on the CPU the same computation as G3)"}
SEED = 0
KERNEL_OPTIONS = ("-std=c++17",)  # gpu.py's raw_kernel calls take bench.backend's default options
PAPER = ("SaberLDA: Sparsity-Aware Learning of Topic Models on GPUs, Kaiwei Li, Jianfei Chen, Wenguang Chen and "
         "Jun Zhu, ASPLOS 2017")
OWN_TOPIC = ("counted", "left-out")  # verification: ESCA's draw, or each token's own topic left out of it


def _parse_threads(spec) -> list[int]:
    """0 (the suite's choice) or whole warps, up to 1024."""
    return parse_ints(spec, "threads", minimum=0, maximum=1024, multiple_of=W)


def _default_scale(backend: str, given: dict) -> str:
    """nytimes-synth shrinks to 100,000 tokens on a CPU; real corpora have their own size."""
    datasets = parse_datasets(given.get("dataset", "nytimes-synth"))
    if backend == "cpu" and all(is_synthetic(d) for d in datasets):
        return "0.001"
    return "1"


@dataclass
class Workload:
    doc_ptr: np.ndarray
    words: np.ndarray
    vocabulary: int
    topics: int
    iterations: int
    layout: list  # model.Chunk: the documents in chunks, laid out once (untimed)
    workers: int
    threads: int = 0  # the GPU's sampling blocks (0: gpu.e_step's choice)
    graphs: bool = True  # the GPU's iterations replayed as a CUDA graph where they can be (stream.iterate)
    corpus: object = None  # stream.Corpus: the chunks' arrays for the GPU
    seed: int = SEED  # of the initial topics and of every draw

    @property
    def tokens(self) -> int:
        return int(self.words.size)

    @cached_property
    def doc_of(self) -> np.ndarray:  # the CPU twin's
        return np.repeat(np.arange(self.doc_ptr.size - 1, dtype=np.int32), np.diff(self.doc_ptr))

    @cached_property
    def pdow(self) -> np.ndarray:
        return model.pdow_order(self.layout)

    @cached_property
    def used_words(self) -> int:
        """The words of the vocabulary the corpus uses (the floor's reads of B^)."""
        return int(np.count_nonzero(np.bincount(self.words, minlength=self.vocabulary)))


GPUS_AXIS = Axis("gpus", "1", lambda s: parse_ints(s, "gpus", maximum=64),
                 "GPUs sharing the documents, their counts B summed through NCCL every iteration (chunks and the "
                 "memory budget are per GPU; the CPU twins ignore it)", tune=True)


def check_gpus(points: list[dict]) -> None:
    """A one-line error where a point asks for more GPUs than the machine has."""
    wanted = max((p.get("gpus", 1) for p in points if p["backend"] == "gpu"), default=1)
    if wanted > 1:
        import cupy

        present = cupy.cuda.runtime.getDeviceCount()
        if present < wanted:
            raise BenchError(f"gpus = {wanted} asks for more GPUs than this machine has ({present})")


class SaberSuite(Suite):
    name = "saber"
    description = "SaberLDA's sparsity-aware LDA by stage (G0-G4) on the GPU, with exact CPU twins"
    axes = (
        Axis("dataset", "nytimes-synth", parse_datasets, "catalogue name or path"),
        Axis("scale", _default_scale, lambda s: parse_floats(s, "scale", 1e-6, 1.0),
             "shrink a synthetic corpus (CPU default 0.001: 100,000 tokens of nytimes-synth)"),
        Axis("K", lambda backend, given: "100,1000", lambda s: parse_ints(s, "K", maximum=MAX_TOPICS),
             "number of topics (1 to 32,768: the W-ary tree's four levels)", aliases=("k",)),
        Axis("iterations", lambda backend, given: "3" if backend == "cpu" else "100",
             lambda s: parse_ints(s, "iterations"), "E- and M-steps per run"),
        Axis("chunks", "0", lambda s: parse_ints(s, "chunks", minimum=0),
             "partitions of the documents per GPU (more if the memory budget needs them); 0: the code's choice, one "
             "where the corpus is resident, else the fewest the budget allows",
             tune=True),
        Axis("workers", "4", lambda s: parse_ints(s, "workers", maximum=64), "G4's CUDA streams", tune=True),
        Axis("memory", "0", lambda s: parse_floats(s, "memory", 0.0), "GPU memory budget in GiB (0: none); a "
             "corpus beyond it streams from pinned host memory", tune=True),
        Axis("threads", "0", _parse_threads, "threads per block of the GPU's sampling kernels, a multiple of 32 "
             "(0: 512, or 1024 where B^_v's shared memory leaves room for one block an SM: K beyond about 27,000, "
             "or 23,000 with the own topic left out)",
             tune=True),
        GPUS_AXIS,
        Axis("graphs", lambda backend, given: "1" if backend == "gpu" else "0",
             lambda s: parse_ints(s, "graphs", minimum=0, maximum=1),
             "1: an iteration captured once as a CUDA graph and replayed, where one GPU holds the corpus resident, "
             "takes its chunks in turn (G3; G4 with one chunk) and rebuilds A without CuPy's sort (not beyond K = "
             "1024 with a document over 4096 tokens), its phases then timed as one (graph); elsewhere, and with 0, "
             "every launch from the host, each phase timed (metric graphed says which; the CPU twins ignore it)",
             tune=True),
    )
    variants = tuple(Variant(name, doc, devices=("cpu", "gpu")) for name, doc in DOCS.items())
    reference = "G0"
    gpu_reference = "G3"  # G0's GPU run waits on the host (cupy.unique), G3's is the GPU's work
    phases = ("preprocess", "transfer", "sample", "rebuild", "overlapped", "reduce", "capture", "graph")
    metrics = (
        Metric("tokens_per_s", "tokens/s", better="higher", help="tokens x iterations / seconds"),
        Metric("final_kd_mean", "", help="mean non-zeros per row of A at the end (drives the sampling cost)"),
        Metric("kd_mean", "", per="iteration", help="mean non-zeros per row of A after the iteration"),
        Metric("chunks_used", "", help="chunks of documents, on all GPUs (the chunks asked for, or more for the memory "
               "budget)"),
        Metric("launches_per_iteration", "", help="GPU: the kernels and memsets an iteration issues from the host "
               "(the suite's own; CuPy's operations in G0-G2's rebuild by sorting are not counted, so that the "
               "floor stays a floor; a graph's: its launch, and its capture's once)"),
        Metric("graphed", "", help="GPU: 1 where the iterations were replayed as a CUDA graph (axis graphs)"),
        Metric("resident", "", help="1: every chunk on the device; 0: streamed from pinned host memory"),
        # Table 2's analogue: the bytes of the arrays the run allocated (where they live: the
        # device, or the host for a streamed corpus), beside what a dense A would take.
        Metric("bytes_b", "bytes", help="B and B^ (V x K, int32 and float32), per GPU"),
        Metric("bytes_structures", "bytes", help="the words' trees or alias tables, per GPU"),
        Metric("bytes_l", "bytes", help="the tokens (L): their documents, words, topics and the chunks' layout"),
        Metric("bytes_a", "bytes", help="A, sparse (GPU: by slot, a token's worth per token)"),
        Metric("bytes_a_dense", "bytes", help="A dense (D x K int32), as the paper counts it: computed, not allocated"),
        Metric("bytes_device", "bytes", help="GPU: the device memory the run held (CuPy's pools after the run, all "
               "GPUs)"),
    )
    plots = (Plot("saber-throughput-vs-k", "Tokens per second against K by stage", x="K", y="tokens_per_s",
                  logx=True),)
    sources = ("impls/saber",)
    paper = PAPER
    recipes = RECIPES  # saber-fit's sweeps among them
    claims = CLAIMS
    sanitizer_kernels = "saber_"  # the suite's own kernels: CuPy's scans report racecheck hazards of their design

    def defaults(self, backend: str) -> Defaults:
        return Defaults(repeats=3, warmup=1, note="CPU default: nytimes-synth at 100,000 tokens, K = 100 and 1000, "
                        "3 iterations, the numba twins")

    def check(self, points: list[dict]) -> None:
        check_gpus(points)
        for dataset, scale in dict.fromkeys((p["dataset"], p["scale"]) for p in points):
            corpus = cached_corpus(dataset, scale)
            for count, what in ((corpus.num_docs, "documents"), (corpus.vocab_size, "words in its vocabulary"),
                                (corpus.words.size, "tokens")):
                if count == 0:
                    raise BenchError(f"corpus {dataset} has no {what}: there is nothing to sample")
        for point in points:  # a budget too small for one chunk, before anything is allocated
            corpus = cached_corpus(point["dataset"], point["scale"])
            stream.chunks_for_budget(corpus.doc_ptr, corpus.vocab_size, point["K"], point["chunks"],
                                     point.get("workers", 1), point.get("memory", 0.0), point.get("gpus", 1))

    def prepare(self, point: dict) -> Workload:
        corpus = cached_corpus(point["dataset"], point["scale"])
        workers, gpus = point.get("workers", 1), point.get("gpus", 1)
        chunks, resident = stream.chunks_for_budget(corpus.doc_ptr, corpus.vocab_size, point["K"], point["chunks"],
                                                    workers, point.get("memory", 0.0), gpus)
        work = Workload(corpus.doc_ptr, corpus.words, corpus.vocab_size, point["K"], point["iterations"],
                        _layout(point["dataset"], point["scale"], chunks * gpus), workers, point.get("threads", 0),
                        bool(point.get("graphs", 1)))
        if point["backend"] == "gpu":
            work.corpus = stream.load(work.layout, work.vocabulary, resident, point.get("memory", 0.0), gpus)
        return work

    def run(self, work: Workload, variant: str, ctx) -> dict:
        metrics = iterate(work, variant, ctx, "gpu" if work.corpus else "cpu")[1]
        return {**metrics, "chunks_used": len(work.layout),
                "resident": int(work.corpus is None or work.corpus.device is not None),
                "bytes_a_dense": (work.doc_ptr.size - 1) * work.topics * 4}

    def derived(self, work: Workload, row: dict) -> dict:
        return {"tokens_per_s": work.tokens * work.iterations / row["seconds"]}

    def work(self, work: Workload, row: dict) -> Work:
        """An iteration's least traffic and its launches (the floor of each iteration, times
        the iterations): B read by n_k and by pre-processing, which zeroes it and writes B^ and
        the structures; B^ read for the words the corpus uses; each token's document, word,
        place in PDOW order and topic read, its topic written, and read again by the rebuild;
        A's non-zeros (at the end, the fewest) read by the E-step and written by the rebuild;
        the documents' bounds and counts. No multiply-add is counted: a draw's products number
        its document's non-zeros, which the pre-processing bound above dominates only late."""
        pdow, structure = STAGES[row["variant"]][:2]
        vocabulary, topics, tokens, documents = work.vocabulary, work.topics, work.tokens, work.doc_ptr.size - 1
        dense = vocabulary * topics * 4
        structures = vocabulary * (padded(topics) + level3_size(topics) + W + 1) * 4 if structure == "tree" else 2 * dense
        token_reads = (4 if pdow else 3) + 2  # doc_of, word, (by_word,) z written; then z and word by the rebuild
        non_zeros = row["final_kd_mean"] * documents
        footprint = (4 * dense + structures + work.used_words * topics * 4 + tokens * token_reads * 4
                     + non_zeros * 2 * 4 * 2 + documents * 3 * 4)
        return Work(footprint_bytes=footprint, launches=row["launches_per_iteration"], calls=work.iterations)

    def render_figures(self, df, series, meta: dict, outdir) -> list:
        from impls.saber import figures  # matplotlib: loaded only to draw

        return figures.render_figures(df, meta, outdir)

    def kernel_builds(self) -> list[tuple]:
        """saber.cu as gpu.py compiles it: bench.backend.raw_kernel's default options."""
        return [(gpu.KERNEL_SOURCE, KERNEL_OPTIONS)]

    # Verification: every stage's topics after the iterations, on its device, identical to
    # the CPU twin of its structure's (G0 for the alias table, G2 for the tree) from a fresh
    # seed; with the own topic left out (the tree stages), to G2's twin left out as well.
    verify_axes = (
        Axis("dataset", "tiny", parse_datasets, "catalogue name or path"),
        Axis("scale", "1", lambda s: parse_floats(s, "scale", 1e-6, 1.0), "shrink a synthetic corpus"),
        Axis("K", "1,33,1000", lambda s: parse_ints(s, "K", maximum=MAX_TOPICS), "number of topics",
             aliases=("k",)),
        Axis("iterations", "2", lambda s: parse_ints(s, "iterations"), "E- and M-steps"),
        Axis("chunks", "3", lambda s: parse_ints(s, "chunks"), "PDOW partitions of the documents"),
        Axis("workers", "2", lambda s: parse_ints(s, "workers", maximum=64), "G4's CUDA streams"),
        Axis("memory", "0", lambda s: parse_floats(s, "memory", 0.0), "GPU memory budget in GiB (0: none)"),
        Axis("threads", "0", _parse_threads, "threads per block of the GPU's sampling kernels (0: the suite's)"),
        GPUS_AXIS,
        Axis("graphs", "1", lambda s: parse_ints(s, "graphs", minimum=0, maximum=1),
             "1: G3's and one-chunk G4's iterations replayed as a CUDA graph where they can be; 0: launched from "
             "the host"),
        Axis("own", "counted", lambda s: parse_choices(s, OWN_TOPIC, "own"),
             "counted: ESCA's draw, each token's own topic in A, B and n_k; left-out: collapsed Gibbs's conditional "
             "(the tree stages G2-G4)"),
    )

    def skip(self, point: dict) -> str | None:
        if point["backend"] == "cpu" and point.get("gpus", 1) > 1:
            return "gpus shares the work among GPUs: the CPU twins run at gpus = 1 only"
        return None

    def skip_variant(self, point: dict, variant: str) -> str | None:
        if point.get("own") == "left-out" and STAGES[variant][1] != "tree":
            return f"{variant}'s alias table cannot leave the own topic out (no prefix sums)"
        return None

    def verify_case(self, point: dict, seed: int) -> dict:
        work = self.prepare(point)
        work.seed = seed % 2**32
        return {"work": work, "twins": {}, "without_own": point.get("own") == "left-out"}

    def output(self, case: dict, variant: str, device: str) -> dict:
        ctx = RunContext(device)
        with ctx.timed():
            topics = iterate(case["work"], variant, ctx, device, without_own=case["without_own"])[0]
        return {"variant": variant, "topics": topics}

    def agrees(self, case: dict, got: dict, alpha: float) -> tuple[bool, str]:
        twin = "G0" if STAGES[got["variant"]][1] == "alias" else "G2"
        if twin not in case["twins"]:
            case["twins"][twin] = self.output(case, twin, "cpu")["topics"]
        differ = int(np.count_nonzero(got["topics"] != case["twins"][twin]))
        return differ == 0, f"{differ} of {got['topics'].size} topics differ from those of the CPU twin {twin}"


@model.latest_only
def _layout(dataset: str, scale: float, chunks: int) -> list:
    """The chunks of a corpus, laid out once for every K of a sweep (738M tokens take a minute)."""
    corpus = cached_corpus(dataset, scale)
    return model.chunk_layout(corpus.doc_ptr, corpus.words, chunks)


def iterate(work: Workload, variant: str, ctx, device: str = "cpu", observe=stream.no_observation,
            without_own: bool = False) -> tuple[np.ndarray, dict]:
    """All the iterations of a stage from the seeded initial topics, on `device` (the GPU
    draws the twin's topics): z on the host, and the final kd_mean and the bytes of the
    arrays (metrics final_kd_mean and bytes_*). observe(iteration, b): values recorded
    beside kd_mean, untimed, from the counts B (iteration 0: the initial counts).
    without_own: each token's own topic left out of its draw (model.e_step; the tree stages
    G2-G4 alone)."""
    pdow, structure, ssc, asynchronous = STAGES[variant]
    if without_own:
        model.check_without_own(structure)
    if device == "gpu":
        z, metrics = stream.iterate(work.corpus, work.topics, work.iterations, structure, pdow, ssc,
                                    work.workers if asynchronous else 1, work.seed, ctx, work.threads, observe,
                                    without_own, work.graphs)
        return z, {**metrics, "bytes_l": work.corpus.bytes_of(gpu.ChunkArrays.LAYOUT + ("z",)),
                   "bytes_a": work.corpus.bytes_of(gpu.ChunkArrays.STATE[:3])}
    order = work.pdow if pdow else np.arange(work.tokens, dtype=np.int64)
    rebuild = model.count if ssc else model.count_by_sorting
    documents = work.doc_ptr.size - 1
    with ctx.untimed():
        z = model.initial_topics(work.tokens, work.topics, work.seed)
        counts = rebuild(work.doc_ptr, work.words, z, work.vocabulary, work.topics)
        initial = observe(0, counts.b)
    if initial:
        ctx.record(0, **initial)
    for iteration in range(work.iterations):
        with ctx.phase("preprocess"):
            bhat = model.b_hat(counts)
            structures = model.preprocess(bhat, structure)
        with ctx.phase("sample"):
            z = model.e_step(order, work.doc_of, work.words, counts, bhat, structures, work.seed, iteration,
                             z if without_own else None)
        with ctx.phase("rebuild"):
            counts = rebuild(work.doc_ptr, work.words, z, work.vocabulary, work.topics)
        with ctx.untimed():
            observed = observe(iteration + 1, counts.b)
        ctx.record(iteration + 1, kd_mean=counts.a_idx.size / documents, **observed)
    return z, {"final_kd_mean": counts.a_idx.size / documents, "bytes_b": counts.b.nbytes + bhat.nbytes,
               "bytes_structures": structures.nbytes,
               "bytes_l": sum(a.nbytes for a in (work.doc_ptr, work.doc_of, work.words, z, order)),
               "bytes_a": sum(a.nbytes for a in (counts.a_ptr, counts.a_idx, counts.a_val))}


SUITE = SaberSuite()
