"""The LDA application on the GPU: the phases of model.iterate on CuPy arrays,
with the CUDA draw-z kernels and no host round trip inside an iteration.

The workload starts from the CPU workload's initial theta and phi, so both
backends run the same application from the same state.  CuPy is imported
inside the functions: importing this module needs no GPU."""

from dataclasses import dataclass
from importlib.resources import files

import numpy as np

from impls.lda import model
from bench.backend import raw_kernel
from impls.lda.drawz_gpu import draw_z_gpu

COUNTS_SOURCE = files("impls.lda") / "kernels" / "counts.cu"  # package data (pyproject.toml)
COUNTS_BLOCK = 256  # threads per block (whole warps: topic_counts aggregates per warp); not tuned


@dataclass
class GpuWorkload:
    host: model.LdaWorkload
    doc_ptr: object  # cupy arrays from here on
    words: object
    doc_of_token: object
    lengths: object
    theta0: object
    phi0: object

    @property
    def num_tokens(self) -> int:
        return self.host.num_tokens

    def fresh_state(self) -> model.LdaState:
        """Initial theta and phi; the count arrays are allocated here, once,
        and filled by every iteration.  The state carries the run's Philox
        generator, so every run (and so every variant) consumes the same uniforms."""
        import cupy

        (M, K), V = self.theta0.shape, self.phi0.shape[0]
        return model.LdaState(theta=self.theta0.copy(), phi=self.phi0.copy(),
                              z=cupy.zeros(self.num_tokens, dtype=cupy.int32),
                              ndk=cupy.zeros((M, K), dtype=cupy.int32), nwk=cupy.zeros((V, K), dtype=cupy.int32),
                              nk=cupy.zeros(K, dtype=cupy.int32),
                              rng=cupy.random.Generator(cupy.random.Philox4x3210(self.host.seed)))


def to_gpu(work: model.LdaWorkload) -> GpuWorkload:
    import cupy

    lengths = np.diff(work.doc_ptr)
    doc_of_token = np.repeat(np.arange(lengths.size, dtype=np.int64), lengths)
    return GpuWorkload(work, cupy.asarray(work.doc_ptr), cupy.asarray(work.words), cupy.asarray(doc_of_token),
                       cupy.asarray(lengths), cupy.asarray(work.theta0), cupy.asarray(work.phi0))


def _launch(name, threads, args):
    if threads:
        raw_kernel(COUNTS_SOURCE, name)((-(-threads // COUNTS_BLOCK),), (COUNTS_BLOCK,), args)


def topic_counts(doc_of_token, words, z, ndk, nwk, nk):
    """Overwrite ndk [M, K], nwk [V, K] and nk [K] (int32) with the counts of the
    tokens' topics z (int32) per document (doc_of_token, int64) and per word
    (words, int32): C-contiguous CuPy arrays.  Asynchronous (current stream)."""
    if (doc_of_token.dtype != np.int64 or words.dtype != np.int32 or z.dtype != np.int32
            or any(a.dtype != np.int32 or not a.flags.c_contiguous for a in (ndk, nwk, nk))):
        raise TypeError("doc_of_token must be int64; words, z, ndk, nwk and nk int32 and C-contiguous")
    T, (V, K) = z.size, nwk.shape
    for a in (ndk, nwk, nk):  # the kernels only add
        a.fill(0)
    _launch("topic_counts", T, (doc_of_token, words, z, np.int64(T), np.int32(K), ndk, nwk))
    # nk as column sums of nwk rather than T atomics on K addresses (they
    # serialize at small K): one more read of nwk, the size of the memset.
    # Slabs of >= 16 rows, about 2^18 threads: enough to fill the GPU, few atomics.
    slab = max(16, -(-V * K // 2**18))
    _launch("column_sums", K * -(-V // slab), (nwk, np.int64(V), np.int32(K), np.int32(slab), nk))


def iterate(work: GpuWorkload, state, variant: str, iterations: int, timer):
    """Run `iterations` full iterations on the GPU, timing each phase."""
    M, K = state.theta.shape
    V = state.phi.shape[0]
    alpha, beta = work.host.alpha, work.host.beta
    for _ in range(iterations):
        with timer.phase("rng"):
            u = state.rng.random(work.num_tokens, dtype=work.host.dtype)
        with timer.phase("draw_z"):
            draw_z_gpu(variant, work.doc_ptr, work.words, state.theta, state.phi, u, state.z, work.host.W)
        with timer.phase("counts"):
            topic_counts(work.doc_of_token, work.words, state.z, state.ndk, state.nwk, state.nk)
        with timer.phase("update"):
            if work.host.update == "mfm":
                state.theta[...] = (state.ndk + alpha) / (work.lengths[:, None] + K * alpha)
                state.phi[...] = (state.nwk + beta) / (state.nk + V * beta)
            else:
                model.dirichlet_update(state.rng, state.ndk, state.nwk, alpha, beta, state.theta, state.phi)
