"""The dense (uncollapsed) LDA application of the butterfly paper, CPU backend.

State: theta (M x K), phi (V x K: the K topics of a word are contiguous), z per
token.  One iteration draws z for every token, counts document-topic and
word-topic assignments, and updates theta and phi, either by mean-for-mode
((count + alpha) / (n + K alpha)) or by sampling them from their Dirichlet
conditionals: the application variants of the paper's Figure 6.
"""

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from impls.lda import drawz_cpu

UPDATES = {
    "mfm": "mean-for-mode estimates of theta and phi",
    "dirichlet": "theta and phi sampled from their Dirichlet conditionals",
}
PRECISIONS = {"f32": np.float32, "f64": np.float64}
PHASES = ("rng", "draw_z", "counts", "update")
ALPHA = 0.1
BETA = 0.01


def uniforms(seed: int, iteration: int, num_tokens: int, dtype) -> np.ndarray:
    """One uniform in [0, 1) per token per iteration, indexed by token, so that
    every variant (and the GPU) consumes the same random numbers."""
    return np.random.default_rng([seed, iteration]).random(num_tokens, dtype=dtype)


@njit(cache=True, parallel=True)
def doc_topic_counts(doc_ptr, z, ndk):
    for m in prange(doc_ptr.size - 1):
        ndk[m, :] = 0
        for t in range(doc_ptr[m], doc_ptr[m + 1]):
            ndk[m, z[t]] += 1


@njit(cache=True)
def word_topic_counts(words, z, nwk, nk):
    # Sequential: tokens of one word are spread over all documents, and the
    # count is O(T), cheap beside the O(T K) draw.
    nwk[:, :] = 0
    nk[:] = 0
    for t in range(words.size):
        nwk[words[t], z[t]] += 1
        nk[z[t]] += 1


@njit(cache=True, parallel=True)
def mean_for_mode(doc_ptr, ndk, nwk, nk, alpha, beta, theta, phi):
    K = theta.shape[1]
    V = phi.shape[0]
    for m in prange(theta.shape[0]):
        denom = doc_ptr[m + 1] - doc_ptr[m] + K * alpha
        for k in range(K):
            theta[m, k] = (ndk[m, k] + alpha) / denom
    for v in prange(V):
        for k in range(K):
            phi[v, k] = (nwk[v, k] + beta) / (nk[k] + V * beta)


def dirichlet_update(rng, ndk, nwk, alpha, beta, theta, phi):
    g = rng.standard_gamma(ndk + alpha)
    theta[:] = g / g.sum(axis=1, keepdims=True)
    g = rng.standard_gamma(nwk + beta)
    phi[:] = g / g.sum(axis=0, keepdims=True)


@dataclass
class LdaState:
    theta: np.ndarray
    phi: np.ndarray
    z: np.ndarray
    ndk: np.ndarray
    nwk: np.ndarray
    nk: np.ndarray
    rng: object = None  # the GPU backend's generator of uniforms


@dataclass
class LdaWorkload:
    """A corpus padded to a multiple of W plus the initial theta and phi that
    every measured run starts from, so all variants do the same work."""

    doc_ptr: np.ndarray
    words: np.ndarray
    vocab_size: int
    K: int
    W: int
    dtype: type
    update: str
    seed: int
    theta0: np.ndarray
    phi0: np.ndarray
    nwk0: np.ndarray  # the initial topics' word-topic counts (phi0's), for an evaluation at iteration 0
    alpha: float = ALPHA
    beta: float = BETA

    @property
    def num_tokens(self) -> int:
        return int(self.words.size)

    def fresh_state(self) -> LdaState:
        return LdaState(
            theta=self.theta0.copy(),
            phi=self.phi0.copy(),
            z=np.zeros(self.num_tokens, dtype=np.int32),
            ndk=np.zeros(self.theta0.shape, dtype=np.int32),
            nwk=np.zeros(self.phi0.shape, dtype=np.int32),
            nk=np.zeros(self.K, dtype=np.int32),
        )


def make_workload(corpus, K: int, W: int, precision: str, update: str, seed: int = 0, alpha: float = ALPHA,
                  beta: float = BETA) -> LdaWorkload:
    """Pad the corpus to a multiple of W and start from a random assignment; the priors
    alpha and beta are the paper's unless given."""
    padded = corpus.padded(W)
    dtype = PRECISIONS[precision]
    doc_ptr = padded.doc_ptr.astype(np.int64)
    words = padded.words.astype(np.int32)
    rng = np.random.default_rng([seed, K])
    z = rng.integers(0, K, words.size, dtype=np.int32)
    ndk = np.zeros((doc_ptr.size - 1, K), dtype=np.int32)
    nwk = np.zeros((padded.vocab_size, K), dtype=np.int32)
    nk = np.zeros(K, dtype=np.int32)
    doc_topic_counts(doc_ptr, z, ndk)
    word_topic_counts(words, z, nwk, nk)
    theta = np.empty(ndk.shape, dtype=dtype)
    phi = np.empty(nwk.shape, dtype=dtype)
    mean_for_mode(doc_ptr, ndk, nwk, nk, alpha, beta, theta, phi)
    return LdaWorkload(doc_ptr, words, padded.vocab_size, K, W, dtype, update, seed, theta, phi, nwk, alpha, beta)


def iterate(work: LdaWorkload, state: LdaState, variant: str, iterations: int, timer, first: int = 0):
    """Run `iterations` full iterations of the application, timing each phase."""
    gamma_rng = np.random.default_rng([work.seed, first, 1])
    for it in range(first, first + iterations):
        with timer.phase("rng"):
            u = uniforms(work.seed, it, work.num_tokens, work.dtype)
        with timer.phase("draw_z"):
            drawz_cpu.draw_z(variant, work.doc_ptr, work.words, state.theta, state.phi, u, state.z, work.W)
        with timer.phase("counts"):
            doc_topic_counts(work.doc_ptr, state.z, state.ndk)
            word_topic_counts(work.words, state.z, state.nwk, state.nk)
        with timer.phase("update"):
            if work.update == "mfm":
                mean_for_mode(work.doc_ptr, state.ndk, state.nwk, state.nk, work.alpha, work.beta, state.theta,
                              state.phi)
            else:
                dirichlet_update(gamma_rng, state.ndk, state.nwk, work.alpha, work.beta, state.theta, state.phi)
