"""The CPU side of the sumrv suite: the float64 references, the numpy peer and the
numba twins of the skew-diagonal kernels.

The twins emulate kernels/sumrv.cu's skewdiag tile by tile: the shared 32 x 32 tile,
the skewed read of warp i, lane j (x = (i - j) mod 32, y = j), and the two butterfly
reductions per warp with their 32 lanes explicit (lane l adds lane l ^ offset, offsets
16..1), so the CPU runs the kernel's data movement and arithmetic in its order and type.
`skewdiag` adds each diagonal into r in launch order (the kernel's atomics, in one of
their possible orders); `skewdiag-det` writes them to a buffer summed in the kernel's
fixed order, so on any inputs in linear space the GPU's skewdiag-det equals it bit for bit.
"""

import numpy as np
from numba import njit, prange

W = 32
DIAGONALS = 2 * W - 1


# ---------------------------------------------------------------------------
# References, float64: numpy.convolve in linear space; in log space the exact
# per-output max-shifted log-sum-exp (no term underflows: the largest is exp(0)).
def reference(p: np.ndarray, q: np.ndarray, log: bool) -> np.ndarray:
    p, q = np.asarray(p, np.float64), np.asarray(q, np.float64)
    if log:
        return log_convolve(p, q)
    return np.stack([np.convolve(p[b], q[b]) for b in range(p.shape[0])])


@njit(parallel=True, cache=True)
def log_convolve(a, b):
    batch, m = a.shape
    n = b.shape[1]
    out = np.empty((batch, m + n - 1), a.dtype)
    for e in prange(batch * (m + n - 1)):
        pair, i = e // (m + n - 1), e % (m + n - 1)
        lo, hi = max(0, i - n + 1), min(m - 1, i)
        c = -np.inf
        for j in range(lo, hi + 1):
            c = max(c, a[pair, j] + b[pair, i - j])
        if c == -np.inf:
            out[pair, i] = c
            continue
        s = 0.0
        for j in range(lo, hi + 1):
            s += np.exp(a[pair, j] + b[pair, i - j] - c)
        out[pair, i] = c + np.log(s)
    return out


# ---------------------------------------------------------------------------
# The peers compute in linear space. In log space a user shifts each vector by its
# maximum (0 where all are -inf), exponentiates, convolves and takes the log: exact for
# the largest values, but terms more than ~87 (f32) or ~708 (f64) below a vector's
# maximum underflow. xp: numpy or cupy.
def via_linear(xp, convolve, a, b, log: bool):
    if not log:
        return convolve(a, b)
    shift_a, shift_b = (xp.nan_to_num(v.max(axis=1, keepdims=True), neginf=0.0) for v in (a, b))
    r = convolve(xp.exp(a - shift_a), xp.exp(b - shift_b))
    with np.errstate(divide="ignore"):
        return xp.log(xp.maximum(r, 0)) + shift_a + shift_b


def numpy_convolve(p: np.ndarray, q: np.ndarray, log: bool) -> np.ndarray:
    """numpy.convolve per pair, in the inputs' dtype."""
    def per_pair(p, q):
        return np.stack([np.convolve(p[b], q[b]) for b in range(p.shape[0])])

    return via_linear(np, per_pair, p, q, log)


# ---------------------------------------------------------------------------
# The skew-diagonal twins. `typed` holds (0, -inf) in the inputs' dtype, so that no
# float64 literal promotes float32 arithmetic.
@njit(cache=True)
def _butterfly(lanes, scratch, take_max):
    """Every lane ends with the reduction of all 32, as after the kernel's __shfl_xor_sync loop."""
    offset = W // 2
    while offset >= 1:
        for lane in range(W):
            a, b = lanes[lane], lanes[lane ^ offset]
            scratch[lane] = max(a, b) if take_max else a + b
        lanes[:] = scratch
        offset //= 2
    return lanes[0]


@njit(cache=True)
def _diagonal_sum(v, mine, log, typed, lanes, scratch):
    """diagonal_sum of sumrv.cu: the sum (log: log-sum-exp) of the lanes where mine."""
    zero, ninf = typed[0], typed[1]
    if not log:
        for lane in range(W):
            lanes[lane] = v[lane] if mine[lane] else zero
        return _butterfly(lanes, scratch, False)
    for lane in range(W):
        lanes[lane] = v[lane] if mine[lane] else ninf
    c = _butterfly(lanes, scratch, True)
    for lane in range(W):
        lanes[lane] = np.exp(v[lane] - c) if mine[lane] and c != ninf else zero
    s = _butterfly(lanes, scratch, False)
    return c if c == ninf else c + np.log(s)


@njit(cache=True)
def _log_add(a, b, ninf):
    """The kernel's atomic log-add of b into a."""
    if b == ninf:
        return a
    if a == ninf:
        return b
    return max(a, b) + np.log1p(np.exp(-abs(a - b)))


@njit(cache=True)
def _skewdiag(p, q, log, deterministic, typed, r):
    batch, m = p.shape
    n = q.shape[1]
    zero, ninf = typed[0], typed[1]
    empty = ninf if log else zero
    tiles_m, tiles_n = (m + W - 1) // W, (n + W - 1) // W
    last = m + n - 2
    tile = np.empty(W * W, p.dtype)
    v, lanes, scratch = np.empty(W, p.dtype), np.empty(W, p.dtype), np.empty(W, p.dtype)
    lower, upper = np.empty(W, np.bool_), np.empty(W, np.bool_)
    partial = np.empty((batch, tiles_n, tiles_m, DIAGONALS), p.dtype)
    r[:] = empty
    for b in range(batch):  # tiles in the kernel's order: t = (b * tiles_n + tile_y) * tiles_m + tile_x
        for tile_y in range(tiles_n):
            for tile_x in range(tiles_m):
                x0, y0 = tile_x * W, tile_y * W
                for ty in range(W):  # thread (ty, tx) writes tile[tx + 32 ty]
                    for tx in range(W):
                        x, y = x0 + tx, y0 + ty
                        if x < m and y < n:
                            tile[tx + W * ty] = p[b, x] + q[b, y] if log else p[b, x] * q[b, y]
                        else:
                            tile[tx + W * ty] = empty
                for i in range(W):  # warp i, lane j reads the skewed element
                    for j in range(W):
                        v[j] = tile[((i - j) & (W - 1)) + W * j]
                        lower[j], upper[j] = j <= i, j > i
                    lo = _diagonal_sum(v, lower, log, typed, lanes, scratch)
                    hi = _diagonal_sum(v, upper, log, typed, lanes, scratch)
                    if deterministic:
                        partial[b, tile_y, tile_x, i] = lo
                        if i < W - 1:
                            partial[b, tile_y, tile_x, i + W] = hi
                        continue
                    for d, value in ((i, lo), (i + W, hi)):
                        if d < DIAGONALS and x0 + y0 + d <= last:
                            o = x0 + y0 + d
                            r[b, o] = _log_add(r[b, o], value, ninf) if log else r[b, o] + value
    if not deterministic:
        return r
    for b in range(batch):  # skewdiag_combine's order
        for i in range(m + n - 1):
            s, d0 = i // W, i % W
            c, acc = ninf, zero
            for pass_ in range(2 if log else 1):
                for group in range(2):
                    diagonal, d = (s - 1, d0 + W) if group == 0 else (s, d0)
                    if diagonal < 0 or d >= DIAGONALS:
                        continue
                    for tile_y in range(max(0, diagonal - (tiles_m - 1)), min(tiles_n - 1, diagonal) + 1):
                        value = partial[b, tile_y, diagonal - tile_y, d]
                        if not log:
                            acc += value
                        elif pass_ == 0:
                            c = max(c, value)
                        elif c != ninf:
                            acc += np.exp(value - c)
            r[b, i] = acc if not log else (c if c == ninf else c + np.log(acc))
    return r


def skewdiag(p: np.ndarray, q: np.ndarray, log: bool, deterministic: bool) -> np.ndarray:
    typed = np.array([0.0, -np.inf], dtype=p.dtype)
    r = np.empty((p.shape[0], p.shape[1] + q.shape[1] - 1), dtype=p.dtype)
    return _skewdiag(p, q, log, deterministic, typed, r)


VARIANTS = {
    "numpy": numpy_convolve,
    "skewdiag": lambda p, q, log: skewdiag(p, q, log, deterministic=False),
    "skewdiag-det": lambda p, q, log: skewdiag(p, q, log, deterministic=True),
}


def convolve(variant: str, p, q, log: bool):
    return VARIANTS[variant](p, q, log)
