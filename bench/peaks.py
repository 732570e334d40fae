"""The GPU's physical limits, measured in the run that reports against them: the FMA peak
of a precision, by a kernel that does nothing else (kernels/peaks.cu), and the bandwidth
of a device-to-device copy (bench.timing.calibrate). CuPy is imported on first use."""

from functools import cache
from pathlib import Path

import numpy as np

from bench.backend import raw_kernel

SOURCE = Path(__file__).parent / "kernels" / "peaks.cu"
THREADS, BLOCKS_PER_SM, ITERATIONS, CHAINS, TRIES = 256, 8, 1 << 14, 8, 5
PRECISIONS = {"f32": np.float32, "f64": np.float64}


def best_rate(launch, precision: str, args: tuple, operations_per_step: int) -> float:
    """Operations per second of the fastest of TRIES launches (after a warm-up) of
    launch(out, ITERATIONS, *args) on BLOCKS_PER_SM blocks of THREADS threads an SM, each
    thread making CHAINS x operations_per_step operations an iteration; CUDA events."""
    import cupy

    blocks = cupy.cuda.Device().attributes["MultiProcessorCount"] * BLOCKS_PER_SM
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


@cache
def fma_gflops(precision: str) -> float:
    """The FMA peak of `precision` (f32, f64) in GFLOP/s, a multiply-add counted as 2."""
    dtype = PRECISIONS[precision]
    return best_rate(raw_kernel(SOURCE, f"peak_fma_{precision}"), precision, (dtype(0.999), dtype(1e-3)), 2) / 1e9


COPY_TRIES = 3


def measure() -> dict:
    """This GPU's limits: copy bandwidth in GB/s (bytes read plus written, the best of a few
    copies) and the FMA peak of each precision in GFLOP/s."""
    from bench.timing import calibrate

    return {"copy_gbps": max(calibrate("gpu")["copy_gbps"] for _ in range(COPY_TRIES)),
            **{f"fma_gflops_{precision}": fma_gflops(precision) for precision in PRECISIONS}}
