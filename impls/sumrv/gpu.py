"""The GPU variants of the sumrv suite: the kernels of kernels/sumrv.cu and the peer
libraries a user would call instead (cupy.convolve, cuFFT through cupy.fft, cuDNN
through torch), all on CuPy arrays p [batch, m] and q [batch, n] of one float dtype,
returning r [batch, m + n - 1]. In log space inputs and outputs are log-probabilities.

CuPy (and torch) are imported inside the functions: importing this module needs no GPU.
"""

from functools import cache
from pathlib import Path

import numpy as np

from bench import peaks as bench_peaks
from bench.backend import multiprocessors, raw_kernel
from impls.sumrv.cpu import via_linear

KERNEL_SOURCE = Path(__file__).parent / "kernels" / "sumrv.cu"
PRECISION = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
BLOCK = 256  # threads per block of the one-thread-per-output kernels
TILE = 32  # skewdiag: a 32 x 32 tile per block of 32 x 32 threads
# Strip configurations (threads, outputs per slot, chunk of p staged, lane groups per
# warp), smallest first: the first whose strip (threads / groups x outputs per slot)
# covers m + n - 1 outputs, else the last. f64 and log space keep 8 outputs per slot
# (16 spill registers there).
STRIPS = {("f32", "lin"): ((32, 4, 64, 1), (64, 8, 128, 2), (128, 16, 512, 4)),
          ("f32", "log"): ((32, 4, 64, 1), (64, 8, 128, 2), (128, 8, 512, 4)),
          ("f64", "lin"): ((32, 4, 64, 1), (64, 8, 128, 2), (128, 8, 512, 4)),
          ("f64", "log"): ((32, 4, 64, 1), (64, 8, 128, 2), (128, 8, 512, 4))}
ITEMS_PER_SM = 8  # split the j range until a launch has this many blocks per SM ...
MIN_SPLIT = 64  # ... or its splits are this short; and only from batch x m x n = SPLIT_TERMS:
SPLIT_TERMS = 1 << 22  # below, a second launch and a buffer cost more than the blocks gain


def kernel(name: str):
    return raw_kernel(KERNEL_SOURCE, name)


def _grid(work_items: int, per_block: int = 1) -> int:
    """Blocks of a grid-stride launch: enough to fill the GPU, no more than needed."""
    return max(1, min(-(-work_items // per_block), multiprocessors() * 32))


def _suffix(p, log: bool) -> str:
    return f"{PRECISION[p.dtype]}_{'log' if log else 'lin'}"


def _layout(a) -> tuple:
    """(array, leading stride, element stride) in elements: strided views need no copy."""
    return a, np.int64(a.strides[0] // a.itemsize), np.int64(a.strides[1] // a.itemsize)


def _args(p, q, r) -> tuple:
    return (*_layout(p), *_layout(q), *_layout(r))


def _output(p, q):
    import cupy

    return cupy.empty((p.shape[0], p.shape[1] + q.shape[1] - 1), dtype=p.dtype)


def _sizes(p, q) -> tuple:
    return np.int32(p.shape[1]), np.int32(q.shape[1]), np.int64(p.shape[0])


def naive(p, q, log: bool):
    r = _output(p, q)
    kernel(f"sumrv_naive_{_suffix(p, log)}")((_grid(r.size, BLOCK),), (BLOCK,), (*_args(p, q, r), *_sizes(p, q)))
    return r


def _tiles(p, q) -> int:
    return p.shape[0] * -(-p.shape[1] // TILE) * -(-q.shape[1] // TILE)


def skewdiag(p, q, log: bool):
    """The post's kernel, fixed: r set to the identity (the post's cudaMemset), then one
    atomic add (log: a compare-and-swap log-add) per diagonal of each tile."""
    r = _output(p, q)
    r.fill(-np.inf if log else 0)
    kernel(f"sumrv_skewdiag_{_suffix(p, log)}")((_grid(_tiles(p, q)),), (TILE, TILE), (*_args(p, q, r),
                                                                                       *_sizes(p, q)))
    return r


def skewdiag_det(p, q, log: bool):
    """The same tiles, each writing its 63 diagonals; a second kernel sums them in a fixed order."""
    import cupy

    r = _output(p, q)
    partial = cupy.empty(_tiles(p, q) * (2 * TILE - 1), dtype=p.dtype)
    kernel(f"sumrv_skewdiag_det_{_suffix(p, log)}")((_grid(_tiles(p, q)),), (TILE, TILE),
                                                     (*_args(p, q, r), partial, *_sizes(p, q)))
    kernel(f"sumrv_skewdiag_combine_{_suffix(p, log)}")((_grid(r.size, BLOCK),), (BLOCK,),
                                                         (partial, *_layout(r), *_sizes(p, q)))
    return r


def strip_config(m: int, n: int, batch: int, precision: str, space: str) -> tuple[int, ...]:
    """(threads, outputs per slot, chunk, lane groups, splits, split length) of the strip kernel."""
    outputs = m + n - 1
    configs = STRIPS[precision, space]
    threads, per_slot, chunk, groups = next((c for c in configs if c[0] // c[3] * c[1] >= outputs), configs[-1])
    items = batch * -(-outputs // (threads // groups * per_slot))
    wanted = -(-ITEMS_PER_SM * multiprocessors() // items) if batch * m * n >= SPLIT_TERMS else 1
    splits = max(1, min(wanted, -(-m // MIN_SPLIT)))
    split_len = -(-m // splits)
    return threads, per_slot, chunk, groups, -(-m // split_len), split_len


@cache
def _strip_launch(batch: int, m: int, n: int, dtype: np.dtype, log: bool) -> tuple:
    """The strip kernel's launch for a shape, and the combine's when it splits: a call then
    costs the launch itself, not its planning (what a caller in a loop pays per call)."""
    suffix = f"{PRECISION[dtype]}_{'log' if log else 'lin'}"
    threads, per_slot, chunk, groups, splits, split_len = strip_config(m, n, batch, PRECISION[dtype],
                                                                       "log" if log else "lin")
    strips = -(-(m + n - 1) // (threads // groups * per_slot))
    launch = (kernel(f"sumrv_strip_{threads}x{per_slot}x{chunk}x{groups}_{suffix}"),
              (_grid(batch * strips * splits),), (threads,))
    sizes = (np.int32(m), np.int32(n), np.int64(batch), np.int32(splits), np.int32(split_len))
    combine = None
    if splits > 1:
        combine = (kernel(f"sumrv_split_combine_{suffix}"), (_grid(batch * (m + n - 1), BLOCK),), (BLOCK,))
    return launch, sizes, splits, combine


def strip(p, q, log: bool):
    """Ours: a strip of outputs per block, register tiles, no atomics (deterministic)."""
    import cupy

    # The kernel reads rows with unit stride: a strided view is copied (the other kernels take strides).
    p, q = (a if a.strides[1] == a.itemsize else cupy.ascontiguousarray(a) for a in (p, q))
    r = _output(p, q)
    (launch, grid, block), sizes, splits, combine = _strip_launch(*p.shape, q.shape[1], p.dtype, log)
    partial = cupy.empty(splits * r.size, dtype=p.dtype) if splits > 1 else r
    ld = np.int64(r.shape[1])  # r is contiguous
    launch(grid, block, (p, np.int64(p.strides[0] // p.itemsize), q, np.int64(q.strides[0] // q.itemsize), r, ld,
                         partial, *sizes))
    if combine:
        launch, grid, block = combine
        launch(grid, block, (partial, r, ld, np.int64(1), *sizes[:4]))
    return r


# Peers: linear-space libraries, in log space through cpu.via_linear's per-vector max shift.
def cupy_convolve(p, q, log: bool):
    import cupy

    def per_pair(p, q):
        return cupy.stack([cupy.convolve(p[b], q[b]) for b in range(p.shape[0])])

    return via_linear(cupy, per_pair, p, q, log)


def fft(p, q, log: bool):
    import cupy
    import cupyx.scipy.fft

    def batched(p, q):
        outputs = p.shape[1] + q.shape[1] - 1
        size = cupyx.scipy.fft.next_fast_len(outputs, real=True)
        spectrum = cupy.fft.rfft(p, size, axis=1) * cupy.fft.rfft(q, size, axis=1)
        return cupy.fft.irfft(spectrum, size, axis=1)[:, :outputs]

    return via_linear(cupy, batched, p, q, log)


def torch_conv1d(p, q, log: bool):
    """cuDNN: a grouped conv1d, one group per pair (conv1d correlates: p is flipped)."""
    import cupy
    import torch

    torch.backends.cudnn.allow_tf32 = False  # f32 means f32 here, as in every other variant

    def grouped(p, q):
        batch, m = p.shape
        signal = torch.nn.functional.pad(torch.from_dlpack(q), (m - 1, m - 1)).unsqueeze(0)
        weight = torch.from_dlpack(p).flip(1).unsqueeze(1)
        return cupy.from_dlpack(torch.nn.functional.conv1d(signal, weight, groups=batch)[0])

    return via_linear(cupy, grouped, p, q, log)


VARIANTS = {"naive": naive, "skewdiag": skewdiag, "skewdiag-det": skewdiag_det, "strip": strip,
            "cupy-convolve": cupy_convolve, "fft": fft, "torch-conv1d": torch_conv1d}


def convolve(variant: str, p, q, log: bool):
    return VARIANTS[variant](p, q, log)


@cache
def peaks(precision: str) -> dict:
    """{"fma_gflops": ..., "exp_gterms": ...} of this GPU in this precision: the FMA peak
    (bench.peaks) and the log kernels' exp-and-add per term, measured alike."""
    dtype = np.float32 if precision == "f32" else np.float64
    exp_rate = bench_peaks.best_rate(kernel(f"peak_exp_{precision}"), precision, (dtype(0), dtype(1e-4)), 1)
    return {"fma_gflops": bench_peaks.fma_gflops(precision), "exp_gterms": exp_rate / 1e9}


def kernel_names() -> list[str]:
    names = []
    for (precision, space), configs in STRIPS.items():
        names += [f"sumrv_{k}_{precision}_{space}" for k in
                  ("naive", "skewdiag", "skewdiag_det", "skewdiag_combine", "split_combine")]
        names += [f"sumrv_strip_{t}x{r}x{c}x{g}_{precision}_{space}" for t, r, c, g in configs]
    return names + [f"peak_exp_{precision}" for precision in ("f32", "f64")]


def kernel_resources() -> list[dict]:
    """Registers, local memory (spills) and shared memory of every kernel, as compiled here."""
    rows = []
    for name in kernel_names():
        attributes = kernel(name).attributes
        rows.append({"kernel": name, "registers": attributes["num_regs"],
                     "local_bytes": attributes["local_size_bytes"], "shared_bytes": attributes["shared_size_bytes"]})
    return rows
