"""Correctness of the draw-z variants: exact agreement and a chi-square test.

With dyadic weights (small integers times a power of two) every partial sum
is exact in both precisions, whatever the order of the additions, so every
algorithm must return the identical z for the identical uniforms.  The
chi-square test then checks the draws against the exact probabilities."""

from dataclasses import dataclass

import numpy as np
from scipy import stats

from impls.lda import drawz_cpu
from impls.lda.model import PRECISIONS

DENOMINATOR = 8  # weights are i / 8 with 0 <= i < 8: products and sums stay exact


def dyadic_problem(K: int, W: int, precision: str, rng, num_warps: int = 4, max_length: int = 150):
    """Documents of unequal lengths (some empty, padded to a multiple of W),
    dyadic theta and phi with at least one positive weight per document, and
    one uniform per token."""
    dtype = PRECISIONS[precision]
    num_docs = num_warps * W
    lengths = rng.integers(0, max_length + 1, num_docs)
    lengths[rng.random(num_docs) < 0.1] = 0
    lengths = np.sort(lengths)[::-1]  # longest first, as the corpora are
    doc_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    vocab_size = 64
    words = rng.integers(0, vocab_size, int(doc_ptr[-1])).astype(np.int32)
    for m in range(0, num_docs, 2):  # every other document word by word, as the corpora list their tokens
        words[doc_ptr[m]:doc_ptr[m + 1]].sort()  # (pairscan's repeated pairs side by side); the rest in any order
    theta = (rng.integers(0, DENOMINATOR, (num_docs, K)) / DENOMINATOR).astype(dtype)
    theta[np.arange(num_docs), rng.integers(0, K, num_docs)] = 1
    phi = (rng.integers(0, DENOMINATOR, (vocab_size, K)) / DENOMINATOR).astype(dtype)
    phi[np.arange(vocab_size), rng.integers(0, K, vocab_size)] = 1
    phi[rng.integers(0, vocab_size), :] = 0  # a word no topic can produce: z is then K-1
    u = rng.random(words.size, dtype=dtype)
    return doc_ptr, words, theta, phi, u


def token_probabilities(doc_ptr, words, theta, phi) -> np.ndarray:
    """Exact (float64) probabilities of each topic for each token (T x K)."""
    doc_of_token = np.repeat(np.arange(doc_ptr.size - 1), np.diff(doc_ptr))
    weights = theta[doc_of_token].astype(np.float64) * phi[words].astype(np.float64)
    weights[weights.sum(axis=1) == 0, -1] = 1  # all-zero weights: every variant returns K-1
    return weights / weights.sum(axis=1, keepdims=True)


def chi_square_p(z: np.ndarray, probabilities: np.ndarray) -> float:
    """Chi-square test of the topic counts against their expectation, bins with
    expected count < 5 merged.  The draws are of different distributions, so
    the counts vary less than a multinomial's: the test is conservative."""
    K = probabilities.shape[1]
    expected = probabilities.sum(axis=0)
    observed = np.bincount(z, minlength=K).astype(np.float64)
    small = expected < 5
    exp_bins = np.append(expected[~small], expected[small].sum())
    obs_bins = np.append(observed[~small], observed[small].sum())
    if small.sum() == 0 or exp_bins[-1] == 0:
        exp_bins, obs_bins = exp_bins[:-1], obs_bins[:-1]
    if exp_bins.size < 2:
        return 1.0
    return float(stats.chisquare(obs_bins, exp_bins).pvalue)


def draw_on_gpu(variant, doc_ptr, words, theta, phi, u, z, W):
    """drawz_gpu.draw_z_gpu on host arrays: copy in, draw, copy z back."""
    import cupy

    from impls.lda.drawz_gpu import draw_z_gpu

    z_gpu = cupy.asarray(z)
    draw_z_gpu(variant, *(cupy.asarray(a) for a in (doc_ptr, words, theta, phi, u)), z_gpu, W)
    z[:] = z_gpu.get()


@dataclass
class Case:
    """A fresh dyadic problem, its exact probabilities and the CPU reference z."""

    problem: tuple
    probabilities: np.ndarray
    reference: np.ndarray
    W: int


def make_case(K: int, W: int, precision: str, seed: int, **problem) -> Case:
    """`problem` passes num_warps and max_length on to dyadic_problem."""
    rng = np.random.default_rng([seed, K, W, 0 if precision == "f32" else 1])
    doc_ptr, words, theta, phi, u = dyadic_problem(K, W, precision, rng, **problem)
    reference = np.empty(words.size, dtype=np.int32)
    drawz_cpu.draw_z("alg1", doc_ptr, words, theta, phi, u, reference, W)
    return Case((doc_ptr, words, theta, phi, u), token_probabilities(doc_ptr, words, theta, phi), reference, W)


def run_variant(case: Case, variant: str, draw=drawz_cpu.draw_z) -> np.ndarray:
    z = np.full(case.reference.size, -1, dtype=np.int32)  # poisoned: unwritten tokens show
    draw(variant, *case.problem, z, case.W)
    return z


def _chi_square_p(case: Case, z: np.ndarray) -> float:
    """chi_square_p of a variant's z; 0 when a token was left unwritten."""
    return chi_square_p(z, case.probabilities) if z.min(initial=0) >= 0 else 0.0


def agrees(case: Case, z: np.ndarray, alpha: float) -> tuple[bool, str]:
    """Identical to the reference z, and draws that pass the chi-square test at alpha."""
    differ = int(np.count_nonzero(z != case.reference))
    p = _chi_square_p(case, z)
    detail = f"{differ} of {z.size} z differ" if differ else f"z identical ({z.size} tokens)"
    return differ == 0 and p >= alpha, f"{detail}; chi-square p = {p:.3g}"


def verify_point(K: int, W: int, precision: str, seed: int, draw=drawz_cpu.draw_z, variants=None,
                 **problem) -> dict:
    """Every variant with `draw` on one fresh dyadic problem: mismatches against the
    CPU reference z and chi-square p per variant."""
    case = make_case(K, W, precision, seed, **problem)
    draws = {variant: run_variant(case, variant, draw) for variant in variants or drawz_cpu.VARIANTS}
    return {
        "K": K, "W": W, "precision": precision, "tokens": int(case.reference.size),
        "mismatches": {v: int(np.count_nonzero(z != case.reference)) for v, z in draws.items()},
        "chi2_p": {v: _chi_square_p(case, z) for v, z in draws.items()},
    }
