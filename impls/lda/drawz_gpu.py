"""GPU (CUDA, through CuPy) versions of the butterfly paper's draw-z step.

draw_z_gpu has the meaning of drawz_cpu.draw_z, on CuPy device arrays, with
W = 32 (the warp).  The kernels, in kernels/drawz.cu, do the arithmetic of
their CPU twins in the same order, so with dyadic weights every variant returns
z identical to the CPU reference, and with any weights a variant returns its
CPU twin's z.

CuPy is imported inside the functions: importing this module needs no GPU.
"""

from importlib.resources import files

import numpy as np

from bench.backend import allow_shared_memory, raw_kernel
from impls.lda import drawz_cpu
from impls.lda.drawz_cpu import VARIANTS

KERNEL_SOURCE = files("impls.lda") / "kernels" / "drawz.cu"  # package data (pyproject.toml)
W = 32
KMAX_LOCAL = 1024  # per-lane arrays up to this K live in local memory
BLOCK = 64  # threads per block: two warps; every variant runs one thread per document
STORAGES = ("auto", "local", "global")
# "auto": the faster store of each variant, measured on an H200 at K = 256..1024
# (kernels/NOTES.md): Algorithm 7 runs 1.25-1.65x faster with the global scratch
# buffer, Algorithms 1 and 4 with local memory.
PREFERRED_STORAGE = {"alg1": "local", "alg1-linear": "local", "alg4": "local", "alg7": "global",
                     "warpscan": "local", "pairscan": "local", "segscan": "local"}  # no per-lane arrays: one store
LOADS = ("auto", "scalar", "vector")
# How warpscan (and pairscan) loads a token's rows (kernels/drawz.cu, tile_products): one value a lane
# at a time ("scalar") or batches of 16-byte loads ("vector"), whose registers cost
# occupancy where rows are short. "auto": vectors from these K on. Measured on an H200
# (lda-kernels, wiki-synth, 2026-11-23): in f32 vectors ran 1.2x faster at K = 512 and
# 1.6x at 1024, 0.8x at 64; in f64 0.65x at K = 256, 0.89x at 512, 1.18x at 1024.
VECTOR_FROM_K = {"f32": 512, "f64": 1024}
_KERNEL = {"alg1": "alg1", "alg1-linear": "alg1_linear", "alg4": "alg4", "alg7": "alg7", "warpscan": "warpscan",
           "pairscan": "pairscan"}
_PRECISION = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
_ARRAYS = {"alg1": 1, "alg1-linear": 1, "alg4": 2, "alg7": 2, "warpscan": 0, "pairscan": 0,
           "segscan": 0}  # per-lane: p, theta_local
WARPS_PER_DOCUMENT = {"warpscan": 1, "pairscan": 1, "segscan": 2}  # the others a thread per document
# segscan splits a document's tokens between two warps (kernels/drawz.cu: 4-5% faster than one on an H200)
TILED = ("warpscan", "pairscan")  # a tile of products in shared memory, rows loaded as `loads` says


def segscan_kernel_segments(K: int, itemsize: int) -> int:
    """The segments P of segscan's kernel for K: the power of two at least its segments."""
    return 1 << (drawz_cpu.segscan_segments(K, itemsize) - 1).bit_length()


def kernel(name: str, max_registers: int = 0):
    """One draw-z kernel, by name; max_registers > 0 caps its registers per thread (NVRTC's
    --maxrregcount: what does not fit spills to local memory), trading them for occupancy.
    A kernel with a cap of its own (__maxnreg__: segscan's of 8 segments in f32 and 16 in
    f64, kernels/drawz.cu) keeps it."""
    cap = (f"--maxrregcount={max_registers}",) if max_registers else ()
    return raw_kernel(KERNEL_SOURCE, name, ("-std=c++17", f"-DDRAWZ_KMAX_LOCAL={KMAX_LOCAL}",
                                            f"-DDRAWZ_SEGSCAN_WARPS={WARPS_PER_DOCUMENT['segscan']}", *cap))


def kernel_name(variant: str, precision: str, storage: str, loads: str = "scalar", K: int | None = None) -> str:
    """Name of the kernel for a variant, "f32"/"f64", "local"/"global", (warpscan,
    pairscan) "scalar"/"vector" and (segscan, which has one kernel per power of two of
    segments: one for fewer segments than K has draws wrong topics) K."""
    if variant == "segscan":
        if K is None:
            raise ValueError("segscan's kernel depends on K: give K")
        itemsize = 4 if precision == "f32" else 8
        segments = segscan_kernel_segments(K, itemsize)
        full = "full_" if K == segments * drawz_cpu.segscan_segment_topics(itemsize) else ""  # every segment whole
        return f"drawz_segscan_{segments}_{full}{precision}"
    stored = _ARRAYS[variant] > 0 and storage == "global"
    vector = variant in TILED and loads == "vector"
    return f"drawz_{_KERNEL[variant]}_" + ("vector_" if vector else "") + precision + ("_global" if stored else "")


def draw_z_gpu(variant, doc_ptr, words, theta, phi, u, z, W=32, storage="auto", max_registers=0, loads="auto"):
    """Draw z for every token with the named variant, on the GPU.

    doc_ptr int64[M+1], words int32[T], theta [M, K], phi [V, K] and u [T] of
    one float dtype (the precision), z int32[T] written in place: CuPy arrays,
    C-contiguous.  M must be a multiple of 32 for alg4 and alg7 (pad with
    empty documents).  storage: "local" keeps each lane's p (and theta_local)
    in local memory, for K <= KMAX_LOCAL; "global" in a scratch buffer
    allocated here, for any K; "auto" picks the variant's faster store
    (PREFERRED_STORAGE), global where K > KMAX_LOCAL.  max_registers: a cap
    on the kernel's registers per thread (kernel()), 0 for none.  loads: how
    warpscan and pairscan load rows, "scalar", "vector" or "auto" (VECTOR_FROM_K);
    the other variants ignore it (segscan loads 16 bytes a lane where the rows allow).  The launch is
    asynchronous (current stream); word ids and doc_ptr are not checked, as
    that would need a copy to the host."""
    import cupy

    if W != 32:
        raise ValueError(f"the GPU draw-z kernels use the hardware warp: W must be 32, got {W}")
    if variant not in VARIANTS:
        raise ValueError(f"unknown draw-z variant {variant!r}; known: {', '.join(VARIANTS)}")
    if storage not in STORAGES:
        raise ValueError(f"unknown storage {storage!r}; known: {', '.join(STORAGES)}")
    if loads not in LOADS:
        raise ValueError(f"unknown loads {loads!r}; known: {', '.join(LOADS)}")
    arrays = {"doc_ptr": doc_ptr, "words": words, "theta": theta, "phi": phi, "u": u, "z": z}
    for name, a in arrays.items():
        if not isinstance(a, cupy.ndarray) or not a.flags.c_contiguous:
            raise TypeError(f"{name} must be a C-contiguous CuPy array")
    dtype = theta.dtype
    if dtype not in _PRECISION or phi.dtype != dtype or u.dtype != dtype:
        raise TypeError(f"theta, phi and u must share one dtype, float32 or float64; got "
                        f"{theta.dtype}, {phi.dtype}, {u.dtype}")
    if doc_ptr.dtype != np.int64 or words.dtype != np.int32 or z.dtype != np.int32:
        raise TypeError("doc_ptr must be int64, words and z int32")
    if theta.ndim != 2 or phi.ndim != 2 or phi.shape[1] != theta.shape[1]:
        raise ValueError(f"theta [M, K] and phi [V, K] disagree: {theta.shape}, {phi.shape}")
    M, K = theta.shape
    if K < 1 or doc_ptr.shape != (M + 1,) or words.ndim != 1 or u.shape != words.shape or z.shape != words.shape:
        raise ValueError(f"shapes: doc_ptr {doc_ptr.shape}, words {words.shape}, u {u.shape}, z {z.shape} "
                         f"for theta {theta.shape}")
    if variant in ("alg4", "alg7") and M % W:
        raise ValueError(f"{variant} processes whole warps: pad the documents to a multiple of {W} (M = {M})")
    if variant == "segscan":
        drawz_cpu.segscan_segments(K, dtype.itemsize)  # a K beyond its segments: a one-line error
    if M >= 2**31 or K >= 2**31:
        raise ValueError(f"M = {M} or K = {K} too large for the kernels' 32-bit counts")
    if storage == "auto":
        storage = PREFERRED_STORAGE[variant] if K <= KMAX_LOCAL else "global"
    if storage == "local" and K > KMAX_LOCAL and _ARRAYS[variant]:
        raise ValueError(f"storage='local' holds K <= {KMAX_LOCAL}; K = {K}: use 'global'")
    if M == 0:
        return
    threads = W * WARPS_PER_DOCUMENT[variant] if variant in WARPS_PER_DOCUMENT else 1  # a document's
    grid = -(-M * threads // BLOCK)
    if storage == "global" and _ARRAYS[variant]:
        scratch = cupy.empty(_ARRAYS[variant] * K * grid * BLOCK, dtype=dtype)
    else:
        scratch = np.uint64(0)  # a null pointer: the local-memory kernels ignore it
    precision = _PRECISION[dtype]
    if loads == "auto":
        loads = "vector" if K >= VECTOR_FROM_K[precision] else "scalar"
    launch = kernel(kernel_name(variant, precision, storage, loads, K), max_registers)
    shared = 0
    if variant in TILED:  # a tile of K products (one pad word per 32) per warp
        shared = BLOCK // W * (K + K // W + 1) * dtype.itemsize
        allow_shared_memory(launch, shared)
    launch((grid,), (BLOCK,), (doc_ptr, words, theta, phi, u, z, np.int32(M), np.int32(K), scratch),
           shared_mem=shared)
