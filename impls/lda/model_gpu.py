"""The LDA application on the GPU: the phases of model.iterate on CuPy arrays,
with the CUDA draw-z kernels and no host round trip inside an iteration.

The workload starts from the CPU workload's initial theta and phi, so both
backends run the same application from the same state.  CuPy is imported
inside the functions: importing this module needs no GPU."""

from dataclasses import dataclass

import numpy as np

from impls.lda import model
from impls.lda.drawz_gpu import draw_z_gpu


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
        """Initial theta and phi; the counts are made by the first iteration.
        The state carries the run's Philox generator, so every run (and so
        every variant) consumes the same uniforms."""
        import cupy

        return model.LdaState(theta=self.theta0.copy(), phi=self.phi0.copy(),
                              z=cupy.zeros(self.num_tokens, dtype=cupy.int32), ndk=None, nwk=None, nk=None,
                              rng=cupy.random.Generator(cupy.random.Philox4x3210(self.host.seed)))


def to_gpu(work: model.LdaWorkload) -> GpuWorkload:
    import cupy

    lengths = np.diff(work.doc_ptr)
    doc_of_token = np.repeat(np.arange(lengths.size, dtype=np.int64), lengths)
    return GpuWorkload(work, cupy.asarray(work.doc_ptr), cupy.asarray(work.words), cupy.asarray(doc_of_token),
                       cupy.asarray(lengths), cupy.asarray(work.theta0), cupy.asarray(work.phi0))


def iterate(work: GpuWorkload, state, variant: str, iterations: int, timer):
    """Run `iterations` full iterations on the GPU, timing each phase."""
    import cupy

    M, K = state.theta.shape
    V = state.phi.shape[0]
    alpha, beta = model.ALPHA, model.BETA
    for _ in range(iterations):
        with timer.phase("rng"):
            u = state.rng.random(work.num_tokens, dtype=work.host.dtype)
        with timer.phase("draw_z"):
            draw_z_gpu(variant, work.doc_ptr, work.words, state.theta, state.phi, u, state.z, work.host.W)
        with timer.phase("counts"):
            z = state.z.astype(cupy.int64)
            state.ndk = cupy.bincount(work.doc_of_token * K + z, minlength=M * K).reshape(M, K)
            state.nwk = cupy.bincount(work.words.astype(cupy.int64) * K + z, minlength=V * K).reshape(V, K)
            state.nk = state.nwk.sum(axis=0)
        with timer.phase("update"):
            if work.host.update == "mfm":
                state.theta[...] = (state.ndk + alpha) / (work.lengths[:, None] + K * alpha)
                state.phi[...] = (state.nwk + beta) / (state.nk + V * beta)
            else:
                g = state.rng.standard_gamma(state.ndk + alpha)
                state.theta[...] = g / g.sum(axis=1, keepdims=True)
                g = state.rng.standard_gamma(state.nwk + beta)
                state.phi[...] = g / g.sum(axis=0, keepdims=True)
