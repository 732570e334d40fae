"""CPU (numba) versions of the butterfly paper's draw-z step: Algorithms 1-10.

Every function draws z[t] for every token t of a corpus whose documents are
words[doc_ptr[m]:doc_ptr[m+1]], from the relative probabilities
theta[m, k] * phi[words[t], k], using the uniform u[t].  All variants return the
smallest k with u[t] * sum < p[k] (p the prefix sums of the products), or K-1
when there is none, so with exact (dyadic) weights they return identical z.

Algorithms 4 and 7 process the documents in warps of W lanes.  The CPU has no
warps, so a lane is an index r in 0..W-1 of a per-warp array, and a shuffle is
an index permutation over that axis: the code performs the same data movement
as the CUDA kernel (transposed W x W block reads, the register transpose, the
butterfly), which is what makes it a reference the GPU can be compared with.
"""

import numpy as np
from numba import njit, prange


@njit(cache=True, inline="always")
def _binary_search(p, lo, hi, target):
    """Algorithm 3 on p[lo..hi]: smallest index with target < p[index], or hi."""
    while lo < hi:
        mid = (lo + hi) // 2
        if target < p[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True, parallel=True)
def alg1(doc_ptr, words, theta, phi, u, z, linear):
    """Algorithm 1: one document per thread, full prefix sum, then Algorithm 3
    (binary search) or, when linear, Algorithm 2 (linear search)."""
    num_docs = doc_ptr.size - 1
    K = theta.shape[1]
    for m in prange(num_docs):
        p = np.empty(K, dtype=theta.dtype)
        for t in range(doc_ptr[m], doc_ptr[m + 1]):
            c = words[t]
            total = theta.dtype.type(0)
            for k in range(K):
                total += theta[m, k] * phi[c, k]
                p[k] = total
            target = total * u[t]
            if linear:
                j = 0
                while j < K - 1 and target >= p[j]:
                    j += 1
            else:
                j = _binary_search(p, 0, K - 1, target)
            z[t] = j


PAGE = 4096
LINE = 64


@njit(cache=True, inline="always")
def _warp_scratch(theta, W, vectors):
    """A warp's registers and local arrays, carved from one page-aligned buffer:
    theta_local (W x K), p (W x K), a (W x W) and `vectors` vectors of W.  Rows
    are one cache line longer than K and the arrays a few lines apart, so that
    the W rows a lane-parallel step touches fall in different L1 sets whatever
    K is: with separate allocations, K = 512 and 1024 ran up to 2.6x slower
    than their neighbours (set conflicts at power-of-two row lengths)."""
    K = theta.shape[1]
    line = LINE // theta.itemsize
    stride = K + line
    gap = 3 * line
    size = 2 * (W * stride + gap) + W * W + vectors * W
    buf = np.empty(size + PAGE // theta.itemsize, dtype=theta.dtype)
    start = ((PAGE - buf.ctypes.data % PAGE) % PAGE) // theta.itemsize
    theta_local = buf[start:start + W * stride].reshape((W, stride))[:, :K]
    start += W * stride + gap
    p = buf[start:start + W * stride].reshape((W, stride))[:, :K]
    start += W * stride + gap
    a = buf[start:start + W * W].reshape((W, W))
    start += W * W
    vec = buf[start:start + vectors * W].reshape((vectors, W))
    return theta_local, p, a, vec


@njit(cache=True, inline="always")
def _longest(doc_ptr, q, W):
    """Length of the longest document of warp q: the master index's bound."""
    longest = 0
    for r in range(W):
        longest = max(longest, doc_ptr[q * W + r + 1] - doc_ptr[q * W + r])
    return longest


@njit(cache=True, inline="always")
def _warp_lanes(doc_ptr, words, q, W, imaster, word, token):
    """Master-index idiom (Algorithm 4 lines 10-12): lane r works on token
    min(imaster, N[m]-1) of its document m = q*W + r, repeating its last word
    once its document is done.  An empty (padding) document's lane joins every
    shuffle with word 0 and writes nothing (token = -1)."""
    for r in range(W):
        m = q * W + r
        n = doc_ptr[m + 1] - doc_ptr[m]
        if n == 0:
            token[r] = -1
            word[r] = 0
        else:
            token[r] = doc_ptr[m] + min(imaster, n - 1)
            word[r] = words[token[r]]


@njit(cache=True, inline="always")
def _cache_theta(theta, q, W, R, theta_local):
    """Algorithm 5: remnant as is, then W x W blocks by transposed access, so
    lane r holds theta[q*W + k, j + r] at theta_local[r, j + k]."""
    K = theta.shape[1]
    for r in range(W):
        for j in range(R):
            theta_local[r, j] = theta[q * W + r, j]
    for j in range(R, K, W):
        for k in range(W):
            for r in range(W):  # the W lanes read W consecutive values: coalesced
                theta_local[r, j + k] = theta[q * W + k, j + r]


@njit(cache=True, inline="always")
def _remnant_sums(theta_local, phi, word, W, R, p, total):
    """Remnant topics 0..R-1, per lane, not transposed (Algorithm 6 lines 7-9)."""
    for r in range(W):
        s = theta_local.dtype.type(0)
        for j in range(R):
            s += theta_local[r, j] * phi[word[r], j]
            p[r, j] = s
        total[r] = s


@njit(cache=True, inline="always")
def _block_products(theta_local, phi, word, W, j, a):
    """Transposed read of one W x W block of phi: lane r holds, in register k,
    the product for document k of the warp and topic j + r."""
    for r in range(W):
        for k in range(W):  # word[k] is c_warp[k]: lane k's word, shared with every lane
            a[r, k] = theta_local[r, j + k] * phi[word[k], j + r]


@njit(cache=True, parallel=True)
def alg4(doc_ptr, words, theta, phi, u, z, W):
    """Algorithm 4 with Algorithms 5 and 6: coalesced W x W block reads, then the
    register transpose of Figure 2 (log2 W rounds of W/2 shuffle_xor per lane)
    puts each product back into its own document's lane; binary search."""
    K = theta.shape[1]
    R = K % W
    num_warps = (doc_ptr.size - 1) // W
    for q in prange(num_warps):
        theta_local, p, a, vec = _warp_scratch(theta, W, 1)
        total = vec[0]
        word = np.empty(W, dtype=np.int64)
        token = np.empty(W, dtype=np.int64)
        _cache_theta(theta, q, W, R, theta_local)
        for imaster in range(_longest(doc_ptr, q, W)):
            _warp_lanes(doc_ptr, words, q, W, imaster, word, token)
            _remnant_sums(theta_local, phi, word, W, R, p, total)
            for j in range(R, K, W):
                _block_products(theta_local, phi, word, W, j, a)
                # Figure 2: in round b, registers k and k^bit are exchanged
                # between lanes r and r^bit wherever bit b of r and of k differ.
                bit = 1
                while bit < W:
                    for r in range(W):
                        if r & bit == 0:
                            for k in range(W):
                                if k & bit:
                                    tmp = a[r, k]
                                    a[r, k] = a[r ^ bit, k ^ bit]
                                    a[r ^ bit, k ^ bit] = tmp
                    bit *= 2
                for r in range(W):  # lane r now holds its own products
                    s = total[r]
                    for k in range(W):
                        s += a[r, k]
                        p[r, j + k] = s
                    total[r] = s
            for r in range(W):
                if token[r] >= 0:
                    z[token[r]] = _binary_search(p[r], 0, K - 1, total[r] * u[token[r]])


@njit(cache=True, inline="always")
def _butterfly_table(a, W, j, p, total, h):
    """Algorithm 8 lines 13-25: the butterfly-patterned table from one block of
    products with W - 1 shuffles; row W-1 ends with each lane's block total."""
    bit = 1
    while bit < W:
        for i in range(W // (2 * bit)):
            d = 2 * bit * i + bit - 1
            for r in range(W):
                h[r] = a[r, d] if r & bit else a[r, d + bit]
            for r in range(W):
                v = h[r ^ bit]  # __shfl_xor(h, bit)
                if r & bit:
                    a[r, d] = a[r, d + bit]
                a[r, d + bit] = a[r, d] + v
                p[r, j + d] = a[r, d]
        bit *= 2
    for r in range(W):
        total[r] += a[r, W - 1]
        p[r, j + W - 1] = total[r]


@njit(cache=True, inline="always")
def _butterfly_search(p, W, block_base, target, low, high, flip, t, y, result):
    """Algorithm 10: search one butterfly-patterned block.  Each lane keeps
    lowValue/highValue (true prefix sums bracketing its range) and builds the
    midpoint from a tree node fetched, by shuffles, from the lane holding it."""
    for r in range(W):
        low[r] = p[r, block_base[r] - 1] if block_base[r] > 0 else p.dtype.type(0)
        high[r] = p[r, block_base[r] + W - 1]
        flip[r] = 0
    bit = W // 2
    while bit >= 1:
        mask = ((W - 1) * (2 * bit)) & (W - 1)
        y[:] = 0
        for i in range(W // (2 * bit)):
            d = (bit - 1) + 2 * bit * i
            for r in range(W):  # each lane reads its table at the block of lane `him`
                him = (d & mask) + (r & ~mask)
                his_base = block_base[him]  # __shfl(blockBase, him)
                t[r] = p[r, his_base + d]
            for r in range(W):
                fetched = t[r ^ flip[r]]  # __shfl_xor(.., flip)
                if (r ^ d) & mask == 0:
                    y[r] = fetched
        for r in range(W):
            compare = high[r] - y[r] if r & bit else low[r] + y[r]
            if target[r] < compare:
                high[r] = compare
                flip[r] ^= bit & r
            else:
                low[r] = compare
                flip[r] ^= bit & ~r
        bit //= 2
    for r in range(W):
        result[r] = block_base[r] + (flip[r] ^ r)


@njit(cache=True, parallel=True)
def alg7(doc_ptr, words, theta, phi, u, z, W):
    """Algorithm 7 with Algorithms 5, 8, 9 and 10: butterfly-patterned partial
    sums built in registers, searched with lowValue/highValue/flip; the
    remnant (at the front) searched linearly.  W must be a power of 2."""
    K = theta.shape[1]
    R = K % W
    blocks = K // W
    num_warps = (doc_ptr.size - 1) // W
    for q in prange(num_warps):
        theta_local, p, a, vec = _warp_scratch(theta, W, 6)
        total, target, low, high, t, y = vec[0], vec[1], vec[2], vec[3], vec[4], vec[5]
        word = np.empty(W, dtype=np.int64)
        token = np.empty(W, dtype=np.int64)
        block_base = np.empty(W, dtype=np.int64)
        flip = np.empty(W, dtype=np.int64)
        result = np.empty(W, dtype=np.int64)
        _cache_theta(theta, q, W, R, theta_local)
        for imaster in range(_longest(doc_ptr, q, W)):
            _warp_lanes(doc_ptr, words, q, W, imaster, word, token)
            _remnant_sums(theta_local, phi, word, W, R, p, total)
            for j in range(R, K, W):
                _block_products(theta_local, phi, word, W, j, a)
                _butterfly_table(a, W, j, p, total, t)
            # Algorithm 9: binary search over the blocks' last entries (true
            # prefix sums), then the butterfly search inside the chosen block.
            for r in range(W):
                target[r] = total[r] * (u[token[r]] if token[r] >= 0 else 0)
                lo = 0
                hi = blocks - 1
                while lo < hi:
                    mid = (lo + hi) // 2
                    if target[r] < p[r, mid * W + R + W - 1]:
                        hi = mid
                    else:
                        lo = mid + 1
                block_base[r] = R + lo * W
                result[r] = K - 1
            if blocks > 0:
                _butterfly_search(p, W, block_base, target, low, high, flip, t, y, result)
            for r in range(W):
                if block_base[r] > 0 and target[r] < p[r, block_base[r] - 1]:
                    for i in range(R):  # not in a block after all: the remnant
                        if target[r] < p[r, i]:
                            result[r] = i
                            break
                if token[r] >= 0:
                    z[token[r]] = result[r]


@njit(cache=True, inline="always")
def _lane_scan(x, out):
    """Inclusive prefix sum over the 32 lanes, in the order of the GPU kernel's
    shuffles (Hillis-Steele: in round d, lane l adds lane l-d's old value)."""
    out[:] = x
    d = 1
    while d < 32:
        for lane in range(31, d - 1, -1):  # downwards, so out[lane - d] is still the old value
            out[lane] += out[lane - d]
        d *= 2


@njit(cache=True)
def warpscan_chunk(K):
    """Topics per lane: ceil(K/32), one more where that is a multiple of 31.  The GPU
    tile has a pad word per 32 topics, so lanes 31 topics apart would read one shared-
    memory bank (31-way conflicts at C = 31: K = 961..992 ran 3x slower on an H200)."""
    C = (K + 31) // 32
    return C + 1 if C % 31 == 0 else C


@njit(cache=True, parallel=True)
def warpscan(doc_ptr, words, theta, phi, u, z, pairs):
    """Beyond the paper: one warp of 32 lanes per document.  Lane l sums the
    products of its chunk of C consecutive topics (warpscan_chunk); a warp scan of
    the chunk sums and a ballot find the chunk holding the draw; the lanes then take
    one topic each of that chunk, and a second scan and ballot find the topic.
    pairs (pairscan): a token whose word is its predecessor's keeps the chunk sums
    and their scan (the same numbers), and only searches for its uniform."""
    K = theta.shape[1]
    C = warpscan_chunk(K)
    for m in prange(doc_ptr.size - 1):
        s = np.empty(32, dtype=theta.dtype)
        ends = np.empty(32, dtype=theta.dtype)
        a = np.empty(32, dtype=theta.dtype)
        prefix = np.empty(32, dtype=theta.dtype)
        previous = -1
        for t in range(doc_ptr[m], doc_ptr[m + 1]):
            c = words[t]
            if not pairs or c != previous:
                for lane in range(32):
                    acc = theta.dtype.type(0)
                    for k in range(min(lane * C, K), min(lane * C + C, K)):
                        acc += theta[m, k] * phi[c, k]
                    s[lane] = acc
                _lane_scan(s, ends)
                previous = c
            target = ends[31] * u[t]
            result = K - 1
            chunk = -1
            for lane in range(32):  # __ballot_sync + __ffs
                if target < ends[lane]:
                    chunk = lane
                    break
            if chunk >= 0:
                begin = min(chunk * C, K)
                end = min(begin + C, K)
                before = ends[chunk] - s[chunk]
                result = end - 1  # if rounding hides the crossing, the chunk's last topic
                for base in range(begin, end, 32):
                    for lane in range(32):
                        k = base + lane
                        a[lane] = theta[m, k] * phi[c, k] if k < end else 0
                    _lane_scan(a, prefix)
                    hit = -1
                    for lane in range(32):
                        if base + lane < end and target < before + prefix[lane]:
                            hit = base + lane
                            break
                    if hit >= 0:
                        result = hit
                        break
                    before = before + prefix[31]
            z[t] = result


SEGSCAN_MAX_SEGMENTS = 32  # a segment per lane at most: lane s holds segment s's prefix sum


def segscan_segment_topics(itemsize):
    """Topics of one of segscan's segments: 32 lanes x 16 bytes (128 in f32, 64 in f64)."""
    return 32 * (16 // itemsize)


def segscan_largest_k(itemsize):
    """The largest K segscan holds with values of `itemsize` bytes."""
    return SEGSCAN_MAX_SEGMENTS * segscan_segment_topics(itemsize)


def segscan_segments(K, itemsize):
    """segscan's segments for K (segscan_segment_topics each); a K beyond
    SEGSCAN_MAX_SEGMENTS of them is a ValueError."""
    topics = segscan_segment_topics(itemsize)
    if K > segscan_largest_k(itemsize):
        raise ValueError(f"segscan holds K <= {segscan_largest_k(itemsize)} with {itemsize}-byte values "
                         f"({SEGSCAN_MAX_SEGMENTS} segments of {topics} topics); K = {K}")
    return -(-K // topics)


@njit(cache=True, parallel=True)
def segscan(doc_ptr, words, theta, phi, u, z, N):
    """Beyond the paper: one warp of 32 lanes per document, no shared memory.  Rows
    are read in segments of 32 N topics (N values of 16 bytes a lane: lane l holds topics
    l N .. l N + N - 1 of each); a lane sums its N products left to right.  Segment totals
    sum the 32 lanes' sums in the GPU's transposed butterfly tree (lane bit 4 first, then
    3, .., 0); a warp scan of the totals (zeros past the S segments: lanes below S as in a
    scan of the first P lanes, P the power of two from S) and a search find the segment, a
    warp scan of its lane sums plus the segments before find the lane, and the lane adds
    its products one by one.  Where rounding hides a crossing, the segment's or
    the lane's last topic.  A token whose word is its predecessor's keeps the sums."""
    K = theta.shape[1]
    G = 32 * N
    S = -(-K // G)
    for m in prange(doc_ptr.size - 1):
        sums = np.zeros((S, 32), dtype=theta.dtype)
        folded = np.empty(32, dtype=theta.dtype)
        totals = np.zeros(32, dtype=theta.dtype)
        ends = np.empty(32, dtype=theta.dtype)
        lane_ends = np.empty(32, dtype=theta.dtype)
        previous = -1
        for t in range(doc_ptr[m], doc_ptr[m + 1]):
            c = words[t]
            if c != previous:
                for s in range(S):
                    for lane in range(32):
                        acc = theta.dtype.type(0)
                        for k in range(s * G + lane * N, min(s * G + lane * N + N, K)):
                            acc += theta[m, k] * phi[c, k]
                        sums[s, lane] = acc
                for s in range(S):
                    folded[:] = sums[s]
                    width = 32
                    while width > 1:  # lanes l and l + width/2: lane bit 4 first
                        width //= 2
                        for lane in range(width):
                            folded[lane] = folded[lane] + folded[lane + width]
                    totals[s] = folded[0]
                _lane_scan(totals, ends)  # lanes < S as the GPU's scan of the first P lanes
                previous = c
            target = ends[S - 1] * u[t]
            result = K - 1
            segment = -1
            for lane in range(S):  # __ballot_sync + __ffs
                if target < ends[lane]:
                    segment = lane
                    break
            if segment >= 0:
                before = ends[segment - 1] if segment > 0 else theta.dtype.type(0)
                _lane_scan(sums[segment], lane_ends)
                result = min((segment + 1) * G, K) - 1  # if rounding hides the crossing, the segment's last topic
                hit = -1
                for lane in range(32):
                    if segment * G + lane * N < K and target < before + lane_ends[lane]:
                        hit = lane
                        break
                if hit >= 0:
                    k0 = segment * G + hit * N
                    x = before + lane_ends[hit - 1] if hit > 0 else before
                    result = min(k0 + N, K) - 1  # likewise, the lane's last topic
                    for k in range(k0, min(k0 + N, K)):
                        x += theta[m, k] * phi[c, k]
                        if target < x:
                            result = k
                            break
            z[t] = result


VARIANTS = {
    "alg1": "Algorithm 1: per-thread products, full prefix sum, binary search (Alg. 3)",
    "alg1-linear": "Algorithm 1 with the linear search of Algorithm 2",
    "alg4": "Algorithm 4: transposed W x W block access + register transpose (Fig. 2)",
    "alg7": "Algorithm 7: butterfly-patterned partial sums (Alg. 8-10)",
    "warpscan": "beyond the paper: a warp per document, whole phi row per token, warp scan + ballot search",
    "pairscan": "warpscan whose tokens of a repeated (document, word) pair share one distribution",
    "segscan": "beyond the paper: a warp per document, no shared memory, rows in 16-byte segments, "
               "segment totals by a transposed butterfly, repeated pairs share one distribution",
}


def draw_z(variant, doc_ptr, words, theta, phi, u, z, W=32):
    """Draw z for every token with the named variant (documents padded to a
    multiple of W for alg4 and alg7)."""
    if variant == "alg1":
        alg1(doc_ptr, words, theta, phi, u, z, False)
    elif variant == "alg1-linear":
        alg1(doc_ptr, words, theta, phi, u, z, True)
    elif variant == "alg4":
        alg4(doc_ptr, words, theta, phi, u, z, W)
    elif variant == "alg7":
        alg7(doc_ptr, words, theta, phi, u, z, W)
    elif variant in ("warpscan", "pairscan"):
        warpscan(doc_ptr, words, theta, phi, u, z, variant == "pairscan")
    elif variant == "segscan":
        segscan_segments(theta.shape[1], theta.dtype.itemsize)  # a K beyond its segments: a one-line error
        segscan(doc_ptr, words, theta, phi, u, z, 16 // theta.dtype.itemsize)
    else:
        raise ValueError(f"unknown draw-z variant {variant!r}; known: {', '.join(VARIANTS)}")
