"""Counter-based uniforms for SaberLDA: Philox4x32-10 (Salmon et al., SC 2011), keyed by
the seed and counted by (token id, iteration), so that the order in which tokens are
processed (document order in G0, word order from G1 on, any chunking) changes no draw.
The GPU kernels compute the same function; both sides map a 32-bit word w to the
float32 uniform ((w >> 8) + 1) / 2^24 in (0, 1] (never 0: no zero-weight topic can be drawn)."""

import numba
import numpy as np

MULTIPLIERS = (np.uint64(0xD2511F53), np.uint64(0xCD9E8D57))
WEYL = (np.uint32(0x9E3779B9), np.uint32(0xBB67AE85))
ROUNDS = 10
INIT_ITERATION = 0xFFFFFFFF  # the counter of the initial topics, beyond any iteration
LOW = np.uint64(0xFFFFFFFF)


@numba.njit(cache=True, inline="always")
def philox4x32(c0, c1, c2, c3, k0, k1):
    """The four 32-bit words of Philox4x32-10 for counter (c0..c3) and key (k0, k1)."""
    c0, c1, c2, c3 = np.uint32(c0), np.uint32(c1), np.uint32(c2), np.uint32(c3)
    k0, k1 = np.uint32(k0), np.uint32(k1)
    for r in range(ROUNDS):
        if r:
            k0 = np.uint32(k0 + WEYL[0])
            k1 = np.uint32(k1 + WEYL[1])
        p0 = MULTIPLIERS[0] * np.uint64(c0)
        p1 = MULTIPLIERS[1] * np.uint64(c2)
        c0, c1, c2, c3 = (np.uint32((p1 >> np.uint64(32)) ^ np.uint64(c1) ^ np.uint64(k0)), np.uint32(p1 & LOW),
                          np.uint32((p0 >> np.uint64(32)) ^ np.uint64(c3) ^ np.uint64(k1)), np.uint32(p0 & LOW))
    return c0, c1, c2, c3


@numba.njit(cache=True, inline="always")
def to_uniform(word):
    return np.float32((np.uint32(word) >> np.uint32(8)) + np.uint32(1)) * np.float32(2.0 ** -24)


@numba.njit(cache=True)
def token_uniforms(seed, iteration, token):
    """The two uniforms of a token's draw in an iteration: the branch, then the position."""
    w0, w1, _, _ = philox4x32(token, iteration, 0, 0, seed, 0)
    return to_uniform(w0), to_uniform(w1)
