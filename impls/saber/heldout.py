"""One held-out evaluator for every system (Wallach et al. 2009, partially observed
documents), so that their convergence curves are comparable.

The split is the corpus's own (bench.corpus Corpus.heldout_split): random documents held
out of training, each one's shuffled tokens halved into an observed and an evaluated part;
here at most HELDOUT_DOCUMENTS documents and a tenth of the corpus, from a fixed seed. A
system's model is its counts B (word by topic), from which every system's phi is formed
alike: phi_vk = (B_vk + beta) / (n_k + V beta). With phi fixed, each held-out document's
theta is estimated from its observed half by FOLD_IN_ITERATIONS fixed-point iterations from
uniform, theta_k ∝ alpha + the expected count of topic k among the observed tokens (alpha as
a pseudo-count, which stays positive for alpha < 1), the same for every system; the score is
the mean over the evaluated half's tokens of log sum_k theta_dk phi_vk. The ceiling on a
synthetic corpus is the same mean under the generating theta and phi. It runs on every core
(numba), or on the GPU (fold_in, CuPy) in a memory pool of its own (evaluate).
"""

import dataclasses

import numba
import numpy as np

from bench.backend import to_host
from bench.corpus import Corpus, HeldOut
from bench.errors import BenchError
from impls.saber.model import alpha_of

HELDOUT_DOCUMENTS = 1000
FOLD_IN_ITERATIONS = 50
SPLIT_SEED = 20090614  # Wallach et al., ICML 2009
PAIR_BLOCK_BYTES = 1 << 28  # fold_in gathers rows of phi and of theta for this many bytes of pairs at a time


def split(corpus: Corpus, documents: int = HELDOUT_DOCUMENTS) -> HeldOut:
    held = corpus.heldout_split(min(0.1, documents / max(1, corpus.num_docs)), seed=SPLIT_SEED)
    if held.evaluated.num_docs == 0:
        raise BenchError(f"{corpus.num_docs} documents leave none to hold out for the held-out log-likelihood "
                         "(a tenth of them, at most 1000): use a larger scale")
    return held


def compact(held: HeldOut) -> tuple[HeldOut, np.ndarray]:
    """The held-out halves with their words renumbered 0..U-1 in the order of `rows`, the U
    word ids they use (train as it was): phi is then needed for those rows alone (at
    K = 10,000 a V = 100,000 phi is 8 GB in float64)."""
    observed, evaluated = held.observed, held.evaluated
    rows, renumbered = np.unique(np.concatenate([observed.words, evaluated.words]), return_inverse=True)

    def part(corpus: Corpus, words: np.ndarray) -> Corpus:
        return dataclasses.replace(corpus, words=words.astype(np.int32), vocab_size=rows.size, vocab=None,
                                   true_phi=None if corpus.true_phi is None else corpus.true_phi[rows])

    first = observed.words.size  # the observed halves' tokens come first in `renumbered`
    return HeldOut(held.train, part(observed, renumbered[:first]), part(evaluated, renumbered[first:])), rows


def phi_of(b, beta: float, rows: np.ndarray | None = None, gpu: bool = False):
    """phi [V, K], or its `rows`, in float64 from the counts B [V, K] (any integer type) on the
    host or a GPU: on the host (from a GPU only n_k and those rows are copied), or on the GPU
    for its evaluator (gpu; from the host those rows are copied)."""
    on_gpu = hasattr(b, "get")
    if gpu or on_gpu:
        import cupy
    index = cupy.asarray(rows) if rows is not None and on_gpu else rows
    move = cupy.asarray if gpu else to_host
    totals = move(b.sum(axis=0, dtype=np.int64)).astype(np.float64)
    phi = move(b if rows is None else b[index]).astype(np.float64)
    phi += beta  # in place: at K = 10,000 each array of a held-out set's rows is gigabytes
    phi /= totals + b.shape[0] * beta
    return phi


def gpu_bytes(held: HeldOut, topics: int) -> int:
    """About the most GPU memory an evaluation on the GPU holds at once: two float64 arrays of
    its words' rows (phi in both orders in fold_in; phi_of holds less), theta and its updates,
    and a block of gathered rows with their products."""
    return 16 * held.observed.vocab_size * topics + 5 * 8 * held.observed.num_docs * topics + 3 * PAIR_BLOCK_BYTES


_gpu_pool = None  # the GPU evaluation's memory pool (evaluate), empty between evaluations


def evaluate(held: HeldOut, b, beta: float, rows: np.ndarray, alpha: float, gpu: bool) -> float:
    """log_likelihood of the phi that counts B give (phi_of's `rows`), on every core or on the
    GPU (gpu), there from a memory pool of its own, emptied at the end: a run's budget (CuPy's
    pool limit) and what it holds stay the training's."""
    if not gpu:
        return log_likelihood(held, phi_of(b, beta, rows), alpha)
    import cupy

    global _gpu_pool
    if _gpu_pool is None:
        _gpu_pool = cupy.cuda.MemoryPool()
    try:
        with cupy.cuda.using_allocator(_gpu_pool.malloc):
            return log_likelihood(held, phi_of(b, beta, rows, gpu=True), alpha)
    finally:
        _gpu_pool.free_all_blocks()


SEPARATION_TOPICS = 64  # topics drawn for topic_separation: every pair of them (2016)


def topic_separation(b, beta: float, topics: int = SEPARATION_TOPICS) -> float:
    """The mean Jensen-Shannon divergence (nats) between the word distributions of two trained
    topics, phi formed as phi_of forms it, over every pair of `topics` topics drawn at random
    (a fixed seed; all of them where there are fewer): 0 where topics are equal, log 2 where
    disjoint. From counts B [V, K] on the host or a GPU (their columns alone are copied)."""
    chosen = np.sort(np.random.default_rng(SPLIT_SEED).choice(b.shape[1], min(b.shape[1], topics), replace=False))
    if hasattr(b, "get"):
        import cupy

        chosen = cupy.asarray(chosen)
    phi = phi_of(b[:, chosen], beta)  # a topic's column of phi depends on its own counts alone
    plogp = phi * np.log(phi)
    divergences = []
    for i in range(phi.shape[1] - 1):
        p, q = phi[:, i:i + 1], phi[:, i + 1:]
        mix = (p + q) / 2
        divergences.append(((plogp[:, i:i + 1] + plogp[:, i + 1:]) / 2 - mix * np.log(mix)).sum(axis=0))
    return float(np.concatenate(divergences).mean()) if divergences else float("nan")


def log_likelihood(held: HeldOut, phi, alpha: float, iterations: int = FOLD_IN_ITERATIONS) -> float:
    """The mean log-likelihood per evaluated token, theta folded in from the observed half: on
    every core (numba) for phi on the host, by fold_in on the GPU for phi there."""
    if hasattr(phi, "get"):
        import cupy
        import cupyx.scipy.sparse

        return fold_in(cupy, cupyx.scipy.sparse, held, phi, alpha, iterations)
    per_document = np.empty(held.observed.num_docs)
    _fold_in_log_likelihood(np.ascontiguousarray(phi, np.float64), float(alpha), iterations,
                            *_distinct_words(held.observed), *_distinct_words(held.evaluated), per_document)
    return _mean(per_document.sum(), held.evaluated.num_tokens)


def fold_in(xp, sparse, held: HeldOut, phi, alpha: float, iterations: int = FOLD_IN_ITERATIONS) -> float:
    """The evaluator as whole-array operations of the array module xp and its sparse module
    (CuPy and cupyx.scipy.sparse on a GPU; numpy and scipy.sparse check it on the CPU), every
    held-out document at once: with C [documents, words] the observed halves' counts, an
    iteration is theta <- alpha + theta * ((C / (theta phi^T at C's entries)) phi), normalised
    by row. The numba loop's sums, in another order."""
    documents, words = held.observed.num_docs, phi.shape[0]

    def pairs(corpus: Corpus):
        ptr, word, count = _distinct_words(corpus)
        document = np.repeat(np.arange(corpus.num_docs, dtype=np.int32), np.diff(ptr))
        return xp.asarray(ptr.astype(np.int32)), xp.asarray(word), xp.asarray(count), xp.asarray(document)

    def dots(theta, word, document):  # phi[word_i] . theta[document_i] for every pair, a block at a time
        out = xp.empty(word.size)
        block = max(1, PAIR_BLOCK_BYTES // (8 * phi.shape[1]))
        for begin in range(0, word.size, block):
            end = begin + block
            out[begin:end] = (phi[word[begin:end]] * theta[document[begin:end]]).sum(axis=1)
        return out

    ptr, word, count, document = pairs(held.observed)
    theta = xp.full((documents, phi.shape[1]), 1.0 / phi.shape[1])
    by_column = xp.asfortranarray(phi)  # cuSPARSE's product takes it so (CuPy would copy phi every call)
    for _ in range(iterations if word.size else 0):  # no observed word: theta stays uniform
        scaled = sparse.csr_matrix((count / dots(theta, word, document), word, ptr), shape=(documents, words))
        expected = alpha + theta * (scaled @ by_column)
        theta = expected / expected.sum(axis=1, keepdims=True)
    _, word, count, document = pairs(held.evaluated)
    return _mean(float((count * xp.log(dots(theta, word, document))).sum()), held.evaluated.num_tokens)


def _distinct_words(corpus: Corpus) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each document's distinct words and their counts (ptr, words, counts), in order of
    word: a word's tokens in a document share their terms, which the evaluator then
    computes once (fewer by a held-out half's tokens per distinct word: 1.34 on
    nytimes-synth, below a whole document's)."""
    pairs, counts = np.unique(corpus.pair_ids(), return_counts=True)
    ptr = np.searchsorted(pairs, np.arange(corpus.num_docs + 1, dtype=np.int64) * corpus.vocab_size)
    return ptr, (pairs % corpus.vocab_size).astype(np.int32), counts.astype(np.float64)


def _mean(total: float, tokens: int) -> float:
    return float(total / tokens) if tokens else float("nan")


def ceiling(held: HeldOut) -> float:
    """The same mean under the generating model (the corpus's true theta and phi)."""
    evaluated = held.evaluated
    per_document = np.empty(evaluated.num_docs)
    _log_likelihood_given_theta(np.ascontiguousarray(evaluated.true_phi, np.float64),
                                np.ascontiguousarray(evaluated.true_theta, np.float64), evaluated.doc_ptr,
                                evaluated.words, per_document)
    return _mean(per_document.sum(), evaluated.num_tokens)


def generating_phi(held: HeldOut) -> float:
    """The mean under the generating phi (of a synthetic corpus; `compact`'s rows), theta folded
    in as for every system, under the alpha every system takes at the generating K: what
    recovering the topics is worth (a reference, not a bound)."""
    phi = held.evaluated.true_phi
    return log_likelihood(held, phi, float(alpha_of(phi.shape[1])))


# Reassociation lets the sum vectorize: the evaluation 2.6-2.9x faster at K = 1000-5000, the
# log-likelihood moved by ~1e-16 of itself.
@numba.njit(fastmath={"reassoc", "contract"}, cache=True)
def _dot(x, y):
    total = 0.0
    for k in range(x.size):
        total += x[k] * y[k]
    return total


@numba.njit(parallel=True, cache=True)
def _fold_in_log_likelihood(phi, alpha, iterations, observed_ptr, observed_words, observed_counts, evaluated_ptr,
                            evaluated_words, evaluated_counts, out):
    topics = phi.shape[1]
    for h in numba.prange(out.size):
        theta = np.full(topics, 1.0 / topics)
        expected = np.empty(topics)
        for _ in range(iterations):
            expected[:] = alpha
            for i in range(observed_ptr[h], observed_ptr[h + 1]):
                row = phi[observed_words[i]]
                scale = observed_counts[i] / _dot(row, theta)
                for k in range(topics):
                    expected[k] += row[k] * theta[k] * scale
            theta = expected / expected.sum()
        total = 0.0
        for j in range(evaluated_ptr[h], evaluated_ptr[h + 1]):
            total += evaluated_counts[j] * np.log(_dot(phi[evaluated_words[j]], theta))
        out[h] = total


@numba.njit(parallel=True, cache=True)
def _log_likelihood_given_theta(phi, theta, evaluated_ptr, evaluated_words, out):
    for h in numba.prange(out.size):
        total = 0.0
        for j in range(evaluated_ptr[h], evaluated_ptr[h + 1]):
            total += np.log(_dot(phi[evaluated_words[j]], theta[h]))
        out[h] = total
