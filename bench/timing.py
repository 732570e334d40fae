"""Timers: the whole measured run plus named phases inside it.

The host timer reads perf_counter (CPU backend).  The CUDA-event timer records
events on the current stream around the run and each phase and reads them once,
after one synchronise at the end of the run, so timing adds no host round trip
inside the run."""

import time
from collections import defaultdict
from contextlib import contextmanager


class HostTimer:
    def __init__(self):
        self.seconds = 0.0
        self.phases: dict[str, float] = defaultdict(float)

    @contextmanager
    def run(self):
        """Times the whole measured run into `seconds`."""
        start = time.perf_counter()
        yield self
        self.seconds = time.perf_counter() - start

    @contextmanager
    def phase(self, name: str):
        start = time.perf_counter()
        yield
        self.phases[name] += time.perf_counter() - start


class CudaEventTimer:
    def __init__(self):
        import cupy

        self._cuda = cupy.cuda
        self._spans = []
        self.seconds = 0.0
        self.phases: dict[str, float] = defaultdict(float)

    def _event(self):
        event = self._cuda.Event()
        event.record()
        return event

    @contextmanager
    def run(self):
        start = self._event()
        yield self
        stop = self._event()
        stop.synchronize()
        self.seconds = self._cuda.get_elapsed_time(start, stop) / 1e3
        for name, begin, end in self._spans:
            self.phases[name] += self._cuda.get_elapsed_time(begin, end) / 1e3

    @contextmanager
    def phase(self, name: str):
        begin = self._event()
        yield
        self._spans.append((name, begin, self._event()))


def make_timer(backend: str):
    return CudaEventTimer() if backend == "gpu" else HostTimer()


def copy_bandwidth_gbps(nbytes: int = 2 << 30, repeats: int = 10) -> float:
    """Device-to-device copy bandwidth, bytes read plus written, median of
    `repeats` copies timed with CUDA events after one warm-up copy."""
    import cupy
    import numpy as np

    source = cupy.ones(nbytes // 4, dtype=cupy.float32)  # not zeros: nothing may shortcut them
    target = cupy.empty_like(source)
    target[...] = source
    times = []
    for _ in range(repeats):
        timer = CudaEventTimer()
        with timer.run():
            target[...] = source
        times.append(timer.seconds)
    return 2 * source.nbytes / float(np.median(times)) / 1e9
