"""The `lda-kernels` suite: the draw-z step alone, on a corpus with random
normalised theta and phi, timed per launch and reported against its floor
(bench.ceilings: draw_work's bytes and operations over the GPU's ceilings,
measured in the same run)."""

from dataclasses import dataclass

import numpy as np

from bench.ceilings import Work
from bench.corpus import cached_corpus
from bench.specs import parse_choices, parse_ints
from bench.suite import Axis, Defaults, Plot, Suite
from impls.lda import drawz_cpu, model
from impls.lda.drawz_gpu import LOADS, STORAGES, TILED
from impls.lda.suite import DATASET, DRAWZ_VARIANTS, MAX_TOPICS, PRECISION, SCALE, SOURCES, DrawzSuite


@dataclass
class Workload:
    xp: object  # numpy or cupy
    doc_ptr: object
    words: object
    theta: object
    phi: object
    u: object
    z: object
    storage: str
    registers: int  # the GPU kernel's cap (0: none)
    loads: str  # how warpscan and pairscan load rows on the GPU
    counts: dict  # what the floor needs (_counts)

    @property
    def num_tokens(self) -> int:
        return int(self.words.size)


class LdaKernelSuite(DrawzSuite, Suite):
    name = "lda-kernels"
    description = "the draw-z step of the butterfly paper alone, per launch, against its floor"
    axes = (
        DATASET,
        SCALE,
        PRECISION,
        Axis("K", "256,512,1024", lambda s: parse_ints(s, "K", default_step=4, maximum=MAX_TOPICS),
             "number of topics", aliases=("k",)),
        Axis("storage", "auto", lambda s: parse_choices(s, STORAGES, "storage"),
             "GPU store of the per-lane arrays: auto (the variant's faster), local or global", tune=True),
        Axis("registers", "0", lambda s: parse_ints(s, "registers", minimum=0, maximum=255),
             "GPU: a cap on the kernel's registers per thread (NVRTC --maxrregcount; 0: none), registers traded "
             "for occupancy; segscan's kernels of 8 segments in f32 and 16 in f64 keep their own (96 and 160)",
             tune=True),
        Axis("loads", "auto", lambda s: parse_choices(s, LOADS, "loads"),
             "GPU, warpscan and pairscan: rows loaded one value a lane at a time (scalar), in batches of 16-byte "
             "vectors (vector), or by K (auto)", tune=True),
    )
    variants = DRAWZ_VARIANTS
    reference = "alg1"
    plots = (Plot("drawz-fraction-of-floor", "Draw-z alone: its floor (the binding ceiling's time) over its time",
                  x="K", y="floor_frac", panel="precision", logx=True),)
    sources = SOURCES

    def defaults(self, backend: str) -> Defaults:
        if backend == "gpu":
            # Launches of milliseconds: repeat until the mean is known to 0.5%, within 3 s a point.
            return Defaults(repeats=10, warmup=2, max_noise=0.005, budget_s=3.0)
        return Defaults(repeats=3, warmup=1)

    def skip(self, point: dict) -> str | None:
        if point["backend"] == "cpu" and point["storage"] != "auto":
            return "storage chooses between GPU memories: auto only on a CPU"
        if point["backend"] == "cpu" and point["registers"]:
            return "registers caps a GPU kernel's: 0 only on a CPU"
        if point["backend"] == "cpu" and point["loads"] != "auto":
            return "loads chooses between GPU kernels: auto only on a CPU"
        return None

    def skip_variant(self, point: dict, variant: str) -> str | None:
        # loads is no verification axis; the reference runs at every loads (bench check divides by it)
        if point.get("loads", "auto") != "auto" and variant not in (*TILED, self.reference):
            return "loads chooses between warpscan's and pairscan's kernels"
        return super().skip_variant(point, variant)

    def prepare(self, point: dict) -> Workload:
        padded = cached_corpus(point["dataset"], point["scale"]).padded(32)
        dtype = model.PRECISIONS[point["precision"]]
        rng = np.random.default_rng([0, point["K"]])
        K, M, V = point["K"], padded.num_docs, padded.vocab_size
        # Random, normalised weights: theta rows and phi columns (topics) sum to 1.
        theta = rng.random((M, K), dtype=dtype) + dtype(1e-3)
        theta /= theta.sum(axis=1, keepdims=True)
        phi = rng.random((V, K), dtype=dtype) + dtype(1e-3)
        phi /= phi.sum(axis=0, keepdims=True)
        arrays = (padded.doc_ptr.astype(np.int64), padded.words.astype(np.int32), theta, phi,
                  rng.random(padded.num_tokens, dtype=dtype), np.zeros(padded.num_tokens, np.int32))
        counts = _counts(*arrays[:2])
        if point["backend"] == "gpu":
            import cupy as xp

            arrays = tuple(xp.asarray(a) for a in arrays)
        else:
            xp = np
        return Workload(xp, *arrays, storage=point["storage"], registers=point["registers"],
                        loads=point["loads"], counts=counts)

    def run(self, work: Workload, variant: str, ctx) -> None:
        if ctx.device == "gpu":
            from impls.lda.drawz_gpu import draw_z_gpu

            draw_z_gpu(variant, work.doc_ptr, work.words, work.theta, work.phi, work.u, work.z, 32,
                       storage=work.storage, max_registers=work.registers, loads=work.loads)
        else:
            drawz_cpu.draw_z(variant, work.doc_ptr, work.words, work.theta, work.phi, work.u, work.z, 32)

    def work(self, work: Workload, row: dict) -> Work:
        return draw_work(work.counts, row["K"], work.theta.dtype.itemsize, row["precision"], row["variant"])


def _counts(doc_ptr: np.ndarray, words: np.ndarray) -> dict:
    """Tokens, documents with a token, words that occur, and runs: tokens whose word is not
    their predecessor's in the document (where pairscan computes a distribution)."""
    lengths = np.diff(doc_ptr)
    docs = np.repeat(np.arange(lengths.size), lengths)
    repeats = np.count_nonzero((words[1:] == words[:-1]) & (docs[1:] == docs[:-1]))
    return {"tokens": int(words.size), "docs": int(np.count_nonzero(lengths)), "words": int(np.unique(words).size),
            "runs": int(words.size - repeats)}


def draw_work(counts: dict, K: int, itemsize: int, precision: str, variant: str) -> Work:
    """What a launch of a dense draw touches and does at least: theta's rows of the
    documents and phi's rows of the words that occur, a word, a uniform and a topic a token,
    the documents' offsets; for each distribution (one a token; pairscan and segscan:
    one a run of a word) K products and K additions, each its own instruction of the FMA
    pipe (the variants round products and sums apart, as their CPU twins, so none is
    contracted into an FMA). Phi rows read again token after token are not counted: L1
    can serve a hot word's row from one document to the next."""
    distributions = counts["runs"] if variant in ("pairscan", "segscan") else counts["tokens"]
    return Work(footprint_bytes=(counts["docs"] + counts["words"]) * K * itemsize
                + counts["tokens"] * (4 + itemsize + 4) + (counts["docs"] + 1) * 8,
                fma=2 * distributions * K, precision=precision)


SUITE = LdaKernelSuite()
