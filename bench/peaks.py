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


def best_rate(launch, precision: str, args: tuple, operations_per_step: int) -> float:
    """Operations per second of the fastest of TRIES launches (after a warm-up) of
    launch(out, ITERATIONS, *args) on BLOCKS_PER_SM blocks of THREADS threads an SM, each
    thread making CHAINS x operations_per_step operations an iteration; CUDA events."""
    import cupy

    blocks = multiprocessors() * BLOCKS_PER_SM
    out = cupy.empty(blocks * THREADS, dtype=PRECISIONS[precision])
    best = np.inf
    for _ in range(TRIES + 1):  # the first launch is a warm-up
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        launch((blocks,), (THREADS,), (out, np.int32(ITERATIONS), *args))
        stop.record()
        stop.synchronize()
        best = min(best, cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    return blocks * THREADS * ITERATIONS * CHAINS * operations_per_step / best


def fma_gflops(precision: str) -> float:
    """The FMA peak of `precision` (f32, f64) on the current GPU in GFLOP/s, a multiply-add
    counted as 2."""
    import cupy

    return _fma_gflops(precision, cupy.cuda.runtime.getDevice())


@cache
def _fma_gflops(precision: str, device: int) -> float:
    dtype = PRECISIONS[precision]
    return best_rate(raw_kernel(SOURCE, f"peak_fma_{precision}"), precision, (dtype(0.999), dtype(1e-3)), 2) / 1e9


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
