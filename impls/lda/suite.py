"""The `lda` suite: the dense LDA application of the butterfly paper, timed
whole (as the paper does: complete runs of all iterations) and by phase."""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from bench.corpus import cached_corpus, catalogue, is_synthetic, parse_datasets
from bench.errors import BenchError
from bench.specs import parse_choices, parse_floats, parse_ints
from bench.suite import Axis, Defaults, Metric, Suite, Variant
from impls.lda import drawz_cpu, model
from impls.lda.recipes import CLAIMS, PAPER, RECIPES

WARP_SIZES = (8, 16, 32)
SOURCES = ("impls/lda",)


CPU_TOKENS = 30_727  # wiki-synth at scale 0.01: `bench sweep --k 4..1024` ends in minutes on 2 cores


def _default_scale(backend: str, given: dict) -> str:
    """On a CPU a synthetic corpus shrinks to about CPU_TOKENS tokens (wiki-synth to
    scale 0.01, tiny not at all); a real corpus has only its own size."""
    datasets = parse_datasets(given.get("dataset", "wiki-synth"))
    if backend != "cpu" or not all(is_synthetic(d) for d in datasets):
        return "1"
    return ",".join(dict.fromkeys(f"{min(1.0, CPU_TOKENS / catalogue()[d]['tokens']):.2g}" for d in datasets))


def warp_sizes(spec) -> list[int]:
    values = parse_ints(spec, "warp size W")
    if bad := [w for w in values if w not in WARP_SIZES]:
        raise BenchError(f"bad warp size W {bad[0]}: must be one of {', '.join(map(str, WARP_SIZES))}")
    return values


def gpu_warp_skip(point: dict) -> str | None:
    if point["backend"] == "gpu" and point["W"] != 32:
        return f"W = {point['W']}: the GPU kernels use the hardware warp, W = 32"
    return None


DATASET = Axis("dataset", "wiki-synth", parse_datasets, "catalogue name or path")
SCALE = Axis("scale", _default_scale, lambda s: parse_floats(s, "scale", 1e-6, 1.0),
             "shrink a synthetic corpus (CPU default: to about 30,000 tokens, 0.01 for wiki-synth; 1 on a GPU)")
PRECISION = Axis("precision", "f32,f64", lambda s: parse_choices(s, model.PRECISIONS, "precision"),
                 "type of theta, phi, products and partial sums")
MAX_TOPICS = 2**16  # dense LDA holds K values for every document and word: the paper's K end at 1024
K_AXIS = Axis("K", "4..1024", lambda s: parse_ints(s, "K", default_step=4, maximum=MAX_TOPICS),
              "number of topics; A..B steps by 4", aliases=("k",))
DRAWZ_VARIANTS = tuple(Variant(name, doc, devices=("cpu", "gpu")) for name, doc in drawz_cpu.VARIANTS.items())


@dataclass
class Prepared:
    """A point's workload on its backend and the backend's iteration."""

    work: object
    iterations: int
    iterate: Callable


class DrawzSuite:
    """What both lda suites (lda, lda-kernels) share: their corpora are loaded (and so checked) before a
    sweep starts; `bench verify` runs every draw-z variant on fresh dyadic problems, z
    identical to the CPU Algorithm 1 and a chi-square test against the exact probabilities."""

    paper = PAPER

    def skip_variant(self, point: dict, variant: str) -> str | None:
        itemsize = np.dtype(model.PRECISIONS[point["precision"]]).itemsize
        if variant == "segscan" and point["K"] > drawz_cpu.segscan_largest_k(itemsize):
            # one reason for every K, so that a wide sweep lists it once
            return (f"segscan holds K <= {drawz_cpu.segscan_largest_k(4)} in f32, "
                    f"{drawz_cpu.segscan_largest_k(8)} in f64")
        return None

    def check(self, points: list[dict]) -> None:
        for dataset, scale in dict.fromkeys((p["dataset"], p["scale"]) for p in points):
            cached_corpus(dataset, scale)

    def kernel_builds(self) -> list[tuple]:
        """drawz.cu as drawz_gpu.kernel compiles it (without a register cap)."""
        from impls.lda import drawz_gpu

        return [(drawz_gpu.KERNEL_SOURCE, ("-std=c++17", f"-DDRAWZ_KMAX_LOCAL={drawz_gpu.KMAX_LOCAL}"))]

    verify_axes = (
        Axis("K", "1..70", lambda s: parse_ints(s, "K", maximum=MAX_TOPICS), "every K of A..B", aliases=("k",)),
        Axis("W", "32", warp_sizes, "warp size (8, 16 or 32 on a CPU)", aliases=("warp",)),
        PRECISION,
    )

    def verify_skip(self, point: dict) -> str | None:
        return gpu_warp_skip(point)

    def verify_case(self, point: dict, seed: int):
        from impls.lda import verify  # scipy.stats: loaded only to verify

        return verify.make_case(point["K"], point["W"], point["precision"], seed)

    def output(self, case, variant: str, device: str):
        from impls.lda import verify

        draw = verify.draw_on_gpu if device == "gpu" else drawz_cpu.draw_z
        return verify.run_variant(case, variant, draw)

    def agrees(self, case, got, alpha: float) -> tuple[bool, str]:
        from impls.lda import verify

        return verify.agrees(case, got, alpha)


class LdaSuite(DrawzSuite, Suite):
    name = "lda"
    description = "dense LDA Gibbs sampler of the butterfly paper (Algorithms 1, 4, 7), whole application"
    axes = (
        DATASET,
        SCALE,
        Axis("update", "mfm", lambda s: parse_choices(s, model.UPDATES, "update"),
             "mfm (mean-for-mode) or dirichlet (sampled theta, phi)"),
        Axis("W", "32", warp_sizes, "warp size (8, 16 or 32 on a CPU; 32 on a GPU)", aliases=("warp",)),
        PRECISION,
        K_AXIS,
        Axis("iterations", lambda backend, given: "100" if backend == "gpu" else "1",
             lambda s: parse_ints(s, "iterations"), "iterations per timed run (default 1 on a CPU, 100 on a GPU)"),
    )
    variants = DRAWZ_VARIANTS
    default_variants = ("alg1", "alg4", "alg7")
    reference = "alg1"
    phases = model.PHASES
    metrics = (
        Metric("tokens", "tokens", help="tokens in the padded corpus"),
        Metric("tokens_per_s", "tokens/s", better="higher", help="tokens x iterations / seconds"),
    )
    sources = SOURCES
    recipes = RECIPES  # lda-kernels' sweeps are sweeps of these
    claims = CLAIMS

    def defaults(self, backend: str) -> Defaults:
        if backend == "gpu":
            return Defaults(repeats=5, warmup=1, note="GPU default: the paper's settings, wiki-synth, 100 "
                            "iterations, 5 repeats (hours for K = 4..1024: use --iterations and --repeats)")
        return Defaults(repeats=3, warmup=1, note="CPU default: wiki-synth at scale 0.01 (436 documents, "
                        "30,727 tokens), 1 iteration, 3 repeats")

    def kernel_builds(self) -> list[tuple]:
        """The draw-z kernels, and counts.cu as model_gpu compiles it (raw_kernel's default options)."""
        from impls.lda import model_gpu

        return [*super().kernel_builds(), (model_gpu.COUNTS_SOURCE, ("-std=c++17",))]

    def skip(self, point: dict) -> str | None:
        if point["scale"] != 1 and not is_synthetic(point["dataset"]):
            return f"{point['dataset']} is a real corpus: scale {point['scale']:g} applies to synthetic corpora only"
        return gpu_warp_skip(point)

    def prepare(self, point: dict) -> Prepared:
        work = model.make_workload(cached_corpus(point["dataset"], point["scale"]), point["K"], point["W"],
                                   point["precision"], point["update"])
        if point["backend"] == "gpu":
            from impls.lda import model_gpu

            return Prepared(model_gpu.to_gpu(work), point["iterations"], model_gpu.iterate)
        return Prepared(work, point["iterations"], model.iterate)

    def run(self, prepared: Prepared, variant: str, ctx) -> None:
        prepared.iterate(prepared.work, prepared.work.fresh_state(), variant, prepared.iterations, ctx)

    def derived(self, prepared: Prepared, row: dict) -> dict:
        work, iterations = prepared.work, prepared.iterations
        return {"tokens": work.num_tokens, "tokens_per_s": work.num_tokens * iterations / row["seconds"]}

    def render_figures(self, df, series, meta: dict, outdir) -> list:
        from impls.lda import figures  # matplotlib: loaded only to draw

        return figures.render_figures(df, meta, outdir)


SUITE = LdaSuite()
