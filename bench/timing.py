"""Timers: the whole measured run plus named phases inside it.

The host timer reads perf_counter after calling `sync` (a no-op on the CPU; a
device synchronise for GPU code run with host timing).  A CUDA-event timer
with the same interface will serve the GPU backend."""

import time
from collections import defaultdict
from contextlib import contextmanager


class HostTimer:
    def __init__(self, sync=lambda: None):
        self.sync = sync
        self.seconds = 0.0
        self.phases: dict[str, float] = defaultdict(float)

    @contextmanager
    def run(self):
        """Times the whole measured run into `seconds`."""
        self.sync()
        start = time.perf_counter()
        yield self
        self.sync()
        self.seconds = time.perf_counter() - start

    @contextmanager
    def phase(self, name: str):
        self.sync()
        start = time.perf_counter()
        yield
        self.sync()
        self.phases[name] += time.perf_counter() - start
