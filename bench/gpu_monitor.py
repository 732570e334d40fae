"""GPU clocks and slow-downs seen while a point is measured, and L2 flushing.

A point timed while the GPU had cut its clock for power or heat is not
comparable with one timed at full clock, so the harness records, per point, the
SM clocks seen and whether a slow-down was active.  It also evicts L2 between
repeats, so no repeat reads data that the one before left cached.

NVML (nvidia-ml-py, module pynvml) is optional: without it, or without a
driver, the monitor records nothing and says why, and never raises."""

import functools
import itertools
import operator
import statistics
import threading

# Clock-event reasons that mean the GPU slowed itself for power or heat:
# (name in throttle_reasons, pynvml constant suffix, bit value in nvml.h).
_SLOWDOWNS = (
    ("sw_power_cap", "SwPowerCap", 0x4),
    ("hw_slowdown", "HwSlowdown", 0x8),
    ("sw_thermal", "SwThermalSlowdown", 0x20),
    ("hw_thermal", "HwThermalSlowdown", 0x40),
    ("hw_power_brake", "HwPowerBrakeSlowdown", 0x80),
)
# Other reasons, named in throttle_reasons but not counted as power or heat.
_OTHERS = (
    ("sync_boost", "SyncBoost", 0x10),
    ("display_clock", "DisplayClockSetting", 0x100),
    ("board_limit", "BoardLimit", 0x200),
    ("reliability", "Reliability", 0x400),
)
# Set on a healthy GPU (idle; clocks held at the application setting): these
# are not slow-downs, so they are neither named nor counted.
_IGNORED = (("GpuIdle", 0x1), ("ApplicationsClocksSetting", 0x2))


def _reason_bit(nvml, suffix: str, default: int) -> int:
    # Newer pynvml names them ClocksEventReason*, older ClocksThrottleReason*.
    for prefix in ("nvmlClocksEventReason", "nvmlClocksThrottleReason"):
        value = getattr(nvml, prefix + suffix, None)
        if value is not None:
            return value
    return default


_nvml_lock = threading.Lock()
_nvml = None  # None until first tried, then (pynvml or None, why not or None)


def _init_nvml():
    """(pynvml, None) after nvmlInit, or (None, reason); tried once per process:
    NVML stays initialised until the process exits, so no point pays for it."""
    global _nvml
    with _nvml_lock:
        if _nvml is None:
            try:
                import pynvml
            except ImportError:
                _nvml = (None, "nvidia-ml-py not installed")
            else:
                try:
                    pynvml.nvmlInit()
                    _nvml = (pynvml, None)
                except Exception as error:  # no driver, no libnvidia-ml, ...
                    _nvml = (None, f"nvmlInit failed: {error}")
        return _nvml


class ClockMonitor:
    """Samples the SM clock and clock-event reasons of one GPU while in use:

        with ClockMonitor() as clocks:
            ...measure one point...
        row.update(clocks.summary())

    device_index is NVML's index, which follows PCI bus order and ignores
    CUDA_VISIBLE_DEVICES; on a one-GPU machine it is 0 either way."""

    def __init__(self, device_index: int = 0, interval_s: float = 0.01):
        self.interval_s = interval_s
        self._samples: list[tuple[int, int]] = []  # (SM clock MHz, reasons bitmask)
        self._thread = None
        self._stop = threading.Event()
        self._nvml, self.unavailable_reason = _init_nvml()
        if self._nvml is None:
            return
        nvml = self._nvml
        try:
            self._handle = nvml.nvmlDeviceGetHandleByIndex(device_index)
        except Exception as error:
            self._nvml, self.unavailable_reason = None, f"no NVML device {device_index}: {error}"
            return
        # The Event call replaced the Throttle one; use the old one only where
        # this pynvml lacks the new name.
        self._get_reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) \
            or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        self._slowdown_mask = 0
        self._names = []  # (bit, name), in bit order, for throttle_reasons
        for group, slows in ((_SLOWDOWNS, True), (_OTHERS, False)):
            for name, suffix, default in group:
                bit = _reason_bit(nvml, suffix, default)
                self._names.append((bit, name))
                self._slowdown_mask |= bit if slows else 0
        self._names.sort()
        known = [bit for bit, _ in self._names] + [_reason_bit(nvml, *ignored) for ignored in _IGNORED]
        self._known_mask = functools.reduce(operator.or_, known)

    def _sample(self):
        nvml, handle = self._nvml, self._handle
        clock = nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)
        self._samples.append((clock, self._get_reasons(handle)))

    def _run(self):
        # NVML calls go through ctypes, which releases the GIL, so this thread
        # barely competes with the benchmark's own Python.  wait() returns True
        # as soon as stop is set, so exit does not wait out an interval.
        while not self._stop.wait(self.interval_s):
            try:
                self._sample()
            except Exception:  # a query that fails once fails again: keep what we have
                return

    def __enter__(self):
        self._samples = []
        if self._nvml is None:
            return self
        try:
            self._sample()  # one at enter, so a point shorter than interval_s has data
        except Exception as error:  # e.g. a device without clock queries
            self._nvml, self.unavailable_reason = None, f"NVML query failed: {error}"
            return self
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="ClockMonitor", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            try:
                self._sample()  # and one at exit: the state the point ended in
            except Exception:
                pass
        return False

    def summary(self) -> dict:
        """A flat dict for the results row; None values when nothing was sampled."""
        if not self._samples:
            return {"sm_clock_mhz_min": None, "sm_clock_mhz_median": None,
                    "sm_clock_mhz_max": None, "throttled": None,
                    "throttle_reasons": None, "clock_samples": 0}
        clocks = sorted(clock for clock, _ in self._samples)
        seen = functools.reduce(operator.or_, (reasons for _, reasons in self._samples))
        names = [name for bit, name in self._names if seen & bit]
        if seen & ~self._known_mask:  # a reason newer than this table: show its bits
            names.append(hex(seen & ~self._known_mask))
        return {
            "sm_clock_mhz_min": clocks[0],
            "sm_clock_mhz_median": int(round(statistics.median(clocks))),
            "sm_clock_mhz_max": clocks[-1],
            "throttled": bool(seen & self._slowdown_mask),
            "throttle_reasons": "|".join(names),
            "clock_samples": len(self._samples),
        }


@functools.cache
def _flush_buffer(device: int, nbytes: int):
    # Allocated once per device and size, so a flush costs no allocation.
    import cupy

    with cupy.cuda.Device(device):
        return cupy.empty(-(-nbytes // 4), dtype=cupy.int32)


@functools.cache
def _l2_bytes(device: int) -> int:
    import cupy

    return cupy.cuda.runtime.getDeviceProperties(device)["l2CacheSize"]


_fill_values = itertools.count(1)


def flush_l2(nbytes: int | None = None) -> None:
    """Evicts the current device's L2 by writing a buffer of nbytes (default
    twice the L2 size: replacement is not strict LRU, so writing just L2's size
    can leave old lines in place).
    The write is queued on the current stream, ahead of whatever is timed next;
    its value changes every call, so no write can be skipped as a repeat."""
    import cupy

    device = cupy.cuda.runtime.getDevice()
    buffer = _flush_buffer(device, nbytes or 2 * _l2_bytes(device))
    buffer.fill(next(_fill_values) % (1 << 31))
