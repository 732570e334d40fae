"""The GPU's physical limits, measured in the run that reports against them: the FMA peak
of a precision, the DRAM and L2 read bandwidths and the empty-launch spacing, each by a
kernel that does nothing else (kernels/peaks.cu), and the bandwidth of a device-to-device copy
(bench.timing.calibrate). bench.ceilings turns them into a kernel's floor. CuPy is
imported on first use."""

import json
import subprocess
import sys
from functools import cache
from importlib.resources import files

import numpy as np

from bench.backend import device_attribute, multiprocessors, raw_kernel
from bench.errors import BenchError

SOURCE = files("bench") / "kernels" / "peaks.cu"  # package data (pyproject.toml)
THREADS, BLOCKS_PER_SM, ITERATIONS, CHAINS, TRIES = 256, 8, 1 << 14, 8, 5
PRECISIONS = {"f32": np.float32, "f64": np.float64}


def _launcher(kernel, precision: str, args: tuple):
    """A launch of kernel(out, ITERATIONS, *args) on BLOCKS_PER_SM blocks of THREADS threads
    an SM, and the number of steps it makes (each thread CHAINS an iteration)."""
    import cupy

    blocks = multiprocessors() * BLOCKS_PER_SM
    out = cupy.empty(blocks * THREADS, dtype=PRECISIONS[precision])
    return (lambda: kernel((blocks,), (THREADS,), (out, np.int32(ITERATIONS), *args)),
            blocks * THREADS * ITERATIONS * CHAINS)


def best_rate(kernel, precision: str, args: tuple, operations_per_step: int) -> float:
    """Operations per second of the fastest of TRIES launches (after a warm-up) of
    kernel(out, ITERATIONS, *args), each step making operations_per_step operations; CUDA events."""
    launch, steps = _launcher(kernel, precision, args)
    return steps * operations_per_step / fastest(launch)


def _fma_args(precision: str) -> tuple:
    dtype = PRECISIONS[precision]
    return dtype(0.999), dtype(1e-3)


def fma_job(precision: str = "f32"):
    """One launch of the FMA kernel alone, as a function: the GPU's calibration job
    (bench.timing), its time set by the SM clock alone."""
    import cupy

    return _fma_job(precision, cupy.cuda.runtime.getDevice())


@cache
def _fma_job(precision: str, device: int):
    return _launcher(raw_kernel(SOURCE, f"peak_fma_{precision}"), precision, _fma_args(precision))[0]


def fma_gflops(precision: str) -> float:
    """The FMA peak of `precision` (f32, f64) on the current GPU in GFLOP/s, a multiply-add
    counted as 2."""
    import cupy

    return _fma_gflops(precision, cupy.cuda.runtime.getDevice())


@cache
def _fma_gflops(precision: str, device: int) -> float:
    return best_rate(raw_kernel(SOURCE, f"peak_fma_{precision}"), precision, _fma_args(precision), 2) / 1e9


# The read bandwidths: sweeps over a buffer, loads cached in L2 only. For L2, buffers of
# these fractions of its size (the fastest counts: a small one leaves too few loads in
# flight, a large one can miss where the L2's partitions hold copies); for DRAM, one far
# larger than any L2. Each launch reads about READ_BYTES.
L2_FRACTIONS, DRAM_BUFFER, READ_BYTES = (1 / 8, 1 / 4, 1 / 2), 1 << 29, 1 << 32


def l2_size() -> int:
    """The current GPU's L2 in bytes."""
    return device_attribute("L2CacheSize")


def l2_gbps() -> float:
    """The L2 read bandwidth of the current GPU in GB/s: the fastest buffer and launch."""
    import cupy

    return _l2_gbps(cupy.cuda.runtime.getDevice())


@cache
def _l2_gbps(device: int) -> float:
    return max(_read_gbps(int(l2_size() * fraction)) for fraction in L2_FRACTIONS)


def dram_gbps() -> float:
    """The DRAM read bandwidth of the current GPU in GB/s (a read-only stream: more than a
    copy's bytes read plus written a second, which pays for the writes' turnarounds)."""
    import cupy

    return _dram_gbps(cupy.cuda.runtime.getDevice())


@cache
def _dram_gbps(device: int) -> float:
    return _read_gbps(DRAM_BUFFER)


def _read_gbps(nbytes: int) -> float:
    """GB/s of the fastest of TRIES launches of peak_l2_read over a buffer of about nbytes,
    its length a multiple of the grid's threads (each thread loads as many vectors)."""
    import cupy

    blocks = multiprocessors() * BLOCKS_PER_SM
    threads = blocks * THREADS
    vectors = max(1, round(nbytes / 16 / threads)) * threads
    passes = max(1, READ_BYTES // (vectors * 16))
    data, out = cupy.zeros(vectors * 4, dtype=np.float32), cupy.zeros(1, dtype=np.float32)
    kernel = raw_kernel(SOURCE, "peak_l2_read")
    launch = lambda: kernel((blocks,), (THREADS,), (data, np.int64(vectors), np.int32(passes), out))
    return vectors * 16 * passes / fastest(launch) / 1e9


LAUNCHES, SPIN_NS = 200, 20_000_000  # empty launches a try, queued behind a 20 ms spin


def launch_s() -> float:
    """Seconds the GPU takes a kernel launch at least: the spacing of empty kernels queued
    back to back behind a spin (so that the host's cost of launching them is hidden)."""
    import cupy

    return _launch_s(cupy.cuda.runtime.getDevice())


@cache
def _launch_s(device: int) -> float:
    import cupy

    from bench.slowdown import SOURCE as SPIN

    empty, spin = raw_kernel(SOURCE, "peak_empty"), raw_kernel(SPIN, "spin")
    best = np.inf
    for _ in range(TRIES + 1):  # the first is a warm-up
        spin((1,), (1,), (np.uint64(SPIN_NS),))  # holds the GPU while the launches below are queued
        spun, stop = cupy.cuda.Event(), cupy.cuda.Event()
        spun.record()  # the start of the launches' clock
        for _ in range(LAUNCHES):
            empty((1,), (1,), ())
        stop.record()
        if spun.done:  # the spin ended before every launch was queued: the host set the pace
            raise BenchError(f"measuring the launch latency: {LAUNCHES} launches took the host over "
                             f"{SPIN_NS / 1e6:g} ms (a loaded machine?)")
        stop.synchronize()
        best = min(best, cupy.cuda.get_elapsed_time(spun, stop) / 1e3 / LAUNCHES)
    return best


def fastest(job, tries: int = TRIES) -> float:
    """Seconds of the fastest of `tries` runs of job() (after one run to warm up), CUDA events."""
    import cupy

    best = np.inf
    for _ in range(tries + 1):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        job()
        stop.record()
        stop.synchronize()
        best = min(best, cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    return best


def limits() -> dict:
    """The ceilings of bench.ceilings: DRAM and L2 read bandwidths, the L2's size, the FMA
    peak of each precision, the launch spacing."""
    return {"dram_gbps": dram_gbps(), "l2_gbps": l2_gbps(), "l2_size": l2_size(),
            **{f"fma_gflops_{precision}": fma_gflops(precision) for precision in PRECISIONS}, "launch_s": launch_s()}


COPY_TRIES = 3


def measure() -> dict:
    """This GPU's limits: copy bandwidth in GB/s (bytes read plus written, the best of a few
    copies) and those of limits()."""
    from bench.timing import calibrate

    return {"copy_gbps": max(calibrate("gpu")["copy_gbps"] for _ in range(COPY_TRIES)), **limits()}


def measure_apart() -> dict:
    """measure() in a process of its own, so that its CUDA context and buffers (the copy's
    2 GiB) are gone before the work it is reported against uses the GPU."""
    script = "import json; from bench import peaks; print(json.dumps(peaks.measure()))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
        raise BenchError(f"measuring the GPU's peaks failed: {' '.join(tail)}")
    return json.loads(done.stdout.strip().splitlines()[-1])
