import pytest

from bench.backend import gpu_available


def pytest_collection_modifyitems(config, items):
    """GPU tests are skipped, and reported as skipped, where there is no GPU."""
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU: CuPy is not installed or sees no device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
