"""The `admodel` suites: the Poisson MAP ad-click model of the thesis.

`admodel`: one evaluation of the negative log posterior (op=objective), of its gradient
(op=gradient) or of both (op=both), on the CPU (numba, one thread as the thesis and all
threads as the fair peer) and on the GPU (the thesis's kernels and ours), per dataset
shape, layout (shuffled or sorted by material, then placement), precision and L1 policy
(__ldg against __ldcg: the thesis's L1 on/off, per load).

`admodel-fit`: the whole fit by L-BFGS from zero to the optimum, scipy's on the CPU
reference, scipy's on the GPU kernels (a host copy per evaluation), ours entirely on the
GPU and torch's on the same GPU function, with the objective per iteration.
"""

import os
from dataclasses import dataclass

import numpy as np

from bench.backend import to_host
from bench.errors import BenchError
from bench.specs import parse_choices, parse_floats, parse_ints
from bench.ceilings import Work
from bench.suite import ERROR_RESOLUTION, ERROR_TOLERANCE, Axis, Defaults, Metric, Suite, Variant
from impls.admodel import cpu, data
from impls.admodel.data import BYTES_PER_OBSERVATION
from impls.admodel.recipes import CLAIMS, PAPER, RECIPES

PRECISIONS = {"f64": np.float64, "f32": np.float32}
OPS = ("objective", "gradient", "both")
CACHE_POLICIES = ("ldg", "ldcg")
SOURCES = ("impls/admodel",)
CPU_SCALE = "0.015625"  # 1/64: sim 524,288 observations, real-like 212,808; a CPU sweep in a minute
# Which variants compute which op (CPU: one numba pass computes f, and the gradient if asked).
OP_VARIANTS = {"objective": ("cpu-serial", "cpu-parallel", "objective"),
               "gradient": ("cpu-serial", "cpu-parallel", "grad-atomic", "grad-block", "grad-warp"),
               "both": ("cpu-serial", "cpu-parallel", "two-pass", "fused", "fused-bucketed")}
CPU_VARIANTS = ("cpu-serial", "cpu-parallel")
GATHERED = 6 + 2 * 10  # parameter values read per observation: 6 effects and two factor rows of N = 10
EVALUATION_NOISE = 0.01  # theta where f and g are timed: the generating one plus N(0, 0.01^2)


def _scale(backend: str, given: dict) -> str:
    return "1" if backend == "gpu" else CPU_SCALE


DATASET = Axis("dataset", "sim,real-like", lambda s: parse_choices(s, data.SHAPES, "dataset"),
               "sim (2^25 observations, 125,001 parameters) or real-like (13.6M, 1.48M slots, 32,601 active)")
SCALE = Axis("scale", _scale, lambda s: parse_floats(s, "scale", 1e-6, 64.0),
             "observations as a fraction of the thesis's (CPU default 1/64, GPU 1)")
LAYOUT = Axis("layout", "shuffled,sorted", lambda s: parse_choices(s, data.LAYOUTS, "layout"),
              "observations in random order, or sorted by material, then placement")


def precision_axis(default: str) -> Axis:
    return Axis("precision", default, lambda s: parse_choices(s, PRECISIONS, "precision"),
                "type of theta, gradient and arithmetic (the CPU references are float64)")


def check_memory(points: list[dict]) -> None:
    """A one-line error before anything is allocated when a point cannot fit."""
    largest = max(points, key=lambda p: data.observations(p["dataset"], p["scale"]))
    observations = data.observations(largest["dataset"], largest["scale"])
    parameters = data.SHAPES[largest["dataset"]].parameters
    # Generating: the kept observations twice (shuffled and sorted) and 2^22-row temporaries.
    host = 2 * observations * BYTES_PER_OBSERVATION + (data.CHUNK * 400)
    available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    if host > available:
        raise BenchError(f"{largest['dataset']} at scale {largest['scale']:g} needs about {host / 2**30:.1f} GiB of "
                         f"host memory to generate; {available / 2**30:.1f} GiB are free: lower --scale")
    if largest["backend"] == "gpu":
        import cupy

        from impls.admodel import gpu

        need = gpu.device_bytes(observations, parameters, 8)
        free = cupy.cuda.runtime.memGetInfo()[0]
        if need > free:
            raise BenchError(f"{largest['dataset']} at scale {largest['scale']:g} needs about {need / 2**30:.1f} GiB "
                             f"on the GPU; {free / 2**30:.1f} GiB are free: lower --scale")


def _parse_block(spec) -> list[int]:
    """Blocks of whole warps: the kernels' shuffles and warp sums take every lane."""
    return parse_ints(spec, "block", minimum=32, maximum=512, multiple_of=32)


@dataclass
class Workload:
    data: data.Data
    device_data: object  # gpu.DeviceData, or None on a CPU
    bucketed: object  # the same sorted by material, then placement (fused-bucketed)
    setup_s: float  # seconds the bucketing took
    theta: np.ndarray  # float64, where f and g are evaluated
    device_theta: object  # cupy, of the point's precision
    reference: tuple[float, np.ndarray]  # f and gradient at theta, float64 (cpu-parallel)
    op: str
    cache_policy: str
    block: int


def _cpu_setting(point: dict) -> bool:
    """The one setting of the GPU-only axes at which the CPU references are measured."""
    return point["precision"] == "f64" and point["l1"] == "ldg" and point["block"] == 256


def _upload(work: Workload, precision: str, bucketed: bool) -> None:
    """The workload's observations and theta to the GPU, and, where fused-bucketed needs them,
    the observations bucketed (timed: setup_s)."""
    import cupy

    from impls.admodel import gpu
    from bench.timing import CudaClock

    work.device_data = gpu.upload(work.data)
    work.device_theta = cupy.asarray(work.theta, PRECISIONS[precision])
    if not bucketed:
        return
    clock = CudaClock()
    start = clock.mark()
    work.bucketed = gpu.bucket(work.device_data)
    stop = clock.mark()
    clock.wait(stop)
    work.setup_s = clock.between(start, stop)


def evaluate(work: Workload, variant: str):
    """(f or None, gradient or None) of one variant, on its device (not synchronised)."""
    op = work.op
    if variant in CPU_VARIANTS:
        return cpu.evaluate(work.data, work.theta, op != "objective", variant == "cpu-parallel")
    from impls.admodel import gpu

    args = (work.device_data, work.device_theta, work.cache_policy, work.block)
    if variant == "objective":
        return gpu.objective(*args), None
    if variant in gpu.GRADIENTS:
        return None, gpu.gradient(variant, *args)
    if variant == "fused-bucketed":
        return gpu.fused(work.bucketed, *args[1:])
    return gpu.two_pass(*args) if variant == "two-pass" else gpu.fused(*args)


def errors(f, grad, reference: tuple) -> dict:
    """Relative error of f, and of the gradient normwise (max |g - ref| / max |ref|)."""
    values = {}
    if f is not None:
        values["f_rel_error"] = abs(float(f) - reference[0]) / abs(reference[0])
    if grad is not None:
        grad = to_host(grad)
        values["grad_rel_error"] = float(np.abs(grad - reference[1]).max() / np.abs(reference[1]).max())
    return values


def evaluation_theta(d: data.Data) -> np.ndarray:
    rng = np.random.default_rng(1)
    return d.theta_true + EVALUATION_NOISE * rng.standard_normal(d.theta_true.size)


class AdmodelSuite(Suite):
    name = "admodel"
    description = ("the Poisson MAP ad-click model of the thesis: its objective and gradient on the CPU and the "
                   "GPU (the thesis's kernels, ours), by layout, precision and L1 policy")
    axes = (
        DATASET, SCALE, LAYOUT, precision_axis("f64,f32"),
        Axis("op", "objective,gradient,both", lambda s: parse_choices(s, OPS, "op"),
             "what one call computes: f, its gradient, or both"),
        Axis("l1", "ldg,ldcg", lambda s: parse_choices(s, CACHE_POLICIES, "l1"),
             "GPU loads cached in L1 (ldg) or in L2 only (ldcg: the thesis's L1 disabled)", tune=True),
        Axis("block", "256", _parse_block, "GPU threads per block (whole warps: a multiple of 32 up to 512)",
             tune=True),
    )
    variants = (
        Variant("cpu-serial", "numba, one thread, float64: the thesis's CPU reference", devices=("cpu",)),
        Variant("cpu-parallel", "numba on every core, a private gradient per thread: the fair CPU peer",
                devices=("cpu",)),
        Variant("objective", "the thesis's objective: a thread per observation, warp and block sums", devices=("gpu",)),
        Variant("grad-atomic", "the thesis's naive gradient: 5 + 2N atomicAdds per observation", devices=("gpu",)),
        Variant("grad-block", "the thesis's improved gradient: equal indices summed per block in shared memory "
                "(O(B^2)), one atomic each", devices=("gpu",)),
        Variant("grad-warp", "ours: lanes of a warp with equal indices combine (__match_any_sync), one atomic "
                "per distinct index; factor rows read and added a whole row per 10 lanes", devices=("gpu",)),
        Variant("two-pass", "f and gradient as the thesis: the objective kernel, then grad-atomic",
                devices=("gpu",)),
        Variant("fused", "ours: f and gradient in one pass over the observations (grad-warp's scatter)",
                devices=("gpu",)),
        Variant("fused-bucketed", "ours: fused on the observations sorted once by material, then placement, on "
                "the GPU (the sort's time is setup_s, not in seconds)", devices=("gpu",)),
    )
    reference = "cpu-serial"
    gpu_reference = "two-pass"
    paper = PAPER
    recipes = RECIPES  # admodel-fit's sweeps too (its recipe `fit`)
    claims = CLAIMS
    metrics = (
        Metric("obs_per_s", "obs/s", better="higher", help="observations / seconds"),
        Metric("gbps", "GB/s", better="higher", help="effective: 23 bytes of each observation and its 26 "
               "parameter values gathered, over seconds"),
        Metric("copy_frac", "", better="higher", help="GPU: gbps over the copy bandwidth of the repeat"),
        Metric("f_rel_error", "", gate="tolerance", tolerance=ERROR_TOLERANCE, resolution=ERROR_RESOLUTION, help="|f - f_ref| / |f_ref|, the reference cpu-parallel in float64"),
        Metric("grad_rel_error", "", gate="tolerance", tolerance=ERROR_TOLERANCE, resolution=ERROR_RESOLUTION, help="max |g - g_ref| / max |g_ref|"),
        Metric("setup_s", "s", help="fused-bucketed: the one sort of the observations on the GPU, before any call"),
    )
    sources = SOURCES

    def defaults(self, backend: str) -> Defaults:
        if backend == "gpu":
            # Kernels of a millisecond beside CPU references of a second: the mean to 2%, within 2 s.
            return Defaults(repeats=3, warmup=1, max_noise=0.02, budget_s=2.0, max_repeats=20)
        return Defaults(repeats=3, warmup=1, note="CPU default: scale 1/64, float64, the two numba references")

    def skip(self, point: dict) -> str | None:
        if point["backend"] == "cpu" and not _cpu_setting(point):
            return "the CPU references are float64 and have no L1 policy or block size"
        return None

    def skip_variant(self, point: dict, variant: str) -> str | None:
        if variant not in OP_VARIANTS[point["op"]]:
            return f"does not compute op={point['op']}"
        if variant in CPU_VARIANTS and not _cpu_setting(point):
            return "the CPU references run once per point: float64, l1=ldg, block=256"
        return None

    def check(self, points: list[dict]) -> None:
        check_memory(points)

    def prepare(self, point: dict) -> Workload:
        d = data.generate(point["dataset"], point["scale"], point["layout"])
        theta = evaluation_theta(d)
        reference = cpu.evaluate(d, theta, True, parallel=True)
        work = Workload(d, None, None, 0.0, theta, None, reference, point["op"], point["l1"], point["block"])
        if point["backend"] == "gpu":
            _upload(work, point["precision"], "fused-bucketed" in OP_VARIANTS[point["op"]])
        return work

    def run(self, work: Workload, variant: str, ctx) -> dict:
        f, grad = evaluate(work, variant)
        with ctx.untimed():
            return {**errors(f, grad, work.reference), **({"setup_s": work.setup_s} if variant == "fused-bucketed"
                                                           else {})}

    def derived(self, work: Workload, row: dict) -> dict:
        n, seconds = work.data.observations, row["seconds"]
        itemsize = 8 if row["device"] == "cpu" else work.device_theta.itemsize
        values = {"obs_per_s": n / seconds, "gbps": n * (BYTES_PER_OBSERVATION + GATHERED * itemsize) / seconds / 1e9}
        if row["copy_gbps"]:
            values["copy_frac"] = values["gbps"] / row["copy_gbps"]
        return values

    def work(self, work: Workload, row: dict) -> Work:
        """Each observation read once, theta read once and the gradient written once (where
        it is computed). The gathered parameter rows are theta's, read again from L1 or L2
        as often as a layout allows: only its first read counts."""
        theta = work.device_theta.nbytes
        return Work(footprint_bytes=work.data.observations * BYTES_PER_OBSERVATION + theta
                    + (0 if row["op"] == "objective" else theta), precision=row["precision"])

    # Verification: fresh data per seed, every variant against the float64 numpy reference.
    verify_axes = (
        Axis("dataset", "sim,real-like", lambda s: parse_choices(s, data.SHAPES, "dataset"), "data shape"),
        Axis("scale", "0.0005", lambda s: parse_floats(s, "scale", 1e-6, 64.0), "fraction of the thesis's size"),
        LAYOUT, precision_axis("f64,f32"),
        Axis("op", "objective,gradient,both", lambda s: parse_choices(s, OPS, "op"), "what is computed"),
        Axis("l1", "ldg,ldcg", lambda s: parse_choices(s, CACHE_POLICIES, "l1"), "GPU L1 policy"),
        Axis("block", "32,256", _parse_block, "GPU threads per block (a multiple of 32 up to 512)"),
    )

    def verify_skip(self, point: dict) -> str | None:
        return self.skip(point)

    def verify_case(self, point: dict, seed: int) -> dict:
        d = data.generate(point["dataset"], point["scale"], point["layout"], seed=seed)
        theta = evaluation_theta(d)
        return {**point, "data": d, "theta": theta, "reference": cpu.plain(d, theta),
                "bound": cpu.magnitudes(d, theta)}

    def output(self, case: dict, variant: str, device: str):
        work = Workload(case["data"], None, None, 0.0, case["theta"], None, case["reference"], case["op"], case["l1"],
                        case["block"])
        if device == "gpu":
            _upload(work, case["precision"], variant == "fused-bucketed")
        f, grad = evaluate(work, variant)
        if variant in OP_VARIANTS["objective"] and case["op"] != "objective":
            f = None  # the CPU references compute f beside the gradient: checked at op=objective
        return (None if f is None else float(f),
                None if grad is None else to_host(grad).astype(np.float64))

    def agrees(self, case: dict, got, alpha: float) -> tuple[bool, str]:
        """Each value within a bound on its rounding, relative to the sum of its terms'
        magnitudes (f and the gradient entries cancel: f is a small difference of the data
        part and the prior's constant). float64: 1e-12 of it. float32: (k + 32) u of it for
        k terms, Higham's bound for any order of summation (atomics) with 32 u for the
        terms themselves (log mu is a sum of 16, then exp and products)."""
        f, grad = got
        (f_ref, grad_ref), (f_mag, f_terms, g_mag, g_terms) = case["reference"], case["bound"]
        u = float(np.finfo(PRECISIONS[case["precision"]]).eps) / 2

        def bound(magnitude, terms):
            return (1e-12 if case["precision"] == "f64" else (terms + 32) * u) * magnitude

        details, ok = [], True
        if f is not None:
            ratio = abs(f - f_ref) / bound(f_mag, f_terms)
            ok &= ratio <= 1
            details.append(f"f off by {abs(f - f_ref) / f_mag:.1e} of its magnitude ({ratio:.2f} of its bound)")
        if grad is not None:
            if grad.shape != grad_ref.shape:
                return False, f"gradient of shape {grad.shape}, expected {grad_ref.shape}"
            ratio = np.abs(grad - grad_ref) / bound(g_mag, g_terms)
            worst = int(np.argmax(ratio))
            ok &= bool(np.all(ratio <= 1))
            details.append(f"gradient: {int(np.sum(ratio > 1))} of {grad.size} entries beyond their bound; worst "
                           f"[{worst}] at {ratio[worst]:.2f} of it")
        return ok, "; ".join(details)

    def render_figures(self, df, series, meta: dict, outdir) -> list:
        from impls.admodel import figures  # matplotlib: loaded only to draw

        return figures.render_evaluations(df, meta, outdir)

    def kernel_builds(self) -> list[tuple]:
        """kernels/admodel.cu with the options gpu.py compiles it with (raw_kernel's default)."""
        import inspect

        from bench.backend import raw_kernel
        from impls.admodel import gpu

        return [(gpu.KERNEL_SOURCE, inspect.signature(raw_kernel).parameters["options"].default)]


SUITE = AdmodelSuite()
