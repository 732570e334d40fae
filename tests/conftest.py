import pytest

from bench.backend import gpu_available


def pytest_collection_modifyitems(config, items):
    """GPU tests are skipped, and reported as skipped, where there is no GPU; a test marked
    real_corpus("kos", ...) where one of its corpora is not in the cache or on BENCH_DATA_PATH
    (bench.corpus.locate: nothing is downloaded)."""
    from bench.corpus import locate

    gpu = gpu_available()
    skip_gpu = pytest.mark.skip(reason="no CUDA GPU: CuPy is not installed or sees no device")
    for item in items:
        if "gpu" in item.keywords and not gpu:
            item.add_marker(skip_gpu)
        for mark in item.iter_markers("real_corpus"):
            missing = [name for name in mark.args if locate(name) is None]
            if missing:
                item.add_marker(pytest.mark.skip(reason=f"real corpus {', '.join(missing)} not in the cache or on "
                                                        "BENCH_DATA_PATH (tests download nothing)"))


@pytest.fixture(autouse=True)
def no_downloads(monkeypatch):
    """Nothing in the tests downloads: pooch.retrieve fails unless a test replaces it (without
    pooch, as on the GPU machines, nothing can)."""
    try:
        import pooch
    except ImportError:
        return

    def refuse(url, *args, **kwargs):
        raise RuntimeError(f"tests download nothing (asked for {url})")

    monkeypatch.setattr(pooch, "retrieve", refuse)
