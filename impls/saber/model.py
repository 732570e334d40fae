"""SaberLDA's model and its CPU twin (numba, float32): tokens, the counts A (sparse, by
document) and B (dense, by word), B^ (Eq. 2), the per-word sampling structure (alias table
for G0/G1, W-ary tree from G2 on), and the E-step of Alg. 2 with the warp sampling of
Fig. 5, lanes emulated (impls/saber/structures.py).

E-step: every token t of document d and word v draws k from
p(k) ∝ (A_dk + alpha) B^_vk with A and B^ read-only (bulk synchronous): with S the sum
of A_dk B^_vk over the non-zeros of A_d and Q = alpha sum_k B^_vk, the sparse part when
u1 (S + Q) < S (the listing's test misses alpha), else the word's structure. The
uniforms u1, u2 are Philox of (token id, iteration) (impls/saber/philox.py), token ids
in document order, so any processing order (document order, PDOW, chunks) gives the
same topics. M-step: A and B recounted from z.
"""

import functools
from dataclasses import dataclass

import numba
import numpy as np

from bench.backend import gpu_array_module, to_host
from bench.errors import BenchError
from impls.saber import philox
from impls.saber.structures import (MAX_TOPICS, W, alias_sample, build_alias, build_tree, chunked_scan,
                                    lane_partials, level3_size, padded, segmented_count, tree_sample, vote,
                                    warp_scan)

BETA = np.float32(0.01)
STRUCTURES = ("alias", "tree")  # G0, G1: alias; G2-G4: tree


def alpha_of(topics: int) -> np.float32:
    return np.float32(50.0 / topics)


@dataclass
class Counts:
    a_ptr: np.ndarray  # int64 [D + 1]: document d's non-zeros are a_ptr[d]:a_ptr[d + 1]
    a_idx: np.ndarray  # int32 topics, increasing within a document
    a_val: np.ndarray  # int32 counts
    b: np.ndarray  # int32 [V, K]
    topic_totals: np.ndarray  # int64 [K]


@numba.njit(cache=True)
def _document_counts(doc_ptr, z, a_ptr, a_idx, a_val):
    keys = np.empty(z.size, np.int32)
    counts = np.empty(z.size, np.int32)
    filled = 0
    for d in range(doc_ptr.size - 1):
        a_ptr[d] = filled
        n_keys = segmented_count(z[doc_ptr[d]:doc_ptr[d + 1]], keys, counts)
        a_idx[filled:filled + n_keys] = keys[:n_keys]
        a_val[filled:filled + n_keys] = counts[:n_keys]
        filled += n_keys
    a_ptr[doc_ptr.size - 1] = filled
    return filled


@numba.njit(cache=True)
def _word_counts(words, z, b):
    for t in range(words.size):
        b[words[t], z[t]] += 1


def count(doc_ptr: np.ndarray, words: np.ndarray, z: np.ndarray, vocabulary: int, topics: int) -> Counts:
    """A by a segmented count per document (Fig. 8), B by word (the M-step)."""
    a_ptr = np.empty(doc_ptr.size, np.int64)
    a_idx = np.empty(z.size, np.int32)
    a_val = np.empty(z.size, np.int32)
    filled = _document_counts(doc_ptr, z, a_ptr, a_idx, a_val)
    b = np.zeros((vocabulary, topics), np.int32)
    _word_counts(words, z, b)
    return Counts(a_ptr, a_idx[:filled].copy(), a_val[:filled].copy(), b, b.sum(axis=0, dtype=np.int64))


def count_by_sorting(doc_ptr: np.ndarray, words: np.ndarray, z: np.ndarray, vocabulary: int,
                     topics: int) -> Counts:
    """The same counts as G0-G2 rebuild them: all tokens sorted by (document, topic) at once,
    then the runs of equal keys (the rebuild that SSC replaces from G3 on)."""
    doc_of = np.repeat(np.arange(doc_ptr.size - 1), np.diff(doc_ptr))
    key = doc_of.astype(np.int64) * topics + z
    keys, runs = np.unique(key, return_counts=True)  # a sort, then run lengths
    a_ptr = np.searchsorted(keys // topics, np.arange(doc_ptr.size), side="left").astype(np.int64)
    b = np.bincount(words.astype(np.int64) * topics + z, minlength=vocabulary * topics).astype(np.int32)
    b = b.reshape(vocabulary, topics)
    return Counts(a_ptr, (keys % topics).astype(np.int32), runs.astype(np.int32), b, b.sum(axis=0, dtype=np.int64))


def b_hat(counts: Counts) -> np.ndarray:
    """Eq. 2 in float32: (B_vk + beta) / (n_k + V beta), with n_k + V beta = float32(n_k) +
    float32(V) * beta."""
    vocabulary = counts.b.shape[0]
    denominator = counts.topic_totals.astype(np.float32) + np.float32(vocabulary) * BETA
    return (counts.b.astype(np.float32) + BETA) / denominator


@dataclass
class Structures:
    """Per word: the total of B^_v (as the chunked scan adds it) and its sampling structure."""

    kind: str
    totals: np.ndarray  # float32 [V]
    level4: np.ndarray  # tree: float32 [V, padded K]; alias: probabilities [V, K]
    level3: np.ndarray  # tree: float32 [V, level3_size(K)]; alias: int32 aliases [V, K]
    level2: np.ndarray  # tree: float32 [V, W]; alias: unused

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.totals, self.level4, self.level3, self.level2))


@numba.njit(cache=True)
def _build_trees(bhat, totals, l4, l3, l2):
    for v in range(bhat.shape[0]):
        totals[v] = build_tree(bhat[v], l4[v], l3[v], l2[v])


@numba.njit(cache=True)
def _build_aliases(bhat, totals, probability, alias):
    prefix = np.empty(padded(bhat.shape[1]), np.float32)
    for v in range(bhat.shape[0]):
        chunked_scan(bhat[v], prefix)
        totals[v] = prefix[prefix.size - 1]
        build_alias(bhat[v], totals[v], probability[v], alias[v])


def preprocess(bhat: np.ndarray, kind: str) -> Structures:
    vocabulary, topics = bhat.shape
    totals = np.empty(vocabulary, np.float32)
    if kind == "tree":
        l4 = np.empty((vocabulary, padded(topics)), np.float32)
        l3 = np.empty((vocabulary, level3_size(topics)), np.float32)
        l2 = np.empty((vocabulary, W), np.float32)
        _build_trees(bhat, totals, l4, l3, l2)
        return Structures(kind, totals, l4, l3, l2)
    probability = np.empty((vocabulary, topics), np.float32)
    alias = np.empty((vocabulary, topics), np.int32)
    _build_aliases(bhat, totals, probability, alias)
    return Structures(kind, totals, probability, alias, np.empty((vocabulary, 0), np.float32))


@numba.njit(cache=True)
def sparse_draw(a_idx, a_val, start, stop, bhat_v, alpha, total_v, u1, u2, products, prefix, own=-1,
                bhat_own=np.float32(0.0)) -> int:
    """Fig. 5 with its bugs fixed, its search ours: the products A_dk B^_vk, their lane
    scan (lane_partials: lane l holds non-zeros l, l + 32, ...), S its last value, the branch
    u1 (S + Q) < S, then, for x = u2 S, the first lane whose scan reaches x (the last lane
    with non-zeros where none does) and within it, its non-zeros' chunked prefix sum from
    the lanes before, the first that reaches x (its last where rounding leaves none): one
    chunk's scan for up to 1024 non-zeros, where the paper scans them all. -1 for the
    word's structure. With the token's own topic `own` left out, its product is
    (A_d,own - 1) bhat_own and total_v is the corrected mass (own_topic_correction); the
    lane scan is the counted products' (a document's tokens of one word share it), then
    the own topic's lane and those after it move by its product's change (one add a lane,
    where a second scan would cost every token of a shared scan a scan of its own; those lanes
    then carry the counted sum's rounding, an ulp of it, where the own product dominates).
    Scratch: products of nnz floats, prefix of W + padded(nnz / W) floats."""
    nnz = stop - start
    own_at = -1  # the own topic's non-zero, found in the products' pass (ESCA's draw: none)
    for i in range(nnz):
        k = a_idx[start + i]
        products[i] = np.float32(a_val[start + i]) * bhat_v[k]
        if k == own:
            own_at = i
    lanes = prefix[:W]
    lane_partials(products, nnz, lanes)
    warp_scan(lanes)
    if own_at >= 0:
        left = np.float32(a_val[start + own_at] - 1) * bhat_own
        delta = left - products[own_at]
        for lane in range(own_at % W, W):
            lanes[lane] += delta
        products[own_at] = left
    s = lanes[W - 1]
    if not u1 * (s + alpha * total_v) < s:
        return -1
    x = u2 * s
    lane = min(vote(lanes, 0, x), nnz - 1)
    base = lanes[lane - 1] if lane > 0 else np.float32(0)
    mine = products[lane:nnz:W]
    walk = prefix[W:W + padded(mine.size)]
    chunked_scan(mine, walk, base)
    for i in range(mine.size):
        if walk[i] >= x:
            return a_idx[start + lane + i * W]
    return a_idx[start + lane + (mine.size - 1) * W]


@numba.njit(cache=True)
def tree_draw(v, u2, total_v, l4, l3, l2) -> int:
    return tree_sample(l4[v], l3[v], l2[v], u2 * total_v)


@numba.njit(cache=True)
def own_topic_correction(bhat_vz, denominator_z, total_v):
    """B^_vz with the token itself taken out of B_vz and n_z, (B^_vz den_z - 1) / (den_z - 1),
    and the word's total with it in place of B^_vz: (bhat_own, mass_v)."""
    one = np.float32(1.0)
    bhat_own = (bhat_vz * denominator_z - one) / (denominator_z - one)
    return bhat_own, total_v - bhat_vz + bhat_own


@numba.njit(cache=True)
def tree_draw_without_own(v, u2, mass_v, l4, l3, l2, own, shrink) -> int:
    """The tree's draw with the own topic's interval [P(own - 1), P(own)) shortened by
    `shrink` (B^_v,own - bhat_own): x below it is drawn as is, x inside it is the own
    topic, x past it is drawn as x + shrink, no further than the word's total (rounding
    can carry it past, into the padding, where there is no topic)."""
    x = u2 * mass_v
    if own > 0 and x < l4[v, own - 1]:
        return tree_sample(l4[v], l3[v], l2[v], x)
    if x < l4[v, own] - shrink:
        return own
    return tree_sample(l4[v], l3[v], l2[v], min(x + shrink, l4[v, l4.shape[1] - 1]))


@numba.njit(cache=True)
def alias_draw(v, u2, total_v, probability, alias, unused) -> int:
    return alias_sample(probability[v], alias[v], u2)


E_STEP_BLOCK = 4096  # tokens a thread draws with one pair of scratch buffers


@numba.njit(cache=True, parallel=True)
def _e_step(order, doc_of, words, a_ptr, a_idx, a_val, bhat, alpha, totals, tree, s4, s3, s2, seed, iteration,
            own_topics, denominators, z):
    # Every core takes blocks of tokens: A and B^ are read-only in the E-step and each
    # token's uniforms are its own, so the topics do not depend on who draws them.
    without_own = own_topics.size > 0
    for block in numba.prange(-(-order.size // E_STEP_BLOCK)):
        products = np.empty(bhat.shape[1], np.float32)
        prefix = np.empty(W + padded(-(-bhat.shape[1] // W)), np.float32)
        for i in range(block * E_STEP_BLOCK, min(order.size, (block + 1) * E_STEP_BLOCK)):
            t = order[i]
            d, v = doc_of[t], words[t]
            u1, u2 = philox.token_uniforms(seed, iteration, t)
            own, bhat_own, mass = -1, np.float32(0.0), totals[v]  # ESCA: the own topic counted, no correction
            if without_own:
                own = own_topics[t]
                bhat_own, mass = own_topic_correction(bhat[v, own], denominators[own], totals[v])
            k = sparse_draw(a_idx, a_val, a_ptr[d], a_ptr[d + 1], bhat[v], alpha, mass, u1, u2, products, prefix,
                            own, bhat_own)
            if k < 0:
                k = tree_draw_without_own(v, u2, mass, s4, s3, s2, own, bhat[v, own] - bhat_own) if without_own \
                    else tree_draw(v, u2, mass, s4, s3, s2) if tree else alias_draw(v, u2, mass, s4, s3, s2)
            z[t] = k


def check_without_own(kind: str) -> None:
    if kind != "tree":
        raise BenchError("leaving the own topic out needs the tree's prefix sums; the alias table (G0, G1) has none")


def e_step(order: np.ndarray, doc_of: np.ndarray, words: np.ndarray, counts: Counts, bhat: np.ndarray,
           structures: Structures, seed: int, iteration: int, own_topics: np.ndarray | None = None) -> np.ndarray:
    """New topics of every token, visited in `order` (token ids): the order changes nothing.
    With `own_topics` (the topics counted in `counts`; the tree only), each token's own topic
    is left out of A, B and n_k, exactly, by a correction of the one topic (collapsed
    Gibbs's conditional on the last iteration's counts)."""
    z = np.empty(words.size, np.int32)
    if own_topics is None:
        own_topics, denominators = np.empty(0, np.int32), np.empty(0, np.float32)
    else:
        check_without_own(structures.kind)
        denominators = counts.topic_totals.astype(np.float32) + np.float32(bhat.shape[0]) * BETA  # as b_hat's
    _e_step(order, doc_of, words, counts.a_ptr, counts.a_idx, counts.a_val, bhat, alpha_of(bhat.shape[1]),
            structures.totals, structures.kind == "tree", structures.level4,
            structures.level3, structures.level2, np.uint32(seed), np.uint32(iteration), own_topics, denominators, z)
    return z


@numba.njit(cache=True)
def _initial_topics(seed, topics, z):
    for t in range(z.size):
        u, _ = philox.token_uniforms(seed, philox.INIT_ITERATION, t)
        z[t] = min(np.int32(u * np.float32(topics)), topics - 1)


def initial_topics(tokens: int, topics: int, seed: int) -> np.ndarray:
    """z uniform over the topics, from the same generator (counter iteration 2^32 - 1)."""
    check_topics(topics)
    z = np.empty(tokens, np.int32)
    _initial_topics(np.uint32(seed), topics, z)
    return z


def check_topics(topics: int) -> None:
    if not 1 <= topics <= MAX_TOPICS:
        raise BenchError(f"K = {topics}: the W-ary tree holds 1 to {MAX_TOPICS:,} topics (32^3)")


@dataclass
class Chunk:
    """A run of whole documents, its positions local (int32, document order) and the orders
    the stages take them in: PDOW (by word, stable) cut into segments of one word each."""

    first_token: int  # the corpus's id of position 0 (the draws' counter)
    first_document: int
    doc_ptr: np.ndarray  # [D_c + 1]
    doc_of: np.ndarray  # [n]
    words: np.ndarray  # [n]
    by_word: np.ndarray  # [n] positions in PDOW order
    segment_ptr: np.ndarray  # [S + 1]: by_word[segment_ptr[s]:segment_ptr[s + 1]] share a word (a block's work)
    schedule: np.ndarray  # [S] the segments by decreasing length (Sec. 3.4: the longest first)

    @property
    def tokens(self) -> int:
        return int(self.words.size)

    @property
    def documents(self) -> int:
        return int(self.doc_ptr.size - 1)


SEGMENT_TOKENS = 2048  # a frequent word's tokens are cut into segments of at most this many


def chunk_layout(doc_ptr: np.ndarray, words: np.ndarray, chunks: int, xp=None) -> list[Chunk]:
    """The documents partitioned into `chunks` runs of about equal tokens (fewer when
    documents are fewer or longer), each laid out for the GPU. A word's tokens in a chunk
    form segments of at most SEGMENT_TOKENS: with a segment per word, the few frequent
    words (Zipf) would leave one block of the GPU working on millions of tokens. xp, the
    array module of the stable sort by word (the same order either way), is CuPy where
    there is a GPU: numpy's takes minutes on a billion tokens."""
    if xp is None:
        xp = gpu_array_module() or np
    documents = doc_ptr.size - 1
    cuts = np.searchsorted(doc_ptr, np.linspace(0, doc_ptr[-1], chunks + 1)[1:-1])
    bounds = np.unique(np.concatenate([[0], np.clip(cuts, 0, documents), [documents]]))
    layout = []
    for d0, d1 in zip(bounds[:-1], bounds[1:]):
        t0, t1 = int(doc_ptr[d0]), int(doc_ptr[d1])
        if t1 - t0 >= 2**31:
            raise BenchError(f"a chunk of {t1 - t0:,} tokens: positions are int32; use more chunks")
        local_ptr = (doc_ptr[d0:d1 + 1] - t0).astype(np.int32)
        chunk_words = words[t0:t1]
        by_word = to_host(xp.argsort(xp.asarray(chunk_words), kind="stable").astype(np.int32))
        counts = np.bincount(chunk_words)  # by_word sorts ascending: the used words' counts are its runs
        word_ptr = np.append(0, np.cumsum(counts[counts > 0]))
        pieces = -(-np.diff(word_ptr) // SEGMENT_TOKENS)
        within = np.arange(pieces.sum()) - np.repeat(np.cumsum(pieces) - pieces, pieces)
        segment_ptr = np.append(np.repeat(word_ptr[:-1], pieces) + within * SEGMENT_TOKENS, t1 - t0).astype(np.int32)
        schedule = np.argsort(-np.diff(segment_ptr), kind="stable").astype(np.int32)
        layout.append(Chunk(t0, int(d0), local_ptr, np.repeat(np.arange(d1 - d0, dtype=np.int32), np.diff(local_ptr)),
                            chunk_words, by_word, segment_ptr, schedule))
    return layout


def latest_only(function):
    """`function` cached for its latest arguments alone, the value kept before is dropped before
    a new one is computed: two layouts of a 2-billion-token corpus (17 GB each) must not live
    at once, as they would in an lru_cache of size 1."""
    latest = {}

    @functools.wraps(function)
    def cached(*args):
        if args not in latest:
            latest.clear()
            latest[args] = function(*args)
        return latest[args]

    return cached


def pdow_order(layout: list[Chunk]) -> np.ndarray:
    """Token ids in PDOW order: chunk by chunk, by word inside each."""
    return np.concatenate([chunk.first_token + chunk.by_word.astype(np.int64) for chunk in layout])
