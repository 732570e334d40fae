"""The `lda` suite: the dense LDA application of the butterfly paper, timed
whole (as the paper does: complete runs of all iterations) and by phase."""

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from bench.corpus import CorpusError, catalogue, load_corpus
from bench.errors import BenchError
from bench.kspec import parse_k, parse_list
from bench.suite import SweepDefaults, Suite
from bench.timing import copy_bandwidth_gbps
from impls.lda import drawz_cpu, figures, model

WARP_SIZES = (8, 16, 32)

# The CPU default is sized so `bench sweep --k 4..1024` (512 points, 1,536 variant runs with both
# precisions and three variants) ends in under 10 minutes on 2 cores; the GPU
# default is the paper's: the whole corpus, 100 iterations, 5 repeats.
CPU_DEFAULTS = SweepDefaults(
    options={"k": "4..1024", "precision": "f32,f64", "dataset": "wiki-synth", "scale": 0.01,
             "update": "mfm", "W": 32, "iterations": 1},
    variants=("alg1", "alg4", "alg7"), repeats=3, warmup=1,
    note="CPU default: wiki-synth at scale 0.01 (436 documents, 30,727 tokens), 1 iteration, 3 repeats",
)
GPU_DEFAULTS = SweepDefaults(
    options={"k": "4..1024", "precision": "f32,f64", "dataset": "wiki-synth", "scale": 1.0,
             "update": "mfm", "W": 32, "iterations": 100},
    variants=("alg1", "alg4", "alg7"), repeats=5, warmup=1,
    note="GPU default: the paper's settings, wiki-synth, 100 iterations, 5 repeats "
         "(hours for K = 4..1024: use --iterations and --repeats to fit a time budget)",
)


@dataclass
class Prepared:
    """A point's workload on its backend, the backend's iteration, and (GPU only)
    the device-to-device copy bandwidth measured when it was prepared."""

    work: object
    iterations: int
    iterate: Callable
    copy_gbps: float | None = None


@lru_cache(maxsize=4)
def _corpus(dataset: str, scale: float):
    try:
        return load_corpus(dataset, scale=scale)
    except CorpusError as error:
        raise BenchError(str(error)) from error


class LdaSuite(Suite):
    name = "lda"
    description = "dense LDA Gibbs sampler of the butterfly paper (Algorithms 1, 4, 7)"
    variants = drawz_cpu.VARIANTS
    reference_variant = "alg1"
    phases = model.PHASES
    backends = ("cpu", "gpu")

    def defaults(self, backend: str) -> SweepDefaults:
        return GPU_DEFAULTS if backend == "gpu" else CPU_DEFAULTS

    def points(self, options: dict, backend: str) -> list[dict]:
        chosen = {**self.defaults(backend).options, **{k: v for k, v in options.items() if v is not None}}
        dataset = str(chosen["dataset"])
        if dataset not in catalogue() and not Path(dataset).exists():
            raise BenchError(f"unknown dataset {dataset!r}; known: {', '.join(catalogue())} (or a path)")
        scale = float(chosen["scale"])
        if not 0 < scale <= 1:
            raise BenchError(f"--scale must be in (0, 1], got {scale}")
        W = int(chosen["W"])
        if W not in WARP_SIZES:
            raise BenchError(f"--warp must be one of {', '.join(map(str, WARP_SIZES))}, got {W}")
        if backend == "gpu" and W != 32:
            raise BenchError(f"--warp {W}: the GPU kernels use the hardware warp, W = 32")
        iterations = int(chosen["iterations"])
        if iterations < 1:
            raise BenchError(f"--iterations must be >= 1, got {iterations}")
        updates = parse_list(chosen["update"], model.UPDATES, "update")
        precisions = parse_list(chosen["precision"], model.PRECISIONS, "precision")
        return [
            {"suite": self.name, "backend": backend, "dataset": dataset, "scale": scale, "update": update,
             "W": W, "precision": precision, "K": K, "iterations": iterations}
            for update in updates for precision in precisions for K in parse_k(chosen["k"])
        ]

    def prepare(self, point: dict) -> "Prepared":
        corpus = _corpus(point["dataset"], point["scale"])
        work = model.make_workload(corpus, point["K"], point["W"], point["precision"], point["update"])
        if point["backend"] == "gpu":
            from impls.lda import model_gpu

            # The floor of the draw: one phi row per token, against a copy measured now.
            return Prepared(model_gpu.to_gpu(work), point["iterations"], model_gpu.iterate, copy_bandwidth_gbps())
        return Prepared(work, point["iterations"], model.iterate)

    def measure(self, prepared: "Prepared", variant: str, timer) -> dict:
        work, iterations = prepared.work, prepared.iterations
        state = work.fresh_state()
        with timer.run():
            prepared.iterate(work, state, variant, iterations, timer)
        extra = {"tokens": work.num_tokens, "tokens_per_s": work.num_tokens * iterations / timer.seconds}
        if prepared.copy_gbps is not None:
            phi_bytes = work.num_tokens * work.host.K * work.host.dtype().itemsize * iterations
            draw_gbps = phi_bytes / timer.phases["draw_z"] / 1e9
            extra.update(copy_gbps=prepared.copy_gbps, draw_z_gbps=draw_gbps,
                         draw_z_frac=draw_gbps / prepared.copy_gbps)
        return extra

    def render_figures(self, df, meta: dict, outdir) -> list:
        return figures.render_figures(df, meta, outdir)


SUITE = LdaSuite()
