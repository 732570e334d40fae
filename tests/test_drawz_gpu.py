"""The GPU draw-z kernels against the CPU reference (needs CuPy and a GPU).

With dyadic weights every partial sum is exact, so every GPU variant must give
z identical to drawz_cpu's alg1; with real-valued weights each GPU variant does
its CPU twin's arithmetic in the same order, so it must give that twin's z.
The output is poisoned with -1 before every launch, so an unwritten token shows.
"""

import numpy as np
import pytest

from impls.lda import drawz_cpu, drawz_gpu
from impls.lda.model import PRECISIONS
from impls.lda.verify import chi_square_p, dyadic_problem, token_probabilities

pytestmark = pytest.mark.gpu

W = 32
GPU_VARIANTS = list(drawz_cpu.VARIANTS)
_sample = np.random.default_rng(2025).choice(np.arange(131, 480), 16, replace=False).tolist() + \
    np.random.default_rng(2026).choice(np.arange(545, 1000), 16, replace=False).tolist()
K_GROUPS = {
    "1-130": list(range(1, 131)),
    "480-544": list(range(480, 545)),
    "1000-1030": list(range(1000, 1031)),
    "random": sorted(_sample),  # seeded sample of the Ks up to 1024 not listed above
}


def _configs(variant, K):
    """Every kernel of a variant at K: warpscan's two ways of loading rows, the others' stores
    (segscan has one kernel a K)."""
    if variant in drawz_gpu.TILED:
        return [{"loads": loads} for loads in ("scalar", "vector")]
    if variant == "segscan":
        return [{}]
    return [{"storage": s} for s in (("local", "global") if K <= drawz_gpu.KMAX_LOCAL else ("global",))]


def _to_device(*arrays):
    import cupy

    return [cupy.asarray(a) for a in arrays]


def _draw_gpu(variant, problem, **config):
    """z from one GPU launch on a poisoned output, copied back to the host; config: storage,
    max_registers, loads."""
    import cupy

    d_doc_ptr, d_words, d_theta, d_phi, d_u = problem
    z = cupy.full(d_words.size, -1, dtype=cupy.int32)
    drawz_gpu.draw_z_gpu(variant, d_doc_ptr, d_words, d_theta, d_phi, d_u, z, W, **config)
    cupy.cuda.get_current_stream().synchronize()
    return cupy.asnumpy(z)


def _draw_cpu(variant, doc_ptr, words, theta, phi, u):
    z = np.full(words.size, -1, dtype=np.int32)
    drawz_cpu.draw_z(variant, doc_ptr, words, theta, phi, u, z, W)
    assert (z >= 0).all()
    return z


@pytest.mark.parametrize("group", list(K_GROUPS))
@pytest.mark.parametrize("precision", ["f32", "f64"])
def test_every_gpu_variant_matches_the_cpu_reference_on_dyadic_weights(precision, group):
    pytest.importorskip("cupy")
    failures = []
    for K in K_GROUPS[group]:
        rng = np.random.default_rng([2024, K, 0 if precision == "f32" else 1])
        host = dyadic_problem(K, W, precision, rng, num_warps=2 + K % 3, max_length=40)
        doc_ptr, words, theta, phi, u = host
        assert words.size > 0
        reference = _draw_cpu("alg1", *host)
        device = _to_device(*host)
        for variant in GPU_VARIANTS:
            for config in _configs(variant, K):
                z = _draw_gpu(variant, device, **config)
                unwritten = int(np.count_nonzero(z < 0))
                mismatches = int(np.count_nonzero(z != reference))
                if unwritten or mismatches:
                    failures.append((K, variant, config, unwritten, mismatches, words.size))
    assert not failures, f"(K, variant, kernel, unwritten, mismatches, tokens): {failures[:20]}"


def _real_problem(K, precision, seed, num_docs=256, vocab_size=300, max_length=200):
    """Real-valued weights (Dirichlet theta, skewed phi), some empty documents; the first
    half of the documents list their tokens word by word (so pairscan's pairs repeat), the
    rest in any order."""
    rng = np.random.default_rng([seed, K])
    dtype = PRECISIONS[precision]
    lengths = np.sort(rng.integers(0, max_length + 1, num_docs))[::-1]
    lengths[rng.random(num_docs) < 0.05] = 0
    lengths = np.sort(lengths)[::-1]
    doc_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    words = rng.integers(0, vocab_size // 10 if K % 2 else vocab_size, int(doc_ptr[-1])).astype(np.int32)
    for m in range(num_docs // 2):
        words[doc_ptr[m]:doc_ptr[m + 1]].sort()
    theta = rng.dirichlet(np.full(K, 0.5), num_docs).astype(dtype)
    phi = (rng.random((vocab_size, K)) ** 3).astype(dtype)
    u = rng.random(words.size, dtype=dtype)
    return doc_ptr, words, theta, phi, u


@pytest.mark.parametrize("precision", ["f32", "f64"])
def test_every_gpu_variant_matches_its_cpu_twin_on_real_weights(precision):
    # The same arithmetic in the same order, so even rounding agrees: this
    # checks the data movement (transpose, butterfly, search), not only the sums.
    pytest.importorskip("cupy")
    failures = []
    for K in (1, 5, 31, 32, 33, 100, 517, 964, 992, 1024, 1030):  # 964, 992: warpscan widens its chunk
        host = _real_problem(K, precision, seed=5, num_docs=64, max_length=60)
        device = _to_device(*host)
        for variant in GPU_VARIANTS:
            twin = _draw_cpu(variant, *host)
            for config in _configs(variant, K):
                z = _draw_gpu(variant, device, **config)
                if (z != twin).any():
                    failures.append((K, variant, config, int(np.count_nonzero(z != twin))))
    assert not failures, f"(K, variant, kernel, mismatches): {failures}"


@pytest.mark.parametrize("precision", ["f32", "f64"])
def test_warpscan_vector_loads_fall_back_on_rows_not_16_byte_aligned(precision):
    """theta and phi one value past a 16-byte boundary (C-contiguous views of a longer buffer):
    the vector kernel loads them one value at a time and still draws its twin's topics."""
    cupy = pytest.importorskip("cupy")
    host = _real_problem(1024, precision, seed=8, num_docs=64, max_length=60)
    doc_ptr, words, theta, phi, u = host
    device = _to_device(doc_ptr, words, theta, phi, u)

    def shifted(a):
        buffer = cupy.empty(a.size + 1, dtype=a.dtype)
        view = buffer[1:].reshape(a.shape)
        view[...] = cupy.asarray(a)
        assert view.data.ptr % 16 and view.flags.c_contiguous
        return view

    device[2], device[3] = shifted(theta), shifted(phi)
    for variant in drawz_gpu.WARPS_PER_DOCUMENT:
        z = _draw_gpu(variant, device, loads="vector")
        assert (z == _draw_cpu(variant, *host)).all(), variant


@pytest.mark.parametrize("precision", ["f32", "f64"])
def test_segscan_beyond_k_1024_matches_the_reference_and_its_twin(precision):
    """segscan's kernels for 16 and 32 segments (the last loads each row when its token
    comes, without prefetching it), which the sweeps up to K = 1024 reach only in f64: dyadic weights give alg1's z, real ones the twin's."""
    pytest.importorskip("cupy")
    failures = []
    for K in ((1100, 2047, 2048, 3001, 4096) if precision == "f32" else (1025, 1500, 2048)):
        host = dyadic_problem(K, W, precision, np.random.default_rng([11, K]), num_warps=2, max_length=30)
        if (_draw_gpu("segscan", _to_device(*host)) != _draw_cpu("alg1", *host)).any():
            failures.append((K, "dyadic"))
        host = _real_problem(K, precision, seed=12, num_docs=32, max_length=40)
        if (_draw_gpu("segscan", _to_device(*host)) != _draw_cpu("segscan", *host)).any():
            failures.append((K, "twin"))
    assert not failures, failures


@pytest.mark.parametrize("precision", ["f32", "f64"])
def test_a_register_cap_spills_but_draws_the_twins_topics(precision):
    """--maxrregcount moves values to local memory, not the arithmetic: the capped kernels
    (alg4 and alg7 use 150-254 registers uncapped) still draw their twins' topics."""
    pytest.importorskip("cupy")
    failures = []
    for K in (33, 1024):
        host = _real_problem(K, precision, seed=6, num_docs=64, max_length=60)
        device = _to_device(*host)
        for variant in ("alg4", "alg7", *drawz_gpu.WARPS_PER_DOCUMENT):
            twin = _draw_cpu(variant, *host)
            for cap in (32, 64, 128):
                z = _draw_gpu(variant, device, max_registers=cap)
                if (z != twin).any():
                    failures.append((K, variant, cap, int(np.count_nonzero(z != twin))))
    assert not failures, f"(K, variant, registers, mismatches): {failures}"
    assert drawz_gpu.kernel("drawz_alg4_f32", 64).attributes["num_regs"] <= 64


@pytest.mark.parametrize("K", [40, 100, 517])
@pytest.mark.parametrize("precision", ["f32", "f64"])
def test_gpu_draws_follow_the_exact_probabilities(precision, K):
    pytest.importorskip("cupy")
    host = _real_problem(K, precision, seed=3)
    device = _to_device(*host)
    probabilities = token_probabilities(*host[:4])
    for variant in ("alg7", "alg4", "alg1", "segscan"):
        z = _draw_gpu(variant, device)
        assert (z >= 0).all() and (z < K).all()
        p = chi_square_p(z, probabilities)
        assert p > 1e-4, (variant, p)


def test_bad_arguments_are_errors():
    cupy = pytest.importorskip("cupy")
    host = dyadic_problem(40, W, "f32", np.random.default_rng(1), num_warps=1, max_length=10)
    doc_ptr, words, theta, phi, u = _to_device(*host)
    z = cupy.empty(words.size, dtype=cupy.int32)
    with pytest.raises(ValueError, match="W must be 32"):
        drawz_gpu.draw_z_gpu("alg7", doc_ptr, words, theta, phi, u, z, W=16)
    with pytest.raises(ValueError, match="unknown draw-z variant"):
        drawz_gpu.draw_z_gpu("alg9", doc_ptr, words, theta, phi, u, z)
    with pytest.raises(ValueError, match="multiple of 32"):
        drawz_gpu.draw_z_gpu("alg4", doc_ptr[:-1], words, theta[:-1], phi, u, z)
    with pytest.raises(TypeError, match="one dtype"):
        drawz_gpu.draw_z_gpu("alg1", doc_ptr, words, theta, phi.astype(cupy.float64), u, z)
    with pytest.raises(TypeError, match="CuPy array"):
        drawz_gpu.draw_z_gpu("alg1", cupy.asnumpy(doc_ptr), words, theta, phi, u, z)
    big_theta = cupy.ones((theta.shape[0], 1025), dtype=theta.dtype)
    big_phi = cupy.ones((phi.shape[0], 1025), dtype=phi.dtype)
    with pytest.raises(ValueError, match="unknown loads"):
        drawz_gpu.draw_z_gpu("warpscan", doc_ptr, words, theta, phi, u, z, loads="fast")
    with pytest.raises(ValueError, match="segscan holds K <= 4096"):
        drawz_gpu.draw_z_gpu("segscan", doc_ptr, words, cupy.ones((theta.shape[0], 4097), dtype=theta.dtype),
                             cupy.ones((phi.shape[0], 4097), dtype=phi.dtype), u, z)
    with pytest.raises(ValueError, match="storage='local'"):
        drawz_gpu.draw_z_gpu("alg1", doc_ptr, words, big_theta, big_phi, u, z, storage="local")
