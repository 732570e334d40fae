"""The `saber` suite: SaberLDA's sparsity-aware LDA (ESCA) by stage, G0 to G4, each a variant.
The CPU twins (numba, impls/saber/model.py) for every stage; on the GPU so far G0-G3
(impls/saber/gpu.py): the asynchronous workers (G4) come next.

A stage is (token order, per-word structure, how A is rebuilt):
G0 document order, alias table, one global sort; G1 PDOW (partition by document, order by
word), alias, sort; G2 PDOW, W-ary tree, sort; G3 PDOW, tree, segmented count (SSC); G4 as
G3 with asynchronous workers on the GPU (the same computation on the CPU). The topics do
not depend on the order (counter-based uniforms per token), so G0 and G1 draw the same
topics, and G2, G3 and G4 the same. Each iteration is timed by phase: preprocess (B^ and
the structures), sample (the E-step), rebuild (A and B from z).
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from bench.corpus import cached_corpus, is_synthetic, parse_datasets
from bench.errors import BenchError
from bench.specs import parse_floats, parse_ints
from bench.suite import Axis, Defaults, Metric, Plot, Suite, Variant
from bench.timing import RunContext
from impls.saber import figures, model
from impls.saber.structures import MAX_TOPICS

STAGES = {  # variant: (PDOW order, structure, rebuild by SSC)
    "G0": (False, "alias", False),
    "G1": (True, "alias", False),
    "G2": (True, "tree", False),
    "G3": (True, "tree", True),
    "G4": (True, "tree", True),
}
DOCS = {"G0": "document order, alias tables, counts by one global sort",
        "G1": "G0 + PDOW: tokens partitioned by document into chunks, ordered by word inside a chunk",
        "G2": "G1 with the W-ary tree (W = 32) instead of the alias table",
        "G3": "G2 + SSC: A rebuilt by a segmented count per document",
        "G4": "G3 + asynchronous workers (GPU); on the CPU the same computation as G3"}
SEED = 0
GPU_STAGES = ("G0", "G1", "G2", "G3")  # built on the GPU so far


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
    doc_of: np.ndarray
    vocabulary: int
    topics: int
    iterations: int
    pdow: np.ndarray  # token ids in PDOW order (the layout is prepared once, untimed)
    device: dict | None = None  # doc_ptr, words, doc_of and pdow on the GPU, for the GPU stages
    seed: int = SEED  # of the initial topics and of every draw

    @property
    def tokens(self) -> int:
        return int(self.words.size)


class SaberSuite(Suite):
    name = "saber"
    description = "SaberLDA's sparsity-aware LDA by stage (G0-G4): CPU twins, G0-G3 on the GPU so far"
    axes = (
        Axis("dataset", "nytimes-synth", parse_datasets, "catalogue name or path"),
        Axis("scale", _default_scale, lambda s: parse_floats(s, "scale", 1e-6, 1.0),
             "shrink a synthetic corpus (CPU default 0.001: 100,000 tokens of nytimes-synth)"),
        Axis("K", lambda backend, given: "100,1000", lambda s: parse_ints(s, "K", maximum=MAX_TOPICS),
             "number of topics (1 to 32,768: the W-ary tree's four levels)", aliases=("k",)),
        Axis("iterations", lambda backend, given: "3" if backend == "cpu" else "100",
             lambda s: parse_ints(s, "iterations"), "E- and M-steps per run"),
        Axis("chunks", "4", lambda s: parse_ints(s, "chunks"), "PDOW partitions of the documents", tune=True),
    )
    variants = tuple(Variant(name, doc, devices=("cpu", "gpu") if name in GPU_STAGES else ("cpu",))
                     for name, doc in DOCS.items())
    reference = "G0"
    phases = ("preprocess", "sample", "rebuild")
    metrics = (
        Metric("tokens_per_s", "tokens/s", better="higher", help="tokens x iterations / seconds"),
        Metric("final_kd_mean", "", help="mean non-zeros per row of A at the end (drives the sampling cost)"),
        Metric("kd_mean", "", per="iteration", help="mean non-zeros per row of A after the iteration"),
    )
    plots = (Plot("saber-throughput-vs-k", "Tokens per second against K by stage", x="K", y="tokens_per_s",
                  logx=True),)
    sources = ("impls/saber",)

    def defaults(self, backend: str) -> Defaults:
        return Defaults(repeats=3, warmup=1, note="CPU default: nytimes-synth at 100,000 tokens, K = 100 and 1000, "
                        "3 iterations, the numba twins")

    def skip_variant(self, point: dict, variant: str) -> str | None:
        if point["backend"] == "gpu" and variant not in GPU_STAGES:
            return "not on the GPU yet (its CPU twin at a GPU corpus's size would take minutes per iteration)"
        return None

    def check(self, points: list[dict]) -> None:
        for dataset, scale in dict.fromkeys((p["dataset"], p["scale"]) for p in points):
            corpus = cached_corpus(dataset, scale)
            for count, what in ((corpus.num_docs, "documents"), (corpus.vocab_size, "words in its vocabulary"),
                                (corpus.words.size, "tokens")):
                if count == 0:
                    raise BenchError(f"corpus {dataset} has no {what}: there is nothing to sample")

    def prepare(self, point: dict) -> Workload:
        corpus = cached_corpus(point["dataset"], point["scale"])
        doc_of = np.repeat(np.arange(corpus.num_docs, dtype=np.int32), corpus.lengths)
        work = Workload(corpus.doc_ptr, corpus.words, doc_of, corpus.vocab_size, point["K"],
                        point["iterations"], model.pdow_order(corpus.doc_ptr, corpus.words, point["chunks"]))
        if point["backend"] == "gpu":
            import cupy

            work.device = {name: cupy.asarray(getattr(work, name)) for name in ("doc_ptr", "words", "doc_of", "pdow")}
        return work

    def run(self, work: Workload, variant: str, ctx) -> dict:
        return {"final_kd_mean": iterate(work, variant, ctx, "gpu" if work.device else "cpu")[1]}

    def derived(self, work: Workload, row: dict) -> dict:
        return {"tokens_per_s": work.tokens * work.iterations / row["seconds"]}

    def render_figures(self, df, series, meta: dict, outdir) -> list:
        return figures.render_figures(df, meta, outdir)

    # Verification: every stage's topics after the iterations, on its device, identical to
    # the CPU twin of its structure's (G0 for the alias table, G2 for the tree) from a fresh seed.
    verify_axes = (
        Axis("dataset", "tiny", parse_datasets, "catalogue name or path"),
        Axis("scale", "1", lambda s: parse_floats(s, "scale", 1e-6, 1.0), "shrink a synthetic corpus"),
        Axis("K", "1,33,1000", lambda s: parse_ints(s, "K", maximum=MAX_TOPICS), "number of topics",
             aliases=("k",)),
        Axis("iterations", "2", lambda s: parse_ints(s, "iterations"), "E- and M-steps"),
        Axis("chunks", "3", lambda s: parse_ints(s, "chunks"), "PDOW partitions of the documents"),
    )

    def verify_case(self, point: dict, seed: int) -> dict:
        work = self.prepare(point)
        work.seed = seed % 2**32
        return {"work": work, "twins": {}}

    def output(self, case: dict, variant: str, device: str) -> dict:
        ctx = RunContext(device)
        with ctx.timed():
            topics = iterate(case["work"], variant, ctx, device)[0]
        return {"variant": variant, "topics": topics}

    def agrees(self, case: dict, got: dict, alpha: float) -> tuple[bool, str]:
        twin = "G0" if STAGES[got["variant"]][1] == "alias" else "G2"
        if twin not in case["twins"]:
            case["twins"][twin] = self.output(case, twin, "cpu")["topics"]
        differ = int(np.count_nonzero(got["topics"] != case["twins"][twin]))
        return differ == 0, f"{differ} of {got['topics'].size} topics differ from those of the CPU twin {twin}"


@dataclass
class _Device:
    """Where `iterate` runs: the module of its steps (the twin, `model`, or `gpu`, with the
    same signatures), the token arrays there, the stage's rebuild and the topics' transfers."""

    steps: object
    doc_of: object
    words: object
    pdow: object
    document_order: object
    rebuild: Callable
    upload: Callable
    download: Callable


def _cpu(work: Workload, ssc: bool) -> _Device:
    rebuild = model.count if ssc else model.count_by_sorting
    return _Device(model, work.doc_of, work.words, work.pdow, np.arange(work.tokens, dtype=np.int64),
                   lambda z: rebuild(work.doc_ptr, work.words, z, work.vocabulary, work.topics),
                   np.asarray, np.asarray)


def _gpu(work: Workload, ssc: bool) -> _Device:
    import cupy

    from impls.saber import gpu

    dev = work.device
    documents = work.doc_ptr.size - 1

    def rebuild(z):
        if ssc:
            return gpu.count(dev["doc_ptr"], dev["doc_of"], dev["words"], z, work.vocabulary, work.topics)
        return gpu.count_by_sorting(dev["doc_of"], dev["words"], z, documents, work.vocabulary, work.topics)

    return _Device(gpu, dev["doc_of"], dev["words"], dev["pdow"], cupy.arange(work.tokens, dtype=cupy.int64),
                   rebuild, cupy.asarray, cupy.asnumpy)


def iterate(work: Workload, variant: str, ctx, device: str = "cpu") -> tuple[np.ndarray, float]:
    """All the iterations of a stage from the seeded initial topics, on `device` (the GPU
    draws the twin's topics): (z on the host, final kd_mean)."""
    if device == "gpu" and variant not in GPU_STAGES:
        raise ValueError(f"{variant} is not on the GPU yet")
    pdow, structure, ssc = STAGES[variant]
    on = (_gpu if device == "gpu" else _cpu)(work, ssc)
    order = on.pdow if pdow else on.document_order
    documents = work.doc_ptr.size - 1
    with ctx.untimed():
        z = on.upload(model.initial_topics(work.tokens, work.topics, work.seed))
        counts = on.rebuild(z)
    for iteration in range(work.iterations):
        with ctx.phase("preprocess"):
            bhat = on.steps.b_hat(counts)
            structures = on.steps.preprocess(bhat, structure)
        with ctx.phase("sample"):
            z = on.steps.e_step(order, on.doc_of, on.words, counts, bhat, structures, work.seed, iteration)
        with ctx.phase("rebuild"):
            del bhat, structures, counts  # their memory is free for the new counts (V x K each)
            counts = on.rebuild(z)
        ctx.record(iteration + 1, kd_mean=counts.a_idx.size / documents)
    return on.download(z), counts.a_idx.size / documents


SUITE = SaberSuite()
