"""ClockMonitor against a fake pynvml (no GPU needed), and flush_l2 on a GPU."""

import sys
import time
import types

import pytest

from bench import gpu_monitor
from bench.gpu_monitor import ClockMonitor

IDLE, APP_CLOCKS, POWER_CAP, HW_THERMAL = 0x1, 0x2, 0x4, 0x40


class FakeNVMLError(Exception):
    pass


def fake_pynvml(clocks, reasons, *, event_api=True, constants=True, init_error=None):
    """A pynvml stand-in that returns clocks[i] and reasons[i] on its i-th
    query, repeating the last value once the list runs out."""
    fake = types.ModuleType("pynvml")
    fake.NVML_CLOCK_SM = 1
    fake.calls = 0

    def init():
        if init_error:
            raise init_error

    def clock_info(handle, clock_type):
        assert clock_type == fake.NVML_CLOCK_SM
        fake.calls += 1
        return clocks[min(fake.calls, len(clocks)) - 1]

    def current_reasons(handle):
        return reasons[min(fake.calls, len(reasons)) - 1]

    fake.nvmlInit = init
    fake.nvmlDeviceGetHandleByIndex = lambda index: f"handle{index}"
    fake.nvmlDeviceGetClockInfo = clock_info
    if event_api:
        fake.nvmlDeviceGetCurrentClocksEventReasons = current_reasons
    else:
        fake.nvmlDeviceGetCurrentClocksThrottleReasons = current_reasons
    if constants:
        fake.nvmlClocksEventReasonGpuIdle = IDLE
        fake.nvmlClocksEventReasonApplicationsClocksSetting = APP_CLOCKS
        fake.nvmlClocksEventReasonSwPowerCap = POWER_CAP
        fake.nvmlClocksEventReasonHwThermalSlowdown = HW_THERMAL
    return fake


@pytest.fixture
def use(monkeypatch):
    """Installs a fake pynvml (None: import fails) and forgets any earlier nvmlInit."""
    def install(fake):
        monkeypatch.setitem(sys.modules, "pynvml", fake)
        monkeypatch.setattr(gpu_monitor, "_nvml", None)
        return fake
    return install


def measure(fake=None, min_calls=0, **kwargs):
    monitor = ClockMonitor(**kwargs)
    with monitor:
        deadline = time.monotonic() + 5
        while fake is not None and fake.calls < min_calls and time.monotonic() < deadline:
            time.sleep(0.001)
    return monitor


def test_clocks_summarised(use):
    # 1200 and 1980 come first; every later sample is 1500, the median.
    fake = use(fake_pynvml([1200, 1980, 1500], [0]))
    summary = measure(fake, min_calls=5, interval_s=0.001).summary()
    assert (summary["sm_clock_mhz_min"], summary["sm_clock_mhz_median"],
            summary["sm_clock_mhz_max"]) == (1200, 1500, 1980)
    assert summary["clock_samples"] >= 5
    assert summary["throttled"] is False and summary["throttle_reasons"] == ""


def test_power_cap_in_any_sample_means_throttled(use):
    fake = use(fake_pynvml([1980], [IDLE, POWER_CAP | APP_CLOCKS, 0]))
    summary = measure(fake, min_calls=3, interval_s=0.001).summary()
    assert summary["throttled"] is True
    assert summary["throttle_reasons"] == "sw_power_cap"


def test_idle_and_application_clocks_are_not_throttling(use):
    use(fake_pynvml([1980], [IDLE, APP_CLOCKS, IDLE | APP_CLOCKS]))
    summary = measure(interval_s=0.001).summary()
    assert summary["throttled"] is False
    assert summary["throttle_reasons"] == ""


def test_reason_names_in_bit_order_with_unknown_bits_in_hex(use):
    use(fake_pynvml([1980], [HW_THERMAL | 0x10 | 0x8000, POWER_CAP]))
    summary = measure(interval_s=0.001).summary()
    assert summary["throttled"] is True
    assert summary["throttle_reasons"] == "sw_power_cap|sync_boost|hw_thermal|0x8000"


def test_old_pynvml_falls_back_to_throttle_api_and_documented_bits(use):
    use(fake_pynvml([1980], [0x80], event_api=False, constants=False))
    summary = measure(interval_s=0.001).summary()
    assert summary["throttled"] is True and summary["throttle_reasons"] == "hw_power_brake"


def test_a_point_that_lasts_no_time_has_samples_at_enter_and_exit(use):
    use(fake_pynvml([1755], [0]))
    summary = measure(interval_s=60).summary()
    assert summary["clock_samples"] == 2
    assert summary["sm_clock_mhz_min"] == summary["sm_clock_mhz_max"] == 1755


def test_each_use_starts_afresh_and_the_thread_stops(use):
    use(fake_pynvml([1755], [POWER_CAP, 0]))
    monitor = measure(interval_s=60)
    assert monitor.summary()["throttled"] is True
    with monitor:
        pass
    assert monitor.summary()["throttled"] is False and monitor.summary()["clock_samples"] == 2
    assert monitor._thread is None


def test_nvml_initialised_once_per_process(use):
    fake = use(fake_pynvml([1755], [0]))
    inits = []
    fake.nvmlInit = lambda: inits.append(1)
    measure(), measure()
    assert inits == [1]


UNAVAILABLE = {"sm_clock_mhz_min": None, "sm_clock_mhz_median": None, "sm_clock_mhz_max": None,
               "throttled": None, "throttle_reasons": None, "clock_samples": 0}


def test_without_pynvml_nothing_raises_and_the_reason_is_given(use):
    use(None)  # None in sys.modules makes `import pynvml` raise ImportError
    monitor = measure()
    assert monitor.summary() == UNAVAILABLE
    assert monitor.unavailable_reason == "nvidia-ml-py not installed"


def test_failing_nvml_init_gives_no_values_and_the_reason(use):
    use(fake_pynvml([1755], [0], init_error=FakeNVMLError("Driver Not Loaded")))
    monitor = measure()
    assert monitor.summary() == UNAVAILABLE
    assert "Driver Not Loaded" in monitor.unavailable_reason


def test_missing_device_or_failing_query_gives_no_values(use):
    fake = use(fake_pynvml([1755], [0]))
    fake.nvmlDeviceGetHandleByIndex = lambda index: (_ for _ in ()).throw(FakeNVMLError("Invalid Argument"))
    monitor = measure(device_index=3)
    assert monitor.summary() == UNAVAILABLE and "device 3" in monitor.unavailable_reason

    fake = use(fake_pynvml([1755], [0]))
    fake.nvmlDeviceGetClockInfo = lambda handle, clock: (_ for _ in ()).throw(FakeNVMLError("Not Supported"))
    monitor = measure()
    assert monitor.summary() == UNAVAILABLE and "Not Supported" in monitor.unavailable_reason


@pytest.mark.gpu
def test_flush_l2_writes_a_cached_buffer_larger_than_l2():
    import cupy

    device = cupy.cuda.runtime.getDevice()
    l2 = cupy.cuda.runtime.getDeviceProperties(device)["l2CacheSize"]
    gpu_monitor.flush_l2()
    buffer = gpu_monitor._flush_buffer(device, 2 * l2)
    first = int(buffer[0])
    gpu_monitor.flush_l2()
    assert gpu_monitor._flush_buffer(device, 2 * l2) is buffer  # no new allocation
    assert buffer.nbytes >= 2 * l2
    assert int(buffer[0]) != first and int(buffer[-1]) == int(buffer[0])  # rewritten whole


@pytest.mark.gpu
def test_real_nvml_reports_clocks():
    pytest.importorskip("pynvml")
    monitor = ClockMonitor()
    with monitor:
        time.sleep(0.05)
    summary = monitor.summary()
    assert monitor.unavailable_reason is None, monitor.unavailable_reason
    assert summary["clock_samples"] >= 2 and summary["sm_clock_mhz_max"] > 0
    assert summary["throttled"] in (True, False)
