"""A knob for measuring what `bench check` catches; never set in a normal run.

BENCH_SLOWDOWN="alg7=1.1" makes every timed run of variant alg7 take 1.1 times as long,
"*=2" every variant's, "alg1=1.05,alg7=1.2" two of them. The harness then waits on the
variant's device inside its timed run, after the run's own work, for (factor - 1) times
the variant's steady time (the median of three untimed runs after the warm-ups, which are
slower): on the CPU a busy loop, on a GPU a one-thread
kernel that waits on the global timer (kernels/spin.cu), so that the rows read as if the
variant's kernels had slowed. On runs of tens of microseconds it falls short of the
factor: a run among the interleaved repeats takes longer than the steady runs taken back to
back. The calibration is never slowed. A run made with the knob
records it in its sidecar (`slowdown`)."""

from __future__ import annotations

import os
import statistics
import time
from importlib.resources import files

from bench.errors import BenchError

ENV = "BENCH_SLOWDOWN"
SOURCE = files("bench") / "kernels" / "spin.cu"


def factors() -> dict[str, float]:
    """{variant or "*": factor} from BENCH_SLOWDOWN; {} where it is unset."""
    spec = os.environ.get(ENV, "").strip()
    chosen = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, value = item.partition("=")
        try:
            factor = float(value)
        except ValueError:
            factor = float("nan")
        if not name or not factor >= 1:
            raise BenchError(f"{ENV}={spec!r}: expected VARIANT=FACTOR[,...] with FACTOR >= 1 (or *=FACTOR)")
        chosen[name] = factor
    return chosen


def factor_for(chosen: dict[str, float], variant: str) -> float:
    return chosen.get(variant, chosen.get("*", 1.0))


def steady_seconds(run, device: str, runs: int = 3) -> float:
    """The median time of a few runs (run(ctx)), before the timed repeats."""
    from bench.timing import RunContext

    times = []
    for _ in range(runs):
        with RunContext(device).timed() as ctx:
            run(ctx)
        times.append(ctx.seconds)
    return statistics.median(times)


def wait(device: str, seconds: float) -> None:
    """Keep the device busy for this long, in order with the run's own work."""
    if seconds <= 0:
        return
    if device == "gpu":
        import numpy as np

        from bench.backend import raw_kernel

        raw_kernel(SOURCE, "spin")((1,), (1,), (np.uint64(seconds * 1e9),))
        return
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
