"""L-BFGS on numpy or CuPy arrays (xp), for the fit that stays on the GPU: the two-loop
recursion and the line search run on the device; the host sees one transfer of four
scalars per trial step (f, g_new . d, max |g_new|, g . d), nothing else. On numpy the
same code is what CI tests against scipy.

Line search: backtracking from step 1 (the first iteration: 1 / |g|) by safeguarded
quadratic interpolation until the Armijo condition holds; a pair (s, y) with s . y <= 0
is not stored. Stopping, as scipy's L-BFGS-B: (f_k - f_k+1) / max(|f_k|, |f_k+1|, 1) <=
ftol, or max |g| <= gtol, or max_iterations. A non-finite f stops the fit with FitError.
"""

from collections import deque
from dataclasses import dataclass

import numpy as np

from bench.errors import BenchError

ARMIJO = 1e-4
MAX_TRIALS = 30


class FitError(BenchError):
    """The fit cannot go on (a non-finite objective): one line, no traceback, no NaN rows."""


@dataclass
class Result:
    x: object
    f: float
    iterations: int
    evaluations: int
    converged: bool
    message: str


def _scalars(xp, *values) -> list[float]:
    """Several device scalars to the host in one copy."""
    return [float(v) for v in (xp.stack([xp.asarray(v, dtype=xp.float64) for v in values]).tolist())]


def _direction(g, history):
    """-H g by the two-loop recursion over the (s, y, 1 / y.s) pairs (device scalars)."""
    q = g.copy()
    alphas = []
    for s, y, rho in reversed(history):
        alpha = rho * (s @ q)
        q -= alpha.astype(q.dtype) * y
        alphas.append(alpha)
    if history:
        s, y, _ = history[-1]
        q *= ((s @ y) / (y @ y)).astype(q.dtype)
    for (s, y, rho), alpha in zip(history, reversed(alphas)):
        beta = rho * (y @ q)
        q += (alpha - beta).astype(q.dtype) * s
    return -q


def minimize(fg, x0, xp=np, memory: int = 10, max_iterations: int = 1000, ftol: float = 1e-12,
             gtol: float = 1e-5, on_iteration=None) -> Result:
    """Minimise f from x0; fg(x) -> (f, gradient) on the same device as x0.
    on_iteration(k, f, max |g|) is called after every iteration."""
    x = x0.copy()
    f, g = fg(x)
    evaluations = 1
    f, gmax, gnorm = _scalars(xp, f, xp.abs(g).max(), xp.sqrt(g @ g))
    if not np.isfinite(f):
        raise FitError(f"the objective is not finite at the start ({f}): exp(log mu) overflows there")
    history = deque(maxlen=memory)
    if gmax <= gtol:
        return Result(x, f, 0, evaluations, True, "the gradient is zero at the start")
    for iteration in range(1, max_iterations + 1):
        d = _direction(g, history)
        step = 1.0 if history else 1.0 / gnorm
        for _ in range(MAX_TRIALS):
            x_new = x + d * d.dtype.type(step)
            f_new, g_new = fg(x_new)
            evaluations += 1
            f_new, slope_new, gmax, slope = _scalars(xp, f_new, g_new @ d, xp.abs(g_new).max(), g @ d)
            if not np.isfinite(f_new):
                raise FitError(f"the objective is not finite ({f_new}) at iteration {iteration}, step {step:.3g}: "
                               "exp(log mu) overflows; start nearer the data or scale the covariates")
            if slope >= 0:
                raise FitError(f"not a descent direction at iteration {iteration} (g . d = {slope:.3g})")
            if f_new <= f + ARMIJO * step * slope:
                break
            # The minimum of the quadratic through f, the slope and f_new, kept in [0.1, 0.5] x step.
            step *= min(0.5, max(0.1, -slope * step / (2 * (f_new - f - slope * step))))
        else:
            return Result(x, f, iteration - 1, evaluations, False, f"the line search failed at iteration {iteration}")
        s, y = x_new - x, g_new - g
        curvature = step * (slope_new - slope)  # s . y
        if curvature > 0:
            history.append((s, y, xp.asarray(1.0 / curvature)))
        change = (f - f_new) / max(abs(f), abs(f_new), 1.0)
        x, g, f = x_new, g_new, f_new
        if on_iteration:
            on_iteration(iteration, f, gmax)
        if change <= ftol:
            return Result(x, f, iteration, evaluations, True, "relative reduction of f <= ftol")
        if gmax <= gtol:
            return Result(x, f, iteration, evaluations, True, "max |g| <= gtol")
    return Result(x, f, max_iterations, evaluations, False, "the iteration limit was reached")
