"""The GPU variants of the sumrv suite: the kernels of kernels/sumrv.cu and the peer
libraries a user would call instead (cupy.convolve, cuFFT through cupy.fft, cuDNN
through torch), all on CuPy arrays p [batch, m] and q [batch, n] of one float dtype,
returning r [batch, m + n - 1]. In log space inputs and outputs are log-probabilities.

CuPy (and torch) are imported inside the functions: importing this module needs no GPU.
"""

from functools import cache, lru_cache, partial
from importlib.resources import files

import numpy as np

from bench.backend import NULL, allow_shared_memory, multiprocessors, raw_kernel
from impls.sumrv.cpu import via_linear

KERNEL_SOURCE = files("impls.sumrv") / "kernels" / "sumrv.cu"  # package data (pyproject.toml)
PRECISION = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
BLOCK = 256  # threads per block of the one-thread-per-output kernels
FFT_MAX_VALUES = 1 << 29  # batch x (m + n): beyond, the FFT's buffers outgrow an 80 GB GPU
FFT_PLANS = 8  # shapes whose cuFFT plans fftconv keeps (each plan holds its work area on the GPU)
TILE = 32  # skewdiag: a 32 x 32 tile per block of 32 x 32 threads
# Strip configurations (threads, outputs per slot, chunk of p staged, lane groups per
# warp), narrowest warp strip (32 / groups x outputs per slot) first: the widest whose
# strip is at most min(m, n), else the first. A narrow strip wastes fewer multiply-adds on
# the zero padding at the ends of the parallelogram of terms (about strip / (min(m, n) +
# strip) of them); a wide one stages fewer values per multiply-add. Chosen among 10-16
# candidates timed on an H200 at 13 shapes (a scratch comparison, `configs` below): f64
# and log space keep 8 and 4 outputs per slot (more spill registers, or, with exp's code,
# lower occupancy).
STRIPS = {("f32", "lin"): ((128, 8, 256, 2), (128, 16, 512, 2)),
          ("f32", "log"): ((128, 4, 128, 4),),
          ("f64", "lin"): ((128, 8, 256, 2),),
          ("f64", "log"): ((128, 4, 128, 4),)}
# A warp per pair (chunk 0: the warp stages the pair's p and q once, whole, and computes
# every strip of the pair from them, so that a narrow strip stages no more than a wide one)
# where the batch fills the GPU, both lengths are at least WHOLE_MIN and a warp's shared
# memory holds the pair (m + n at most WHOLE_VALUES): a scratch comparison on an H200 at
# m = n = 64..512, batch 1024..65536 found it 1.02-1.38x faster than the chunked strip at
# batch >= 4096 and m = n >= 128 (f32 lin at m = n = 128, batch 4096: 0.97x), slower at
# batch 1024 and (f32 log apart) at m = n = 64, and in f64 log slower everywhere (it spills).
WHOLE = {("f32", "lin"): (128, 16, 0, 4), ("f64", "lin"): (128, 8, 0, 4), ("f32", "log"): (128, 4, 0, 4)}
WHOLE_BATCH, WHOLE_MIN, WHOLE_VALUES = 4096, 128, 1024
# The systolic strip (kernels/sumrv.cu strip_systolic: no multiply-add on the padding but at
# the parallelogram's edges), linear space: (threads, outputs a block R) by precision; a block
# holds pairs of at most SYSTOLIC_SHARED bytes of shared memory. Taken where the batch is at
# least SYSTOLIC_BATCH and m = n is within SYSTOLIC_SIZES: a scratch comparison on an H200 (m =
# n = 64..512, batch 1024..65536, each against the strip above in one process) found it 1.05-
# 1.38x faster there (f32 m = n = 256, batch 65536: 0.47-0.49 of the FMA peak against 0.40),
# slower at batch 1024 and at f32 m = n = 64 with batch 16384. Blocks of 3 warps, not 4: the
# grid's last wave is fuller (f32 m = n = 256, batch 16384: 3.1 waves of 4-warp blocks, the
# last a tenth full), 0.88-1.02x the time of 4-warp blocks, 0.97-0.99x at most shapes (H200).
# In f32, rows of up to 256 values (32 lanes of 8) take blocks of 8 outputs a lane in 4 warps, a
# warp a pair (55 registers, not 94): 1.03-1.18x faster at m = n = 128 and 200, 1.04x at 256 with
# batch 16384, alike at 256 from batch 32768, and after one barrier a round took the place of two,
# 1.06x faster at 256 (H200, kernels/NOTES.md). The first that fits.
SYSTOLIC = {"f32": ((128, 8), (96, 16)), "f64": ((96, 8),)}
SYSTOLIC_SHARED = 96 << 10
SYSTOLIC_BATCH, SYSTOLIC_SIZES = 16384, {"f32": (128, 512), "f64": (64, 256)}
# Where a launch would have fewer than MIN_WARPS_PER_SM warp strips per SM, the j range is
# split until it has WARPS_PER_SM (enough to hide latency) ...
MIN_WARPS_PER_SM, WARPS_PER_SM = 8, 32
MIN_SPLIT = 64  # ... or its splits are this short; and only from batch x m x n = SPLIT_TERMS: below,
# a second launch and a buffer cost more than the warps gain (sooner in log space: an exp a term)
SPLIT_TERMS = {"lin": 1 << 22, "log": 1 << 16}
# Log space by a shift per pair (kernels/sumrv.cu) where the spreads of a pair's two rows
# sum to at most SPREAD: no shifted product is then below the smallest normal number
# (1.2e-38, 2.2e-308; a margin of 7 and 8 for the exps' rounding) ...
SPREAD = {"f32": 80.0, "f64": 700.0}
# ... from batch x m x n = this: below, its four more launches cost more than the exps they save
LOG_BY_SHIFT_TERMS = {"f32": 1 << 27, "f64": 1 << 23}


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


def _rows_aligned(*addresses_and_strides: int) -> bool:
    """Every row starts at a multiple of 16 bytes (the kernels' 16-byte vectors), given the
    arrays' addresses and row strides in bytes."""
    return all(value % 16 == 0 for value in addresses_and_strides)


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


def strip_width(config: tuple[int, ...]) -> int:
    """Outputs of a warp's strip: its slots (32 / lane groups) times the outputs per slot."""
    threads, per_slot, chunk, groups = config
    return 32 // groups * per_slot


def strip_config(m: int, n: int, batch: int, precision: str, space: str,
                 configs: tuple | None = None) -> tuple[int, ...]:
    """(threads, outputs per slot, chunk, lane groups, splits, split length) of the strip
    kernel; chunk 0: a warp per pair, never split."""
    whole = WHOLE.get((precision, space))
    if configs is None and whole and batch >= WHOLE_BATCH and min(m, n) >= WHOLE_MIN and m + n <= WHOLE_VALUES:
        configs = (whole,)
    configs = configs or STRIPS[precision, space]
    fitting = [c for c in configs if strip_width(c) <= min(m, n)]
    config = fitting[-1] if fitting else configs[0]
    if config[2] == 0:
        return (*config, 1, m)
    strips = batch * -(-(m + n - 1) // strip_width(config))
    few = strips < MIN_WARPS_PER_SM * multiprocessors() and batch * m * n >= SPLIT_TERMS[space]
    wanted = -(-WARPS_PER_SM * multiprocessors() // strips) if few else 1
    splits = max(1, min(wanted, -(-m // MIN_SPLIT)))
    split_len = -(-m // splits)
    split_len = -(-split_len // 4) * 4  # whole vectors of 16 bytes (the kernel's chunks start at one)
    return (*config, -(-m // split_len), split_len)


def systolic_applies(m: int, n: int, batch: int, precision: str, space: str) -> bool:
    """Whether strip takes the systolic kernel for this shape (SYSTOLIC_BATCH, SYSTOLIC_SIZES)."""
    smallest, largest = SYSTOLIC_SIZES[precision]
    return space == "lin" and batch >= SYSTOLIC_BATCH and m == n and smallest <= m <= largest


def systolic_config(m: int, n: int, precision: str) -> tuple[int, int, int, int] | None:
    """(threads, outputs a block R, team, shared values a pair) of the systolic strip for rows of
    m <= n values: the first of the precision's SYSTOLIC configurations where p's blocks of R
    fit a warp's lanes; a lane a block of p, the team a power of two, wider where the block's
    pairs would not fit SYSTOLIC_SHARED (lanes past p's blocks add zeros). None where none fits."""
    itemsize = 8 if precision == "f64" else 4
    for threads, per_block in SYSTOLIC[precision]:
        p_blocks, d_max = -(-m // per_block), (n + per_block - 2) // per_block
        if p_blocks > 32:
            continue
        team = 1 << (p_blocks - 1).bit_length()
        while team <= 32:
            blocks = team + d_max + 1  # of the outputs, padded by 16 bytes each
            values = (d_max + 3) * per_block + blocks * per_block + blocks * (16 // itemsize)
            if threads // team * values * itemsize <= SYSTOLIC_SHARED:
                return threads, per_block, team, values
            team *= 2
    return None


def _launch_systolic(planned: tuple, r, p, q) -> None:
    """The systolic kernel's launch planned by _systolic_launch, for p the shorter row; q staged 16
    bytes a copy where its rows are 16-byte aligned."""
    launch, grid, block, shared, sizes = planned
    vector = _rows_aligned(q.data.ptr, q.strides[0])
    launch(grid, block, (p, np.int64(p.strides[0] // p.itemsize), q, np.int64(q.strides[0] // q.itemsize), r,
                         np.int64(r.strides[0] // r.itemsize), *sizes, np.int32(vector)), shared_mem=shared)


@cache
def _systolic_launch(batch: int, m: int, n: int, dtype: np.dtype) -> tuple:
    """The systolic kernel's launch for a shape (kernel, grid, block, dynamic shared memory, its
    scalar arguments), planned once, as _strip_launch."""
    precision = PRECISION[np.dtype(dtype)]
    threads, per_block, team, values = systolic_config(m, n, precision)
    pairs_per_block = threads // 32 * (32 // team)
    launch = kernel(f"sumrv_strip_systolic_{threads}x{per_block}_{precision}_lin")
    shared = pairs_per_block * values * np.dtype(dtype).itemsize
    allow_shared_memory(launch, shared)
    return (launch, (-(-batch // pairs_per_block),), (threads,), shared,
            (np.int32(m), np.int32(n), np.int64(batch), np.int32(team)))


def strip(p, q, log: bool, configs: tuple | None = None, shift: bool | None = None,
          systolic: bool | None = None):
    """Ours: a strip of outputs per warp, register tiles, no atomics (deterministic). In log
    space, from LOG_BY_SHIFT_TERMS, first by a shift per pair where no term can underflow
    (kernels/sumrv.cu), then per output for the pairs left. In linear space, where
    systolic_applies, the systolic kernel. `configs` replaces the precision's STRIPS and WHOLE
    of the space (the shift's linear kernel keeps its own), and `shift` and `systolic` force
    those choices (to compare them; systolic where its shape fits)."""
    import cupy

    # The kernel reads rows with unit stride: a strided view is copied (the other kernels take strides).
    if p.strides[1] != p.itemsize:
        p = cupy.ascontiguousarray(p)
    if q.strides[1] != q.itemsize:
        q = cupy.ascontiguousarray(q)
    r = _output(p, q)
    (batch, m), n = p.shape, q.shape[1]
    path = _strip_path(p, q, log, configs, shift, systolic)
    if path == "systolic":
        if m > n:  # the shorter row in the lanes' registers: p (+) q = q (+) p
            p, q, m, n = q, p, n, m
        _launch_systolic(_systolic_launch(batch, m, n, p.dtype), r, p, q)
        return r
    done = _strip_log_by_shift(p, q, r) if path == "shift" else NULL
    _launch_strip(_planned_strip(p, q, log, configs), r, p, q, done)
    return r


def _strip_path(p, q, log: bool, configs: tuple | None = None, shift: bool | None = None,
                systolic: bool | None = None) -> str:
    """strip's path for rows of unit stride: "systolic", "shift" (the shift per pair, then the
    strip kernel for the pairs left) or "strip"; the one place strip() and auto's plan take it from."""
    (batch, m), n, precision = p.shape, q.shape[1], PRECISION[p.dtype]
    if log:
        return "shift" if (shift if shift is not None else batch * m * n >= LOG_BY_SHIFT_TERMS[precision]) \
            else "strip"
    if systolic is None:
        systolic = configs is None and systolic_applies(m, n, batch, precision, "lin")
    return "systolic" if systolic and systolic_config(min(m, n), max(m, n), precision) else "strip"


def _planned_strip(p, q, log: bool, configs: tuple | None = None, pointers: bool = True) -> tuple:
    """_strip_launch for p and q: 16 bytes a lane where every row starts at a multiple of 16
    (the kernel's `vector`), read from the strides and, with `pointers`, the arrays' addresses."""
    starts = (p.data.ptr, q.data.ptr) if pointers else ()
    vector = _rows_aligned(*starts, p.strides[0], q.strides[0])
    return _strip_launch(*p.shape, q.shape[1], p.dtype, log, configs, p.strides[0], q.strides[0], vector)


def _launch_strip(planned: tuple, r, p, q, done) -> None:
    """The strip kernel's launch planned by _strip_launch, and its combine where it splits."""
    import cupy

    launch, grid, block, shared, args, splits, combine = planned
    partials = cupy.empty(splits * r.size, dtype=p.dtype) if splits > 1 else r
    launch(grid, block, (p, args[0], q, args[1], r, args[2], partials, done, *args[3:]), shared_mem=shared)
    if combine:
        launch, grid, block = combine
        launch(grid, block, (partials, r, args[2], np.int64(1), done, *args[3:7]))


@cache
def _strip_launch(batch: int, m: int, n: int, dtype: np.dtype, log: bool, configs: tuple | None, p_stride: int,
                  q_stride: int, vector: bool) -> tuple:
    """The strip kernel's launch for a shape (kernel, grid, block, dynamic shared memory, its
    scalar arguments), and the combine's when it splits: a call then costs the launch
    itself, not its planning (what a caller in a loop pays per call)."""
    suffix = f"{PRECISION[dtype]}_{'log' if log else 'lin'}"
    threads, per_slot, chunk, groups, splits, split_len = strip_config(m, n, batch, PRECISION[dtype],
                                                                       "log" if log else "lin", configs)
    config = threads, per_slot, chunk, groups
    # A block per threads / 32 warp strips (chunk 0: pairs), not a grid-stride: strips differ in
    # cost (those at the ends of a pair meet fewer j), and the block scheduler hands out the
    # next as SMs free up.
    warp_items = batch if chunk == 0 else batch * -(-(m + n - 1) // strip_width(config)) * splits
    launch = kernel(f"sumrv_strip_{threads}x{per_slot}x{chunk}x{groups}_{suffix}")
    itemsize = np.dtype(dtype).itemsize
    shared = threads // 32 * whole_pair_values(m, n, config, itemsize) * itemsize if chunk == 0 else 0
    allow_shared_memory(launch, shared)
    vector = vector and (m * itemsize) % 16 == 0 and (n * itemsize) % 16 == 0
    args = (np.int64(p_stride // itemsize), np.int64(q_stride // itemsize), np.int64(m + n - 1), np.int32(m),
            np.int32(n), np.int64(batch), np.int32(splits), np.int32(split_len), np.int32(vector))
    combine = None
    if splits > 1:
        combine = (kernel(f"sumrv_split_combine_{suffix}"), (_grid(batch * (m + n - 1), BLOCK),), (BLOCK,))
    return launch, (-(-warp_items // (threads // 32)),), (threads,), shared, args, splits, combine


def whole_pair_values(m: int, n: int, config: tuple[int, ...], itemsize: int) -> int:
    """Values of shared memory a warp of the warp-per-pair strip kernel holds (kernels/sumrv.cu
    strip_whole): p in whole steps, then q from -(those + a step) to the last strip's end,
    padded by 16 bytes every step."""
    per_slot, per16 = config[1], 16 // itemsize
    p_values = -(-m // per_slot) * per_slot
    q_values = -(-(m + n - 1) // strip_width(config)) * strip_width(config) + p_values + per_slot
    return p_values + q_values + q_values // per_slot * per16 + per16


def _strip_log_by_shift(p, q, r, planned: tuple | None = None):
    """r = log-sum-exp convolution of the pairs whose spreads allow a shift per pair; returns
    their mask (uint8 per pair, 1: done). planned: _planned_shift(p, q), where a plan keeps it
    for packed rows; else worked out here."""
    import cupy

    if planned is None:
        p, q = cupy.ascontiguousarray(p), cupy.ascontiguousarray(q)  # shift_exp reads packed rows
        planned = _planned_shift(p, q)
    ((shift_exp, exp_grid), (shift_log, log_grid), sizes, limit), linear = planned
    (batch, m), n = p.shape, q.shape[1]
    p_shifted, q_shifted = cupy.empty((batch, m), p.dtype), cupy.empty((batch, n), q.dtype)  # packed rows
    stats = cupy.empty(4 * batch, dtype=p.dtype)  # shifts of p and q, spreads of p and q
    done = cupy.empty(batch, dtype=np.uint8)
    shift_exp(exp_grid, (BLOCK,), (p, q, p_shifted, q_shifted, stats, *sizes))
    _launch_strip(linear, r, p_shifted, q_shifted, NULL)
    shift_log(log_grid, (BLOCK,), (r, stats, done, limit, *sizes))
    return done


def _planned_shift(p, q) -> tuple:
    """The shift path's launches for packed rows p and q: its two kernels', and the strip
    kernel's of the shifted rows (packed too, in fresh buffers: aligned)."""
    (batch, m), n = p.shape, q.shape[1]
    return _shift_launches(batch, m, n, p.dtype), _planned_strip(p, q, False, pointers=False)


@cache
def _shift_launches(batch: int, m: int, n: int, dtype: np.dtype) -> tuple:
    precision = PRECISION[np.dtype(dtype)]
    return ((kernel(f"sumrv_shift_exp_{precision}"), (_grid(2 * batch, BLOCK // 32),)),
            (kernel(f"sumrv_shift_log_{precision}"), (_grid(batch * (m + n - 1), BLOCK),)),
            (np.int32(m), np.int32(n), np.int64(batch)), np.dtype(dtype).type(SPREAD[precision]))


def fftconv(p, q, log: bool):
    """Ours, around cuFFT: the fft peer's transforms with fewer passes over memory. p's and q's
    rows zero-padded by one kernel into one buffer, one forward transform for both, their
    spectra's product scaled by one kernel in place (the inverse's input, which it overwrites),
    and the inverse transform into the output; the plans kept for the shape. In log space
    through via_linear's per-vector max shift, as the peer (its error is normwise)."""
    import cupy

    return via_linear(cupy, lambda a, b: _fft_convolution(a.data.device_id, *a.shape, b.shape[1], a.dtype)(a, b),
                      p, q, log)


@lru_cache(maxsize=FFT_PLANS)
def _fft_convolution(device: int, batch: int, m: int, n: int, dtype: np.dtype):
    """fftconv for a shape on a GPU, as a function of (p, q): the transforms' length and cuFFT
    plans (a plan takes milliseconds to make and holds its work area) made once."""
    import cupy
    import cupyx.scipy.fft
    from cupy.cuda import cufft

    dtype, precision = np.dtype(dtype), PRECISION[np.dtype(dtype)]
    outputs = m + n - 1
    size = cupyx.scipy.fft.next_fast_len(outputs, real=True)
    half = size // 2 + 1  # complex values of a real row's spectrum
    to_spectrum, from_spectrum = (cufft.CUFFT_D2Z, cufft.CUFFT_Z2D) if precision == "f64" else \
        (cufft.CUFFT_R2C, cufft.CUFFT_C2R)
    forward, inverse = cufft.Plan1d(size, to_spectrum, 2 * batch), cufft.Plan1d(size, from_spectrum, batch)
    pad, multiply = kernel(f"sumrv_fft_pad_{precision}"), kernel(f"sumrv_fft_multiply_{precision}")
    pad_grid, multiply_grid = (_grid(2 * batch * size, BLOCK),), (_grid(batch * half, BLOCK),)
    sizes = (np.int32(m), np.int32(n), np.int32(size), np.int64(batch))
    product = (dtype.type(1 / size), np.int64(batch * half))
    spectrum_dtype = np.result_type(dtype, np.complex64)

    def convolve(p, q):
        padded = cupy.empty((2 * batch, size), dtype)
        pad(pad_grid, (BLOCK,), (*_layout(p), *_layout(q), padded, *sizes))
        spectra = cupy.empty((2 * batch, half), spectrum_dtype)
        forward.fft(padded, spectra, cufft.CUFFT_FORWARD)
        multiply(multiply_grid, (BLOCK,), (spectra, *product))
        r = cupy.empty((batch, size), dtype)
        inverse.fft(spectra[:batch], r, cufft.CUFFT_INVERSE)
        return r[:, :outputs]

    return convolve


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


# auto's candidates: the direct kernels (skewdiag-det stands for skewdiag, which it matches
# or beats wherever either is near the fastest) and, in linear space, fftconv (the fft peer's
# transforms with fewer passes: 0.52-0.78x its call at every shape where FFT won, an H200). In
# log space an FFT's shift by each vector's maximum loses the small outputs (a normwise error),
# so only the direct kernels, whose error is componentwise, take part.
AUTO_CANDIDATES = {False: ("strip", "naive", "skewdiag-det", "fftconv"), True: ("strip", "naive", "skewdiag-det")}
AUTO_ROUNDS = 3  # rounds of timed loops, the candidates in turn, after a call of each to build it
AUTO_BEHIND = 1.5  # a candidate this much slower than the best so far, after a round, is timed no more
# Calls a timed loop: as many as keep batch x m x n x calls near AUTO_LOOP_TERMS, 4 to 8, as
# the suite times loops of calls. A loop hides the host's time between a call's launches
# where the GPU's work covers it, which a single call shows (it picked fftconv, five launches,
# over strip at f32, batch 1024, m = n = 1024, 1.28x slower in a loop); and a small shape's
# call is its host's issue rate, which a single call misjudges too (strip over naive, 1.13x
# slower in a loop, at f64 log, batch 4096, m = n = 32).
AUTO_LOOP_TERMS, AUTO_MIN_CALLS, AUTO_MAX_CALLS = 1 << 32, 4, 8
_auto_choices: dict[tuple, tuple] = {}  # by auto_key: the candidate's name and its plan


def loop_calls(terms: int, loop_terms: int, least: int, most: int) -> int:
    """Calls of a timed loop of calls of `terms` products each: about loop_terms in all,
    `least` to `most` (a small call is its host's issue rate, seen only in a loop)."""
    return max(least, min(most, loop_terms // terms))


def auto_key(p, q, log: bool) -> tuple:
    """What auto's choice and its plan depend on (the GPU, the shapes, the strides, the dtype,
    the space), read from the arrays' own attributes: auto pays for it on every call, so no
    runtime query."""
    return p.data.device_id, p.shape, q.shape[1], p.strides, q.strides, p.dtype, log


def auto_choice(p, q, log: bool) -> str:
    """The candidate auto calls for this shape, precision and space on this GPU: the
    fastest of AUTO_CANDIDATES' plans, measured on the first call with such inputs (CUDA
    events, loops of calls, the candidates in turn for AUTO_ROUNDS rounds) and kept for the
    process, as cuDNN's benchmark mode and triton's autotune do."""
    return _auto_chosen(p, q, log)[0]


def _auto_chosen(p, q, log: bool) -> tuple:
    import cupy

    key = auto_key(p, q, log)
    chosen = _auto_choices.get(key)
    if chosen is None:
        (batch, m), n = p.shape, q.shape[1]
        fits = batch * (m + n) <= FFT_MAX_VALUES
        plans = {c: _auto_plan(c, p, q, log) for c in AUTO_CANDIDATES[log] if c != "fftconv" or fits}
        calls = loop_calls(batch * m * n, AUTO_LOOP_TERMS, AUTO_MIN_CALLS, AUTO_MAX_CALLS)

        def loop_seconds(name: str) -> float:
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            for _ in range(calls):  # each output freed as the next is made
                plans[name](p, q)
            stop.record()
            stop.synchronize()
            return cupy.cuda.get_elapsed_time(start, stop) / 1e3

        for plan in plans.values():  # its kernels built and launched once
            plan(p, q)
        # Done before the first loop's start is recorded: else the host queues that loop while
        # the GPU is busy, and its time hides the host's gaps that the others' shows.
        cupy.cuda.get_current_stream().synchronize()
        choice = fastest_in_turn(list(plans), loop_seconds, AUTO_ROUNDS, AUTO_BEHIND)
        chosen = _auto_choices[key] = choice, plans[choice]
    return chosen


def fastest_in_turn(names: list[str], seconds, rounds: int, behind: float) -> str:
    """The name whose best of seconds(name) is least, timed in turn for `rounds` rounds (so a
    slow spell of the GPU or its host falls on every candidate, not on one); a name `behind`
    times slower than the best after a round is timed no more."""
    best = dict.fromkeys(names, np.inf)
    timed = list(names)
    for _ in range(rounds):
        for name in timed:
            best[name] = min(best[name], seconds(name))
        timed = [name for name in timed if best[name] <= behind * min(best.values())]
    return min(best, key=best.get)


def _auto_plan(name: str, p, q, log: bool):
    """auto's call of the candidate `name` for arrays of p's and q's auto_key, a function of
    (p, q): its kernels' launches worked out once, so that a call costs its allocation and
    launches, not the checks and choices that the variant, taking any arrays, makes on every
    call (strip's of strides, space and shape; naive's grid and strides). The variant itself where
    its path has none (rows with a stride; in log space's shift per pair, rows not packed) or where
    the variant works it out once already (fftconv's transforms and kernels, kept by shape)."""
    import cupy

    (batch, m), n = p.shape, q.shape[1]
    dtype, shape = p.dtype, (batch, m + n - 1)
    if name == "naive":
        launch, grid = kernel(f"sumrv_naive_{_suffix(p, log)}"), (_grid(batch * shape[1], BLOCK),)
        p_strides, q_strides, r_strides = _layout(p)[1:], _layout(q)[1:], (np.int64(shape[1]), np.int64(1))
        sizes = _sizes(p, q)

        def naive_call(p, q):
            r = cupy.empty(shape, dtype)
            launch(grid, (BLOCK,), (p, *p_strides, q, *q_strides, r, *r_strides, *sizes))
            return r
        return naive_call
    rows = p.strides[1] == q.strides[1] == p.itemsize  # strip copies rows of other strides
    path = _strip_path(p, q, log) if name == "strip" and rows else None
    if path == "systolic":
        swap = m > n  # the shorter row in the lanes' registers
        planned = _systolic_launch(batch, min(m, n), max(m, n), dtype)

        def systolic_call(p, q):
            r = cupy.empty(shape, dtype)
            _launch_systolic(planned, r, *((q, p) if swap else (p, q)))
            return r
        return systolic_call
    packed = p.strides[0] == m * p.itemsize and q.strides[0] == n * q.itemsize
    if path == "strip" or path == "shift" and packed:
        aligned = _rows_aligned(p.strides[0], q.strides[0])  # and the pointers, checked at each call
        planned = _planned_strip(p, q, log, pointers=False)
        shift = _planned_shift(p, q) if path == "shift" else None

        def strip_call(p, q):
            if aligned and not _rows_aligned(p.data.ptr, q.data.ptr):  # planned for rows starting aligned
                return strip(p, q, log)
            r = cupy.empty(shape, dtype)
            done = _strip_log_by_shift(p, q, r, shift) if shift else NULL
            _launch_strip(planned, r, p, q, done)
            return r
        return strip_call
    return partial(VARIANTS[name], log=log)


def auto(p, q, log: bool):
    # auto_key written out and the plan kept beside its name: at a call of 12-15 us (batch 1 on
    # an H200's host) each Python call and lookup more is a percent of the 5% auto may add.
    chosen = _auto_choices.get((p.data.device_id, p.shape, q.shape[1], p.strides, q.strides, p.dtype, log)) or \
        _auto_chosen(p, q, log)
    return chosen[1](p, q)


VARIANTS = {"naive": naive, "skewdiag": skewdiag, "skewdiag-det": skewdiag_det, "strip": strip, "fftconv": fftconv,
            "cupy-convolve": cupy_convolve, "fft": fft, "torch-conv1d": torch_conv1d, "auto": auto}


def convolve(variant: str, p, q, log: bool):
    return VARIANTS[variant](p, q, log)


def kernel_names() -> list[str]:
    names = []
    for (precision, space), configs in STRIPS.items():
        names += [f"sumrv_{k}_{precision}_{space}" for k in
                  ("naive", "skewdiag", "skewdiag_det", "skewdiag_combine", "split_combine")]
        names += [f"sumrv_shift_{k}_{precision}" for k in ("exp", "log") if space == "log"]
        whole = (WHOLE[precision, space],) if (precision, space) in WHOLE else ()
        names += [f"sumrv_strip_{t}x{r}x{c}x{g}_{precision}_{space}" for t, r, c, g in configs + whole]
        if space == "lin":
            names += [f"sumrv_strip_systolic_{t}x{r}_{precision}_lin" for t, r in SYSTOLIC[precision]]
            names += [f"sumrv_fft_{k}_{precision}" for k in ("pad", "multiply")]
    return names


def kernel_resources() -> list[dict]:
    """Registers, local memory (spills) and shared memory of every kernel, as compiled here."""
    rows = []
    for name in kernel_names():
        attributes = kernel(name).attributes
        rows.append({"kernel": name, "registers": attributes["num_regs"],
                     "local_bytes": attributes["local_size_bytes"], "shared_bytes": attributes["shared_size_bytes"]})
    return rows
