"""SaberLDA's sampling structures as a warp computes them, with its 32 lanes emulated, in
float32 (numba): the chunked prefix sum (a Hillis-Steele scan of 32 values, then the
carry of the chunks before), the lane partials (then their Hillis-Steele scan), the
warp vote (the first lane whose value reaches x), the W-ary tree of Fig. 6-7 (W = 32,
four levels, up to 32^3 = 32,768 topics) and Vose's alias table (G0, G1). The GPU
kernels do the same float operations in the same order, so that with the same uniforms
they draw the same topics.

Fig. 6's bugs fixed: L3[i] = L4[(i + 1) W - 1] (the listing reads L4[i W - 1], index -1
at i = 0), likewise L2; L4 padded to a multiple of W and L3 to a multiple of W (not to
W^2: at K = 1024 that wrote 32 times L3's nodes) with the running total; a vote that finds
no lane (x above the total by rounding) takes the last lane, and one past L3's nodes the
last chunk."""

import numba
import numpy as np

W = 32
MAX_TOPICS = W * W * W
OFFSETS = (1, 2, 4, 8, 16)  # the Hillis-Steele steps of a warp's inclusive scan


@numba.njit(cache=True)
def padded(size: int) -> int:
    return (size + W - 1) // W * W


@numba.njit(cache=True)
def level3_size(topics: int) -> int:
    """Nodes of the tree's third level: one per chunk of W topics, padded to a multiple of W."""
    return padded(padded(topics) // W)


@numba.njit(cache=True)
def warp_scan(lanes):
    """The inclusive Hillis-Steele scan of 32 lanes, in place: lane l adds lane l - o for
    o = 1, 2, 4, 8, 16 (downwards, so that each lane adds its neighbour's old value)."""
    for offset in OFFSETS:
        for lane in range(W - 1, offset - 1, -1):
            lanes[lane] = lanes[lane] + lanes[lane - offset]


@numba.njit(cache=True)
def chunked_scan(values, out, carry=np.float32(0)):
    """out[i] = carry + values[0] + ... + values[i] in float32, as a warp computes it: for
    each chunk of 32 an inclusive Hillis-Steele scan (lane l adds lane l - o for o = 1, 2,
    4, 8, 16), then the carry (the last prefix of the chunk before; `carry` for the first)
    added. out may be longer than values (padding): its tail holds the last prefix,
    out[values.size - 1]. (Not the scan's lane 31: padded with zeros, it groups the last
    chunk's sums differently and can end an ulp above the last prefix, where a draw of
    u = 1 would land past the values.)"""
    lanes = np.empty(W, np.float32)
    for start in range(0, out.size, W):
        for lane in range(W):
            lanes[lane] = values[start + lane] if start + lane < values.size else np.float32(0)
        warp_scan(lanes)
        for lane in range(W):
            out[start + lane] = lanes[lane] + carry
        carry = out[start + W - 1]
    if 0 < values.size < out.size:
        out[values.size:] = out[values.size - 1]


@numba.njit(cache=True)
def vote(values, start, x) -> int:
    """The first of values[start:start + 32] that is >= x, as __ballot + __ffs find it
    (its lane); the last lane where none is (x above the total by rounding)."""
    for lane in range(W):
        if values[start + lane] >= x:
            return lane
    return W - 1


@numba.njit(cache=True)
def lane_partials(values, count, lanes):
    """The lane partials of values[:count] into lanes[0:32]: lane l sums values l, l + 32,
    ... in order. Their warp_scan is the lane scan: lanes[31] the warp's sum, and lane l's
    values lie between lanes[l - 1] and lanes[l]."""
    lanes[:] = 0
    for i in range(count):
        lanes[i % W] += values[i]


# W-ary tree: L4 the prefix sums of the weights (padded to a multiple of W), L3 every
# W-th of them (level3_size nodes), L2 every W-th of L3 (W nodes), each padded with the
# total, L1 = L2[W - 1] the total.
@numba.njit(cache=True)
def build_tree(weights, l4, l3, l2):
    chunked_scan(weights, l4)
    total = l4[l4.size - 1]
    for i in range(l3.size):
        l3[i] = l4[(i + 1) * W - 1] if (i + 1) * W <= l4.size else total
    for j in range(W):
        l2[j] = l3[(j + 1) * W - 1] if (j + 1) * W <= l3.size else total
    return l2[W - 1]


@numba.njit(cache=True)
def tree_sample(l4, l3, l2, x) -> int:
    """The first k whose prefix sum reaches x: three votes, top down."""
    off3 = min(vote(l2, 0, x) * W, l3.size - W)  # x above the total by rounding: the last chunk
    off4 = min((off3 + vote(l3, off3, x)) * W, l4.size - W)
    return off4 + vote(l4, off4, x)


# Vose's alias table, built by one thread per word (the paper: building it is sequential).
@numba.njit(cache=True)
def build_alias(weights, total, probability, alias):
    """probability[i], alias[i] for weights summing to total: column i keeps i with
    probability[i], else gives alias[i]. Small and large columns are taken from stacks
    filled in index order, so the table is a deterministic function of the weights."""
    size = weights.size
    scale = np.float32(size) / total
    small = np.empty(size, np.int32)
    large = np.empty(size, np.int32)
    n_small = n_large = 0
    for i in range(size):
        probability[i] = weights[i] * scale
        alias[i] = i
        if probability[i] < np.float32(1):
            small[n_small] = i
            n_small += 1
        else:
            large[n_large] = i
            n_large += 1
    while n_small and n_large:
        n_small -= 1
        s = small[n_small]
        l = large[n_large - 1]
        alias[s] = l
        probability[l] = (probability[l] + probability[s]) - np.float32(1)
        if probability[l] < np.float32(1):
            n_large -= 1
            small[n_small] = l
            n_small += 1
    for i in range(n_small):  # rounding leaves columns a hair below 1: they keep themselves
        probability[small[i]] = np.float32(1)
    for i in range(n_large):
        probability[large[i]] = np.float32(1)


@numba.njit(cache=True)
def alias_sample(probability, alias, u) -> int:
    """The column floor(u K) (u in (0, 1]; u = 1 takes the last), kept or aliased by the
    fractional part."""
    x = u * np.float32(probability.size)
    column = min(np.int64(x), probability.size - 1)
    return column if x - np.float32(column) < probability[column] else alias[column]


@numba.njit(cache=True)
def segmented_count(topics, keys, counts) -> int:
    """Fig. 8 (SSC), for one document: the distinct topics in increasing order and their
    counts; returns their number (the listing's nKeys = p[N - 1] misses one: p[N - 1] + 1)."""
    ordered = np.sort(topics)
    n_keys = 0
    for i in range(ordered.size):
        if i == 0 or ordered[i] != ordered[i - 1]:
            keys[n_keys] = ordered[i]
            counts[n_keys] = 0
            n_keys += 1
        counts[n_keys - 1] += 1
    return n_keys
