"""The `sumrv` suite: the distribution of x + y for discrete x (length m) and y (length n),
a convolution of two probability vectors, over a batch of pairs, in linear or log space.
The blog post's skew-diagonal warp kernel made correct (with atomics, and without:
bit-reproducible), a naive kernel, ours (strip), and the peers a user would call
instead (numpy, cupy.convolve, cuFFT, cuDNN), each reported against its floor
(bench.ceilings) and, in linear space, the FMA peak of its precision, both measured in
the same process."""

from dataclasses import dataclass

import numpy as np

from bench.ceilings import Work
from bench.specs import parse_choices, parse_ints
from bench.suite import ERROR_RESOLUTION, ERROR_TOLERANCE, Axis, Defaults, Label, Metric, Suite, Variant
from impls.sumrv import cpu, gpu
from impls.sumrv.recipes import CLAIMS, RECIPES

PRECISIONS = {"f32": np.float32, "f64": np.float64}
SPACES = ("lin", "log")
INPUTS = ("dyadic", "random", "tiny")
CPU_TERMS = {"numpy": 1 << 26, "twin": 1 << 22}  # batch x m x n beyond which a CPU variant is left out
CUPY_BATCH = 256  # cupy-convolve is a Python loop of one call per pair: its cost is linear in the batch
# On a GPU a timed run makes several calls back to back, as a caller in a loop does, so
# that the ~15 us Python and launch cost of a call overlaps the previous call's kernel, and
# the first call's start after the repeat's calibration copy (cold caches: 25-50 us at
# m = n = 1024, batch 4096 on an H200) is shared by several: as many as keep
# batch x m x n x calls near this, 1 to MAX_CALLS. At most 100: a call that is its host's
# 15-30 us (the small shapes) moved by up to 30% between runs of 20 calls (H200), more than
# the 5% by which auto is judged. On a CPU, one call.
CALL_TERMS, MAX_CALLS = 1 << 35, 100
CHECKED_TERMS = 1 << 27  # the error metric checks the first pairs, up to this many terms (at least one pair)
KERNELS = ("naive", "skewdiag", "skewdiag-det", "strip")


def componentwise(variant: str, log: bool) -> bool:
    """Whether a variant's error is bounded per output (and exact on dyadic inputs): our
    kernels, and numpy in linear space. FFT, the libraries that may choose it, and the
    peers' per-vector max shift in log space are bounded relative to the largest output."""
    return variant in KERNELS or (variant == "numpy" and not log)


def _sizes(name: str):
    def parse(spec: str) -> list[int]:
        return parse_ints(spec, name, maximum=1 << 14)
    return parse


def _batches(spec: str) -> list[int]:
    return parse_ints(spec, "batch", maximum=1 << 16)


PRECISION = Axis("precision", "f32,f64", lambda s: parse_choices(s, PRECISIONS, "precision"),
                 "type of the inputs, products and sums")
SPACE = Axis("space", "lin", lambda s: parse_choices(s, SPACES, "space"),
             "lin: probabilities; log: log-probabilities, max-shifted log-sum-exp per output")


def _default_sizes(backend: str, given: dict) -> str:
    return "32,256,1024,4096" if backend == "gpu" else "32,256,1000"


@dataclass
class Workload:
    p: object  # [batch, m], numpy or cupy
    q: object  # [batch, n]
    host_p: np.ndarray
    host_q: np.ndarray
    log: bool
    reference: np.ndarray  # float64, of the first `checked` pairs
    calls: int  # back to back in a timed run

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.host_p.shape[0], self.host_p.shape[1], self.host_q.shape[1]


def make_inputs(batch: int, m: int, n: int, precision: str, kind: str, seed) -> tuple[np.ndarray, np.ndarray]:
    """p [batch, m], q [batch, n] of the precision's dtype.
    dyadic: integers 0..15 over 16 and over 8 (linear space; every product and partial sum
            up to m, n = 2^14 is exact in float32);
    random: probability vectors (linear) or their logs (log space);
    tiny:   log-probabilities between -745 and -845, below float64's smallest number
            (1e-324), with a few zero probabilities (-inf): linear space cannot hold them."""
    rng = np.random.default_rng(seed)
    dtype = PRECISIONS[precision]
    if kind == "dyadic":
        return ((rng.integers(0, 16, (batch, m)) / 16).astype(dtype),
                (rng.integers(0, 16, (batch, n)) / 8).astype(dtype))
    vectors = []
    for size in (m, n):
        if kind == "random":
            v = rng.random((batch, size)) + 1e-3
            vectors.append(v / v.sum(axis=1, keepdims=True))
        else:
            v = -745 - 100 * rng.random((batch, size))
            v[rng.random((batch, size)) < 0.05] = -np.inf
            vectors.append(v)
    return tuple(v.astype(dtype) for v in vectors)


def _log_inputs(p: np.ndarray, q: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    if kind == "tiny":
        return p, q
    with np.errstate(divide="ignore"):
        return np.log(p), np.log(q)


def relative_errors(got: np.ndarray, reference: np.ndarray, log: bool) -> np.ndarray:
    """Per output, |got - ref| / |ref| of the probabilities (log space: |expm1(got - ref)|;
    both -inf is 0, one -inf is 1); NaN counts as inf."""
    got, reference = np.asarray(got, np.float64), np.asarray(reference, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        if log:
            errors = np.abs(np.expm1(got - reference))
            errors[(got == -np.inf) & (reference == -np.inf)] = 0.0
        else:
            errors = np.abs(got - reference) / np.abs(reference)
            errors[(got == reference)] = 0.0
    return np.nan_to_num(errors, nan=np.inf)


def log_errors(got: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Per output, |got - ref| of log-probabilities, the measure of the log-space bound of
    `tolerance` (both -inf is 0, one -inf is inf; NaN counts as inf)."""
    got, reference = np.asarray(got, np.float64), np.asarray(reference, np.float64)
    with np.errstate(invalid="ignore"):  # -inf - -inf, set to 0 below
        errors = np.abs(got - reference)
    errors[(got == -np.inf) & (reference == -np.inf)] = 0.0
    return np.nan_to_num(errors, nan=np.inf)


def normwise_errors(got: np.ndarray, reference: np.ndarray, log: bool) -> np.ndarray:
    """Per pair, max |got - ref| over max |ref| of the probabilities (log space: both
    scaled by exp(-max ref), so nothing underflows)."""
    got, reference = np.asarray(got, np.float64), np.asarray(reference, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        if log:
            top = np.nan_to_num(reference.max(axis=1, keepdims=True), neginf=0.0)
            got, reference = np.exp(got - top), np.exp(reference - top)
        scale = np.abs(reference).max(axis=1)
        errors = np.abs(got - reference).max(axis=1) / np.where(scale > 0, scale, 1)
    return np.nan_to_num(errors, nan=np.inf)


def tolerance(precision: str, m: int, n: int, reference: np.ndarray, log: bool, componentwise: bool):
    """The stated bound on a variant's error: per output (an array in log space) when
    componentwise, else one number for normwise_errors. u is the precision's unit roundoff,
    k = min(m, n) the terms of an output.

    Linear, componentwise: the terms are positive, so any order of summation (FMA or not)
    is within gamma_{k+1} ~ (k + 1) u of the sum (Higham, Thm 3.1): relative_errors <= that.
    Log, componentwise, in absolute terms on r_i: each term a_j + b_{i-j} - c_i carries about
    2 |r_i| u, its exp at most 2 + 1.16 |x| ulp (CUDA's __expf; e^x |x| <= 1/e), the sum k u
    more, the final log |r_i| u, and each of the up to 2 k / 32 sequential log-adds of the
    atomic kernel |r_i| u: ((3 + k / 16) |r_i| + 4 k + 8) u.
    Normwise (FFT, the libraries that may use it, and the peers' per-vector max shift in
    log space): 16 u log2(m + n) of the largest output, plus in log space the rounding of
    the shift added back, 4 max |r| u."""
    u = float(np.finfo(PRECISIONS[precision]).eps) / 2
    k = min(m, n)
    finite = np.abs(np.nan_to_num(np.asarray(reference, np.float64), neginf=0.0))
    if not componentwise:
        return 16 * u * np.log2(m + n + 1) + (4 * float(finite.max(initial=0)) * u if log else 0.0)
    if not log:
        return 1.01 * (k + 1) * u
    return ((3 + k / 16) * finite + 4 * k + 8) * u


class SumrvSuite(Suite):
    name = "sumrv"
    description = ("distribution of a sum of two discrete random variables (a convolution), batched, linear "
                   "or log space: the blog post's skew-diagonal kernel fixed, ours, and numpy/cupy/cuFFT/cuDNN")
    axes = (
        Axis("m", _default_sizes, _sizes("m"), "length of p (1 to 2^14)"),
        Axis("n", _default_sizes, _sizes("n"), "length of q (1 to 2^14)"),
        Axis("batch", lambda backend, given: "1,4096" if backend == "gpu" else "1,16", _batches,
             "pairs per call (1 to 2^16)"),
        PRECISION,
        SPACE,
    )
    variants = (
        Variant("numpy", "numpy.convolve per pair (log: per-vector max shift, exp, convolve, log)", peer=True),
        Variant("cupy-convolve", "cupy.convolve per pair (its method 'auto': direct or FFT)", devices=("gpu",),
                peer=True),
        Variant("fft", "batched real FFT through cupy.fft (cuFFT), zero-padded to a fast length",
                devices=("gpu",), peer=True),
        Variant("torch-conv1d", "cuDNN through torch.nn.functional.conv1d, a group per pair, TF32 off",
                devices=("gpu",), peer=True, needs=("torch",)),
        Variant("naive", "one thread per output element", devices=("gpu",)),
        Variant("skewdiag", "the post's 32 x 32 skew-diagonal warp kernel, its bugs fixed, atomics into r "
                "(CPU: its numba twin, lanes emulated)", devices=("cpu", "gpu")),
        Variant("skewdiag-det", "the same tiles without atomics: diagonals to a buffer summed in a fixed order "
                "(bit-reproducible; CPU: its twin)", devices=("cpu", "gpu")),
        Variant("strip", "ours: a strip of outputs per warp, p and q staged in its shared memory, 4-16 outputs per "
                "thread in registers, j split when a batch is too small to fill the GPU; log space: a shift per pair "
                "where no term can underflow, per output elsewhere", devices=("gpu",)),
        Variant("fftconv", "ours, around cuFFT: the fft peer's transforms with one pad kernel for p and q, one "
                "forward transform for both, the product scaled in place, plans kept (log space: the peer's shift)",
                devices=("gpu",)),
        Variant("auto", "ours: the fastest of strip, naive, skewdiag-det and (linear space) fftconv for the shape, "
                "strides, precision and space, timed on this GPU at the first call with such inputs; its launches "
                "planned then, kept and replayed", devices=("gpu",)),
    )
    reference = "numpy"
    gpu_reference = "naive"
    metrics = (
        Metric("calls", "", help="calls back to back in the timed run (GPU: 1 to 100, after one untimed call; they "
               "hide the launch cost)"),
        Metric("call_s", "s", help="seconds of one call: seconds / calls; every rate below is per call"),
        Metric("pairs_per_s", "pairs/s", better="higher", help="batch / call_s"),
        Metric("gflops", "GFLOP/s", better="higher", help="2 m n batch / call_s (log space: 2 per term too)"),
        Metric("gbps", "GB/s", better="higher", help="bytes of p, q and r / call_s"),
        Metric("peak_frac", "", better="higher", help="GPU, linear space: gflops over the FMA peak of the "
               "precision (fma_gflops, measured in the same process); log space has none: its exps and "
               "logs are no multiply-adds, and floor_frac bounds it"),
        Metric("copy_frac", "", better="higher", help="GPU: gbps over the copy bandwidth of the repeat"),
        Metric("max_rel_error", "", gate="tolerance", tolerance=ERROR_TOLERANCE, resolution=ERROR_RESOLUTION,
               help="largest relative error of an output probability against the float64 "
               "reference (first pairs of the batch)"),
    )
    labels = (Label("auto_choice", help="auto (GPU): the candidate it chose and ran at this shape, precision and "
                    "space (strip, naive, skewdiag-det or fftconv), timed at its first call in the process"),)
    sources = ("impls/sumrv",)
    paper = ("Fast Enumeration of Sums of Discrete Random Variables: A CUDA kernel, Lawrence Murray, blog post, "
             "February 2023")
    recipes = RECIPES
    claims = CLAIMS

    verify_axes = (
        Axis("m", "1..70", _sizes("m"), "length of p"),
        Axis("n", "1..70", _sizes("n"), "length of q"),
        Axis("batch", "3", _batches, "pairs per case"),
        PRECISION,
        Axis("space", "lin,log", lambda s: parse_choices(s, SPACES, "space"), "linear or log space"),
        Axis("inputs", "dyadic,random,tiny", lambda s: parse_choices(s, INPUTS, "inputs"),
             "dyadic (exact: linear only), random, tiny (log only: below float64's range)"),
    )

    def defaults(self, backend: str) -> Defaults:
        if backend == "gpu":
            # Kernels of microseconds to milliseconds: repeat until the mean is known to 2%, within 1 s
            # and 30 repeats (launch-bound points at batch 1 would otherwise take a thousand rows each).
            return Defaults(repeats=5, warmup=2, max_noise=0.02, budget_s=1.0, max_repeats=30)
        return Defaults(repeats=3, warmup=1, note="CPU default: m, n in 32, 256, 1000, batch 1 and 16, "
                        "numpy and the skew-diagonal twins")

    def skip(self, point: dict) -> str | None:
        if point["batch"] * (point["m"] + point["n"]) > gpu.FFT_MAX_VALUES:
            return "batch x (m + n) > 2^29 values: the FFT peer's buffers outgrow an 80 GB GPU"
        return None

    def skip_variant(self, point: dict, variant: str) -> str | None:
        terms = point["batch"] * point["m"] * point["n"]
        if variant == "numpy" and terms > CPU_TERMS["numpy"]:  # numpy always runs on the CPU
            return "numpy on a CPU beyond batch x m x n = 2^26 (a second per call)"
        if point["backend"] == "cpu" and variant != "numpy" and terms > CPU_TERMS["twin"]:
            return "the numba twins emulate every lane: beyond batch x m x n = 2^22 on a CPU"
        if variant == "cupy-convolve" and point["batch"] > CUPY_BATCH:
            return f"cupy-convolve loops over pairs in Python: batch > {CUPY_BATCH}"
        return None

    def prepare(self, point: dict) -> Workload:
        batch, m, n, log = point["batch"], point["m"], point["n"], point["space"] == "log"
        p, q = make_inputs(batch, m, n, point["precision"], "random", [m, n, batch])
        if log:
            p, q = _log_inputs(p, q, "random")
        checked = max(1, min(batch, CHECKED_TERMS // (m * n)))
        reference = cpu.reference(p[:checked], q[:checked], log)
        if point["backend"] != "gpu":
            return Workload(p, q, p, q, log, reference, 1)
        import cupy

        calls = gpu.loop_calls(batch * m * n, CALL_TERMS, 1, MAX_CALLS)
        return Workload(cupy.asarray(p), cupy.asarray(q), p, q, log, reference, calls)

    def run(self, work: Workload, variant: str, ctx) -> dict:
        if ctx.device == "gpu":
            def call():
                return gpu.convolve(variant, work.p, work.q, work.log)
            # One call untimed first, so that the timed ones follow a call of their own, as in a
            # caller's loop: the first call after another variant's kernels took up to 1.3x as long
            # as after its own (fftconv at m = n = 4096, batch 4096, after skewdiag-det or naive; an
            # H200), noise of 7-20% in a timed run of one call (the large shapes).
            with ctx.untimed():
                call()
        else:
            def call():
                return cpu.convolve(variant, work.host_p, work.host_q, work.log)
        for _ in range(work.calls):
            r = call()
        with ctx.untimed():
            checked = work.reference.shape[0]
            got = r[:checked].get() if ctx.device == "gpu" else r[:checked]
            error = float(relative_errors(got, work.reference, work.log).max())
        values = {"max_rel_error": error, "calls": work.calls}
        if variant == "auto":  # what a caller would run at this shape: the method auto timed fastest
            values["auto_choice"] = gpu.auto_choice(work.p, work.q, work.log)
        return values

    def derived(self, work: Workload, row: dict) -> dict:
        batch, m, n = work.shape
        seconds = row["seconds"] / work.calls
        values = {"call_s": seconds, "pairs_per_s": batch / seconds, "gflops": 2 * m * n * batch / seconds / 1e9,
                  "gbps": batch * (2 * (m + n) - 1) * work.host_p.itemsize / seconds / 1e9}
        if row["device"] == "gpu":
            # fma_gflops: the FMA peak the ceilings measured in this process (none under bench profile)
            fma_gflops = row.get("fma_gflops")
            values["peak_frac"] = values["gflops"] / fma_gflops if fma_gflops and not work.log else None
            values["copy_frac"] = values["gbps"] / row["copy_gbps"] if row["copy_gbps"] else None
        return values

    def work(self, work: Workload, row: dict) -> Work:
        """Each call reads p and q and writes r. A direct kernel (ours, and the naive one)
        makes a multiply-add a term (in log space too: the shift path does them in linear
        space, the per-output path an exp-and-add a term, slower still); the FFT and the
        libraries' methods (FFT, Winograd) do fewer, and are bound by bytes and launches."""
        batch, m, n = work.shape
        method = row.get("auto_choice") or row["variant"]  # auto: the work of the method it ran
        return Work(footprint_bytes=batch * (2 * (m + n) - 1) * work.host_p.itemsize,
                    fma=batch * m * n if method in KERNELS else 0.0, precision=row["precision"],
                    calls=work.calls)

    # Verification: fresh inputs per point and seed; exact (dyadic) or within `tolerance`.
    def verify_skip(self, point: dict) -> str | None:
        if point["inputs"] == "dyadic" and point["space"] == "log":
            return "dyadic inputs are exact in linear space only"
        if point["inputs"] == "tiny" and point["space"] == "lin":
            return "tiny probabilities (below 1e-324) exist in log space only"
        return None

    def verify_case(self, point: dict, seed: int) -> dict:
        batch, m, n = point["batch"], point["m"], point["n"]
        p, q = make_inputs(batch, m, n, point["precision"], point["inputs"], [seed, m, n])
        log = point["space"] == "log"
        if log:
            p, q = _log_inputs(p, q, point["inputs"])
        return {**point, "p": p, "q": q, "log": log, "reference": cpu.reference(p, q, log)}

    def output(self, case: dict, variant: str, device: str) -> tuple[str, np.ndarray]:
        """(variant, r): the agreement rule depends on the variant."""
        if device == "gpu":
            import cupy

            p, q = cupy.asarray(case["p"]), cupy.asarray(case["q"])
            r = gpu.convolve(variant, p, q, case["log"]).get()
            if variant == "auto":  # judged by the rule of the method it chose
                variant = gpu.auto_choice(p, q, case["log"])
        else:
            r = cpu.convolve(variant, case["p"], case["q"], case["log"])
        return variant, np.asarray(r)

    def agrees(self, case: dict, got, alpha: float) -> tuple[bool, str]:
        variant, r = got
        reference, log = case["reference"], case["log"]
        if r.shape != reference.shape or r.dtype != case["p"].dtype:
            return False, f"{r.dtype} {r.shape}, expected {case['p'].dtype} {reference.shape}"
        if not componentwise(variant, log):
            error = float(normwise_errors(r, reference, log).max())
            bound = tolerance(case["precision"], case["m"], case["n"], reference, log, False)
            return error <= bound, f"normwise error {error:.2g} <= {bound:.2g}" if error <= bound else \
                f"normwise error {error:.2g} > {bound:.2g}"
        if case["inputs"] == "dyadic":
            wrong = int(np.sum(r.astype(np.float64) != reference))
            return not wrong, "identical to numpy in float64" if not wrong else \
                f"{wrong} of {r.size} outputs differ from numpy in float64"
        bound = tolerance(case["precision"], case["m"], case["n"], reference, log, True)
        if log:
            error = log_errors(r, reference)
            worst = np.unravel_index(np.argmax(error / bound), error.shape)
            ok = bool(np.all(error <= bound))
            return ok, f"log error {error[worst]:.2g} {'<=' if ok else '>'} its bound {bound[worst]:.2g} (worst output)"
        error = float(relative_errors(r, reference, log).max())
        return error <= bound, f"max relative error {error:.2g} {'<=' if error <= bound else '>'} {bound:.2g}"

    def render_figures(self, df, series, meta: dict, outdir) -> list:
        from impls.sumrv import figures  # matplotlib: loaded only to draw

        return figures.render_figures(df, meta, outdir)

    def kernel_builds(self) -> list[tuple]:
        """kernels/sumrv.cu with the options gpu.kernel compiles it with (raw_kernel's default)."""
        import inspect

        from bench.backend import raw_kernel

        return [(gpu.KERNEL_SOURCE, inspect.signature(raw_kernel).parameters["options"].default)]


SUITE = SumrvSuite()
