"""The GPU's physical limits, measured in the run that reports against them: the FMA peak
of a precision, by a kernel that does nothing else (kernels/peaks.cu), and the bandwidth
of a device-to-device copy (bench.timing.calibrate). CuPy is imported on first use."""

import json
import subprocess
import sys
from functools import cache
from importlib.resources import files

import numpy as np

from bench.backend import multiprocessors, raw_kernel
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
    import cupy

    launch, steps = _launcher(kernel, precision, args)
    best = np.inf
    for _ in range(TRIES + 1):  # the first launch is a warm-up
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        launch()
        stop.record()
        stop.synchronize()
        best = min(best, cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    return steps * operations_per_step / best


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


COPY_TRIES = 3


def measure() -> dict:
    """This GPU's limits: copy bandwidth in GB/s (bytes read plus written, the best of a few
    copies) and the FMA peak of each precision in GFLOP/s."""
    from bench.timing import calibrate

    return {"copy_gbps": max(calibrate("gpu")["copy_gbps"] for _ in range(COPY_TRIES)),
            **{f"fma_gflops_{precision}": fma_gflops(precision) for precision in PRECISIONS}}


def measure_apart() -> dict:
    """measure() in a process of its own, so that its CUDA context and buffers (the copy's
    2 GiB) are gone before the work it is reported against uses the GPU."""
    script = "import json; from bench import peaks; print(json.dumps(peaks.measure()))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
        raise BenchError(f"measuring the GPU's peaks failed: {' '.join(tail)}")
    return json.loads(done.stdout.strip().splitlines()[-1])
