"""One held-out evaluator for every system (Wallach et al. 2009, partially observed
documents), so that their convergence curves are comparable.

The split: every `step`-th document of the corpus (a spread of lengths: synthetic corpora
are sorted longest first), at most HELDOUT_DOCUMENTS of them and a tenth of the corpus, is
held out of training; each
of its tokens goes to the observed or the evaluated half by a fair coin (seeded). A system's
model is its counts B (word by topic), from which every system's phi is formed alike:
phi_vk = (B_vk + beta) / (n_k + V beta). With phi fixed, each held-out document's theta is
estimated from its observed half by FOLD_IN_ITERATIONS fixed-point iterations (EM for the
topic proportions, Dirichlet(alpha) prior, from uniform), the same for every system; the
score is the mean over the evaluated half's tokens of log sum_k theta_dk phi_vk. The ceiling
on a synthetic corpus is the same mean under the generating theta and phi.
"""

from dataclasses import dataclass

import numba
import numpy as np

HELDOUT_DOCUMENTS = 1000
FOLD_IN_ITERATIONS = 50
SPLIT_SEED = 20090614  # Wallach et al., ICML 2009


@dataclass
class Split:
    train_doc_ptr: np.ndarray  # the training corpus: the documents not held out
    train_words: np.ndarray
    heldout: np.ndarray  # the held-out documents' ids in the whole corpus
    observed_ptr: np.ndarray  # held-out document h's observed words: observed_words[observed_ptr[h]:...[h + 1]]
    observed_words: np.ndarray
    evaluated_ptr: np.ndarray
    evaluated_words: np.ndarray

    @property
    def evaluated_tokens(self) -> int:
        return int(self.evaluated_words.size)


def split(doc_ptr: np.ndarray, words: np.ndarray, documents: int = HELDOUT_DOCUMENTS,
          seed: int = SPLIT_SEED) -> Split:
    """Every step-th document held out (step >= 10: at most a tenth of the corpus), its
    tokens halved by a seeded coin."""
    total = doc_ptr.size - 1
    step = max(10, total // documents)
    heldout = np.arange(step - 1, total, step)[:documents]
    held = np.zeros(total, bool)
    held[heldout] = True
    lengths = np.diff(doc_ptr)
    token_held = np.repeat(held, lengths)
    train_lengths = lengths[~held]
    coin = np.random.default_rng(seed).random(int(token_held.sum())) < 0.5
    held_words = words[token_held]
    held_doc = np.repeat(np.arange(heldout.size), lengths[heldout])
    return Split(np.concatenate([[0], np.cumsum(train_lengths)]).astype(doc_ptr.dtype), words[~token_held],
                 heldout, _ptr(held_doc[coin], heldout.size), held_words[coin],
                 _ptr(held_doc[~coin], heldout.size), held_words[~coin])


def _ptr(document_of_token: np.ndarray, documents: int) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(np.bincount(document_of_token, minlength=documents))]).astype(np.int64)


def phi_of(b: np.ndarray, beta: float) -> np.ndarray:
    """phi [V, K] in float64 from the counts B [V, K] (any integer type)."""
    counts = b.astype(np.float64)
    return (counts + beta) / (counts.sum(axis=0) + b.shape[0] * beta)


def log_likelihood(s: Split, phi: np.ndarray, alpha: float, iterations: int = FOLD_IN_ITERATIONS) -> float:
    """The mean log-likelihood per evaluated token, theta folded in from the observed half."""
    per_document = np.empty(s.heldout.size)
    _fold_in_log_likelihood(np.ascontiguousarray(phi, np.float64), float(alpha), iterations, s.observed_ptr,
                            s.observed_words, s.evaluated_ptr, s.evaluated_words, per_document)
    return float(per_document.sum() / max(1, s.evaluated_tokens))


def ceiling(s: Split, theta: np.ndarray, phi: np.ndarray) -> float:
    """The same mean under the generating model: theta [D, K] of the whole corpus, phi [V, K]."""
    per_document = np.empty(s.heldout.size)
    _log_likelihood_given_theta(np.ascontiguousarray(phi, np.float64),
                                np.ascontiguousarray(theta[s.heldout], np.float64), s.evaluated_ptr,
                                s.evaluated_words, per_document)
    return float(per_document.sum() / max(1, s.evaluated_tokens))


@numba.njit(cache=True)
def _dot(x, y):
    total = 0.0
    for k in range(x.size):
        total += x[k] * y[k]
    return total


@numba.njit(parallel=True, cache=True)
def _fold_in_log_likelihood(phi, alpha, iterations, observed_ptr, observed_words, evaluated_ptr, evaluated_words,
                            out):
    topics = phi.shape[1]
    for h in numba.prange(out.size):
        theta = np.full(topics, 1.0 / topics)
        expected = np.empty(topics)
        for _ in range(iterations):
            expected[:] = alpha
            for i in range(observed_ptr[h], observed_ptr[h + 1]):
                row = phi[observed_words[i]]
                weights = row * theta
                expected += weights / weights.sum()
            theta = expected / expected.sum()
        total = 0.0
        for j in range(evaluated_ptr[h], evaluated_ptr[h + 1]):
            total += np.log(_dot(phi[evaluated_words[j]], theta))
        out[h] = total


@numba.njit(parallel=True, cache=True)
def _log_likelihood_given_theta(phi, theta, evaluated_ptr, evaluated_words, out):
    for h in numba.prange(out.size):
        total = 0.0
        for j in range(evaluated_ptr[h], evaluated_ptr[h + 1]):
            total += np.log(_dot(phi[evaluated_words[j]], theta[h]))
        out[h] = total
