"""Clocks, the context a suite's run is timed in, and the calibration measured
beside every repeat.

Each variant is timed with its own device's clock: perf_counter for CPU variants
and peers, CUDA events for GPU variants. The CUDA clock records events on the
current stream and reads them after one synchronise at the end of the run, so
timing adds no host round trip inside a run: ctx.record's stamps, too, are read
when the series is."""

from __future__ import annotations

import itertools
import time
from collections import defaultdict
from contextlib import contextmanager
from functools import cache


class HostClock:
    def mark(self) -> float:
        return time.perf_counter()

    def wait(self, mark) -> None:
        pass

    def between(self, start, stop) -> float:
        return stop - start


class CudaClock:
    def __init__(self):
        import cupy

        self._cuda = cupy.cuda

    def mark(self):
        event = self._cuda.Event()
        event.record()
        return event

    def wait(self, mark) -> None:
        mark.synchronize()

    def between(self, start, stop) -> float:
        return self._cuda.get_elapsed_time(start, stop) / 1e3


def clock_for(device: str):
    return CudaClock() if device == "gpu" else HostClock()


class RunContext:
    """What a suite's run sees: ctx.phase(name), ctx.untimed(), ctx.record(...).

    The harness opens ctx.timed() around the run; `seconds` is the whole run less
    its untimed spans, `phases` the seconds per phase, `series` the recorded values
    with the timed seconds so far (`wall_s`)."""

    def __init__(self, device: str):
        self.device = device
        self.seconds = 0.0
        self.phases: dict[str, float] = defaultdict(float)
        self._series: list[dict] = []
        self._recorded: list[tuple[int, object, int, dict]] = []  # read into _series when asked for
        self._clock = clock_for(device)
        self._spans: list[tuple[str, object, object]] = []
        self._untimed: list[tuple[object, object]] = []
        self._start = None

    def _untimed_seconds(self) -> float:
        return sum(self._clock.between(a, b) for a, b in self._untimed)

    @contextmanager
    def timed(self):
        self._start = self._clock.mark()
        yield self
        stop = self._clock.mark()
        self._clock.wait(stop)
        self.seconds = self._clock.between(self._start, stop) - self._untimed_seconds()
        for name, begin, end in self._spans:
            self.phases[name] += self._clock.between(begin, end)

    @contextmanager
    def phase(self, name: str):
        begin = self._clock.mark()
        yield
        self._spans.append((name, begin, self._clock.mark()))

    @contextmanager
    def untimed(self):
        """Work left out of the run's time (an evaluation for a convergence curve)."""
        begin = self._clock.mark()
        yield
        self._untimed.append((begin, self._clock.mark()))

    def record(self, iteration: int, **values) -> None:
        """Per-iteration values, stamped with the timed seconds so far. The host waits for
        nothing here: the stamp is read when the series is, and a value may be a function of
        no arguments, called then (a count that the GPU has yet to make)."""
        self._recorded.append((iteration, self._clock.mark(), len(self._untimed), values))

    @property
    def series(self) -> list[dict]:
        """The recorded values with their stamps (wall_s), once the GPU has reached the last
        (in time linear in the records and untimed spans: a run may have thousands)."""
        if self._recorded:
            self._clock.wait(self._recorded[-1][1])
            untimed_before = list(itertools.accumulate((self._clock.between(a, b) for a, b in self._untimed),
                                                       initial=0.0))
            for iteration, mark, untimed, values in self._recorded:
                wall = self._clock.between(self._start, mark) - untimed_before[untimed]
                self._series.append({"iteration": iteration, "wall_s": wall,
                                     **{name: value() if callable(value) else value for name, value in values.items()}})
            self._recorded.clear()
        return self._series


# Calibration: a fixed job timed beside every repeat, so that `bench check` can tell
# a regression of every variant at once (or of the reference) from a slower machine.
CPU_CALIBRATION_SHAPE = (1024, 256)
GPU_CALIBRATION_BYTES = 1 << 30


CPU_CALIBRATION_TRIES = 3


@cache
def _cpu_calibration_buffers():
    import numpy as np

    values = np.random.default_rng(0).random(CPU_CALIBRATION_SHAPE)
    return values, np.empty_like(values)


@cache
def _gpu_calibration_buffers():
    import cupy

    source = cupy.ones(GPU_CALIBRATION_BYTES // 4, dtype=cupy.float32)  # not zeros: nothing may shortcut them
    return source, cupy.empty_like(source)


def calibrate(backend: str) -> dict:
    """One timing of the fixed job. On a GPU the FP32 FMA kernel of bench.peaks (about a
    millisecond), whose time the SM clock alone sets: a 1 GiB copy, the job before it, moved
    by up to 8% between processes on an H100 (where its buffers lie in memory), more than
    the kernels it calibrated. Beside it the copy itself, whose bandwidth (bytes read plus
    written, copy_gbps) memory-bound kernels are reported against. On a CPU the row-wise
    prefix sums of a 1024 x 256 matrix of doubles (single-threaded, the fastest of three)."""
    if backend == "gpu":
        from bench.peaks import fma_job

        fma = fma_job()
        source, target = _gpu_calibration_buffers()
        clock = CudaClock()
        start = clock.mark()
        fma()
        between = clock.mark()
        target[...] = source
        stop = clock.mark()
        clock.wait(stop)
        return {"calibration_s": clock.between(start, between),
                "copy_gbps": 2 * source.nbytes / clock.between(between, stop) / 1e9}
    # Prefix sums, as in a draw, not a sort: on the 2-core CI machines a sort ran in a
    # fast or a slow mode fixed per process (1.05 or 1.49 ms), these within +-3% across
    # processes. Into a buffer allocated once (a fresh 2 MB array would page-fault on
    # every call); the fastest of a few tries, as an interrupt only ever adds time.
    import numpy as np

    values, work = _cpu_calibration_buffers()
    seconds = []
    for _ in range(CPU_CALIBRATION_TRIES):
        start = time.perf_counter()
        np.cumsum(values, axis=1, out=work)
        seconds.append(time.perf_counter() - start)
    return {"calibration_s": min(seconds), "copy_gbps": None}


def calibration_id(backend: str) -> str:
    """A fingerprint of the calibration job as this code times it on `backend` (its code and
    sizes; on a GPU all of bench.peaks and its kernels): `bench check` refuses to compare times
    over two different jobs, so that a change cannot loosen its own check by changing the job
    its times are measured against."""
    import hashlib
    import inspect

    parts = [inspect.getsource(calibrate)]
    if backend == "gpu":
        from bench import peaks

        parts += [inspect.getsource(_gpu_calibration_buffers), repr(GPU_CALIBRATION_BYTES),
                  inspect.getsource(peaks), peaks.SOURCE.read_text()]
    else:
        parts += [inspect.getsource(_cpu_calibration_buffers), repr((CPU_CALIBRATION_SHAPE, CPU_CALIBRATION_TRIES))]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def warm_calibration(backend: str) -> None:
    for _ in range(3):
        calibrate(backend)
