"""The `admodel-fit` suite: the whole MAP fit by L-BFGS from theta = 0, to the same optimum
by four routes: scipy's L-BFGS-B on the CPU reference (numba on every core), scipy's on the
GPU's fused kernel on bucketed observations (fused-bucketed of the admodel suite, the sort
inside the fit's time; one host copy of theta and of the gradient per evaluation), ours with
the whole iteration on the GPU (lbfgs.py on CuPy), and torch.optim.LBFGS (strong Wolfe) on
the same GPU function. Every route stops by the same rule (lbfgs.py), records the
objective and max |g| per iteration, and the distance of its optimum to the generating
parameters."""

from dataclasses import dataclass, replace

import numpy as np

from bench.backend import to_host
from bench.suite import Defaults, Metric, Suite, Variant
from impls.admodel import cpu, data, lbfgs
from impls.admodel.recipes import PAPER
from impls.admodel.suite import DATASET, LAYOUT, PRECISIONS, SCALE, SOURCES, check_memory, precision_axis

FTOL, GTOL, MEMORY, MAX_ITERATIONS = 1e-12, 1e-5, 10, 2000
WARM_UP_ITERATIONS = 2
RECOVERY_PAIRS = 100_000
CPU_SCALE = "0.00390625"  # 1/256: both fits of `make figures` in seconds


@dataclass
class Workload:
    data: data.Data
    device_data: object
    dtype: type


class Recorder:
    """Keeps the last evaluation, so that an optimiser's callback can record f and max |g|."""

    def __init__(self, fg, ctx):
        self.fg, self.ctx, self.last = fg, ctx, (np.nan, np.nan)

    def __call__(self, x):
        f, grad = self.fg(x)
        self.last = (f, grad)
        return f, grad

    def record(self, iteration: int, f: float, grad_max: float) -> None:
        if not np.isfinite(f):
            raise lbfgs.FitError(f"the objective is not finite ({f}) at iteration {iteration}: exp(log mu) overflows")
        self.ctx.record(iteration, objective=float(f), grad_max=float(grad_max))


def _scipy(fg, x0: np.ndarray, ctx, max_iterations: int) -> lbfgs.Result:
    from scipy.optimize import minimize

    recorder = Recorder(fg, ctx)
    iteration = 0

    def callback(intermediate_result):
        nonlocal iteration
        iteration += 1
        f, grad = recorder.last
        recorder.record(iteration, f, np.abs(grad).max())

    result = minimize(recorder, x0, jac=True, method="L-BFGS-B", callback=callback,
                      options={"maxcor": MEMORY, "ftol": FTOL, "gtol": GTOL, "maxiter": max_iterations})
    if not np.isfinite(result.fun):
        raise lbfgs.FitError(f"scipy's fit ended at a non-finite objective ({result.fun}): {result.message}")
    return lbfgs.Result(result.x, float(result.fun), int(result.nit), int(result.nfev), bool(result.success),
                        str(result.message))


def _torch(fg, x0, ctx, max_iterations: int) -> lbfgs.Result:
    """torch.optim.LBFGS in one step() to its own stopping rule: max |g| <= GTOL, or a
    change of f below FTOL x |f(0)| (torch's tolerance is absolute). torch has no
    per-iteration callback: the series has a row per evaluation, with the lowest f so far."""
    import cupy
    import torch

    param = torch.nn.Parameter(torch.from_dlpack(x0.copy()))
    f0, _ = fg(x0)
    optimizer = torch.optim.LBFGS([param], lr=1, max_iter=max_iterations, max_eval=2 * max_iterations,
                                  history_size=MEMORY, tolerance_grad=GTOL, tolerance_change=FTOL * abs(float(f0)),
                                  line_search_fn="strong_wolfe")
    best = [np.inf, 0]  # lowest f, evaluations

    def closure():
        f, grad = fg(cupy.from_dlpack(param.detach()))
        param.grad = torch.from_dlpack(grad)
        value = float(f)
        if not np.isfinite(value):
            raise lbfgs.FitError(f"the objective is not finite ({value}) at evaluation {best[1] + 1}")
        best[:] = min(best[0], value), best[1] + 1
        ctx.record(best[1], objective=best[0], grad_max=float(param.grad.abs().max()))
        return torch.from_dlpack(f)

    optimizer.step(closure)
    iterations = optimizer.state[param]["n_iter"]
    f, _ = fg(cupy.from_dlpack(param.detach()))
    return lbfgs.Result(cupy.from_dlpack(param.detach()), float(f), iterations, best[1],
                        iterations < max_iterations, "torch's tolerances")


def _fit(work: Workload, variant: str, ctx, max_iterations: int) -> lbfgs.Result:
    """One route from theta = 0; GPU routes bucket the observations first, inside their time."""
    parameters = work.data.shape.parameters
    if variant == "scipy-cpu":
        return _scipy(lambda x: cpu.evaluate(work.data, x, True, parallel=True), np.zeros(parameters), ctx,
                      max_iterations)
    import cupy

    from impls.admodel import gpu

    bucketed = gpu.bucket(work.device_data)

    def fg(x):
        return gpu.fused(bucketed, x)

    if variant == "scipy-gpu":
        def host_fg(x):
            f, grad = fg(cupy.asarray(x, work.dtype))
            return float(f), grad.get().astype(np.float64)

        return _scipy(host_fg, np.zeros(parameters), ctx, max_iterations)
    if variant == "lbfgs-gpu":
        return lbfgs.minimize(fg, cupy.zeros(parameters, work.dtype), cupy, MEMORY, max_iterations, FTOL, GTOL,
                              on_iteration=lambda k, f, g: ctx.record(k, objective=f, grad_max=g))
    return _torch(fg, cupy.zeros(parameters, work.dtype), ctx, max_iterations)


def recovery(d: data.Data, x) -> dict:
    """How near the optimum is to the generating parameters: the RMS error of the intercept
    and the five effects (active ones), and of the matrix-factorisation terms
    <th_MP[m], th_PM[p]> over the distinct pairs of the first RECOVERY_PAIRS observations
    (the factors themselves are identifiable only up to an invertible N x N transform)."""
    x = to_host(x)
    offsets, n = d.shape.offsets, d.shape.factors
    effects = d.active.copy()
    effects[offsets[5]:] = False
    pairs = np.unique(d.covariates[[data.MATERIAL, data.PLACEMENT], :RECOVERY_PAIRS], axis=1)

    def products(theta):
        mp, pm = theta[offsets[5]:offsets[6]].reshape(-1, n), theta[offsets[6]:].reshape(-1, n)
        return np.einsum("ik,ik->i", mp[pairs[0]], pm[pairs[1]])

    return {"effects_rmse": float(np.sqrt(np.mean((x[effects] - d.theta_true[effects]) ** 2))),
            "factors_rmse": float(np.sqrt(np.mean((products(x) - products(d.theta_true)) ** 2)))}


class NoRecords:
    """The context of an untimed warm-up fit: its series is dropped."""

    def record(self, iteration: int, **values) -> None:
        pass


NO_RECORDS = NoRecords()


class AdmodelFitSuite(Suite):
    name = "admodel-fit"
    description = "the ad-click model's MAP fit by L-BFGS to the optimum: scipy on CPU and GPU, ours on the GPU, torch"
    axes = (DATASET, replace(SCALE, default=lambda backend, given: "1" if backend == "gpu" else CPU_SCALE,
                             help="observations as a fraction of the thesis's (CPU default 1/256, GPU 1)"),
            replace(LAYOUT, default="shuffled"), precision_axis("f64"))
    variants = (
        Variant("scipy-cpu", "scipy L-BFGS-B on the numba reference on every core", devices=("cpu",)),
        Variant("scipy-gpu", "scipy L-BFGS-B on the fused GPU kernel: theta up and the gradient down per "
                "evaluation", devices=("gpu",)),
        Variant("lbfgs-gpu", "ours: the two-loop recursion and line search in CuPy, four scalars to the host "
                "per step", devices=("gpu",)),
        Variant("torch-lbfgs", "torch.optim.LBFGS (strong Wolfe, its own stopping rule) on the fused GPU kernel; "
                "its series has a row per evaluation", devices=("gpu",),
                peer=True, needs=("torch",)),
    )
    reference = "scipy-cpu"
    gpu_reference = "lbfgs-gpu"  # scipy-gpu's time is mostly the host's
    paper = PAPER  # its recipe (`fit`) and claims are the admodel suite's
    metrics = (
        Metric("iterations", "", help="L-BFGS iterations to the stopping rule"),
        Metric("evaluations", "", help="objective and gradient evaluations"),
        Metric("final_objective", "", gate="tolerance", tolerance=1e-6, help="the negative log posterior at the fit's end"),
        Metric("converged", "", better="higher", help="1 when the stopping rule, not the iteration limit, ended it"),
        Metric("effects_rmse", "", help="RMS of theta - the generating theta: intercept and the five effects, active"),
        Metric("factors_rmse", "", help="RMS error of <th_MP[m], th_PM[p]> over the observed (m, p) pairs"),
        Metric("grad_max", "", per="iteration", help="max |gradient| after the iteration"),
        Metric("objective", "", per="iteration", help="f after the iteration"),
    )
    sources = SOURCES

    def defaults(self, backend: str) -> Defaults:
        return Defaults(repeats=2, warmup=0, note="fits of seconds to minutes: two repeats, compiled in prepare")

    def skip_variant(self, point: dict, variant: str) -> str | None:
        if variant == "scipy-cpu" and point["precision"] != "f64":
            return "the CPU reference is float64"
        return None

    def check(self, points: list[dict]) -> None:
        check_memory(points)

    def prepare(self, point: dict) -> Workload:
        d = data.generate(point["dataset"], point["scale"], point["layout"])
        work = Workload(d, None, PRECISIONS[point["precision"]])
        cpu.evaluate(d, np.zeros(d.shape.parameters), True, parallel=True)  # numba compiles here, untimed
        if point["backend"] == "gpu":
            from impls.admodel import gpu

            work.device_data = gpu.upload(d)
            # Two iterations of each GPU route, untimed: the fused kernel and CuPy's reductions compile
            # and torch starts up here, not in the first repeat.
            for variant in self.variants:
                if "gpu" in variant.devices and not variant.missing():
                    _fit(work, variant.name, NO_RECORDS, WARM_UP_ITERATIONS)
        return work

    def run(self, work: Workload, variant: str, ctx) -> dict:
        result = _fit(work, variant, ctx, MAX_ITERATIONS)
        with ctx.untimed():
            return {"iterations": result.iterations, "evaluations": result.evaluations, "final_objective": result.f,
                    "converged": int(result.converged), **recovery(work.data, result.x)}

    def render_figures(self, df, series, meta: dict, outdir) -> list:
        from impls.admodel import figures  # matplotlib: loaded only to draw

        return figures.render_fit(df, series, meta, outdir)


SUITE = AdmodelFitSuite()
