"""The CPU references, float64: the negative log posterior of the ad-click model and its
gradient, exactly as the spec's formulas (the thesis listings' bugs fixed: log Y! is
weighted, the prior's th^2 term has its minus sign).

    f(th) = -sum_i w_i (Y_i log mu_i - mu_i - log Y_i!) + sum_j th_j^2 / (2 psi)
            + P (log(2 pi) + log psi) / 2
    df/dth_j = th_j / psi - sum_i w_i (Y_i - mu_i) d log mu_i / d th_j

`serial` is the thesis's CPU (one thread, numba); `parallel` the fair CPU peer (numba
threads, a private gradient per thread summed at the end); `plain` a numpy version the
tests compare both with.
"""

import math

import numba
import numpy as np

from impls.admodel.data import MATERIAL, PLACEMENT, PSI, Data, log_mu

LOG_FACTORIAL = np.array([0.0, 0.0, math.log(2.0), math.log(6.0)])  # Y is 0..3


def prior_constant(parameters: int, psi: float = PSI) -> float:
    return parameters * (math.log(2 * math.pi) + math.log(psi)) / 2


@numba.njit(cache=True, nogil=True)
def _data_part(theta, covariates, y, w, offsets, factors, start, stop, grad, want_grad):
    """-sum of the data log-likelihood over observations start..stop; with want_grad,
    its gradient added into grad."""
    mp, pm = offsets[5], offsets[6]
    total = 0.0
    for i in range(start, stop):
        d, f, m, r, p = covariates[0, i], covariates[1, i], covariates[2, i], covariates[3, i], covariates[4, i]
        eta = (theta[0] + theta[offsets[0] + d] + theta[offsets[1] + f] + theta[offsets[2] + m]
               + theta[offsets[3] + r] + theta[offsets[4] + p])
        a, b = mp + m * factors, pm + p * factors
        for k in range(factors):
            eta += theta[a + k] * theta[b + k]
        mu = math.exp(eta)
        total -= w[i] * (y[i] * eta - mu - LOG_FACTORIAL[y[i]])
        if want_grad:
            residual = -w[i] * (y[i] - mu)  # d(-log lik) / d eta
            grad[0] += residual
            grad[offsets[0] + d] += residual
            grad[offsets[1] + f] += residual
            grad[offsets[2] + m] += residual
            grad[offsets[3] + r] += residual
            grad[offsets[4] + p] += residual
            for k in range(factors):
                grad[a + k] += residual * theta[b + k]
                grad[b + k] += residual * theta[a + k]
    return total


@numba.njit(cache=True)
def _serial(theta, covariates, y, w, offsets, factors, want_grad):
    grad = np.zeros(theta.size if want_grad else 0)
    return _data_part(theta, covariates, y, w, offsets, factors, 0, y.size, grad, want_grad), grad


@numba.njit(cache=True, parallel=True)
def _parallel(theta, covariates, y, w, offsets, factors, want_grad, chunks):
    # chunks is numba.get_num_threads(), asked in Python: called here, it would keep the
    # function from numba's cache (a dynamic global), and every process would compile it.
    grads = np.zeros((chunks, theta.size if want_grad else 0))
    totals = np.zeros(chunks)
    step = (y.size + chunks - 1) // chunks
    for c in numba.prange(chunks):
        totals[c] = _data_part(theta, covariates, y, w, offsets, factors, c * step, min(y.size, (c + 1) * step),
                               grads[c], want_grad)
    grad = np.zeros(theta.size if want_grad else 0)
    if want_grad:
        for j in numba.prange(theta.size):
            for c in range(chunks):
                grad[j] += grads[c, j]
    return totals.sum(), grad


def evaluate(data: Data, theta: np.ndarray, want_grad: bool, parallel: bool = False, psi: float = PSI):
    """(f, gradient or None) at theta, float64."""
    shape = data.shape
    arguments = (theta, data.covariates, data.y, data.w, shape.offsets, shape.factors, want_grad)
    total, grad = _parallel(*arguments, numba.get_num_threads()) if parallel else _serial(*arguments)
    f = total + float(np.dot(theta, theta)) / (2 * psi) + prior_constant(theta.size, psi)
    return f, (grad + theta / psi if want_grad else None)


def scatter(data: Data, residual: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """The data part of the gradient in numpy: each observation's residual added to the
    intercept and its five effects, and times the other factor row to each factor row."""
    shape, cov = data.shape, data.covariates
    offsets, n = shape.offsets, shape.factors
    grad = np.zeros(theta.size)
    grad[0] = residual.sum()
    for cls in range(5):
        grad += np.bincount(offsets[cls] + cov[cls], residual, theta.size)
    rows_m = offsets[5] + cov[MATERIAL][:, None] * n + np.arange(n)
    rows_p = offsets[6] + cov[PLACEMENT][:, None] * n + np.arange(n)
    for rows, other in ((rows_m, rows_p), (rows_p, rows_m)):
        grad += np.bincount(rows.ravel(), (residual[:, None] * theta[other]).ravel(), theta.size)
    return grad


def plain(data: Data, theta: np.ndarray, psi: float = PSI):
    """(f, gradient) in plain numpy, for the tests."""
    eta = log_mu(theta, data.covariates, data.shape)
    mu = np.exp(eta)
    w, y = data.w.astype(np.float64), data.y.astype(np.float64)
    f = -np.sum(w * (y * eta - mu - LOG_FACTORIAL[data.y])) + theta @ theta / (2 * psi) + prior_constant(theta.size, psi)
    return f, theta / psi + scatter(data, -w * (y - mu), theta)


def magnitudes(data: Data, theta: np.ndarray, psi: float = PSI):
    """What bounds the rounding of f and of each gradient entry, in any summation order:
    (sum of |terms| of f, its number of terms, the same per gradient entry). A sum of k
    terms each computed to within c u is within (k + c) u of the sum of their magnitudes
    (Higham, Thm 3.1 and its corollaries)."""
    eta = log_mu(theta, data.covariates, data.shape)
    w, y = data.w.astype(np.float64), data.y.astype(np.float64)
    f_magnitude = (np.sum(w * (np.abs(y * eta) + np.exp(eta) + LOG_FACTORIAL[data.y])) + theta @ theta / (2 * psi)
                   + abs(prior_constant(theta.size, psi)))
    g_magnitude = np.abs(theta) / psi + scatter(data, np.abs(w * (y - np.exp(eta))), np.abs(theta))
    g_terms = 1 + scatter(data, np.ones(y.size), np.ones(theta.size))  # the prior's term and one per observation
    return f_magnitude, y.size + theta.size, g_magnitude, g_terms
