"""Choosing between the CPU and GPU backends."""

from bench.errors import BenchError


def gpu_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver, no device: all mean no GPU
        return False


def gpu_array_module():
    """CuPy where it sees a GPU, else None: for bulk work (sorts, searches) whose result
    does not depend on where it runs."""
    if not gpu_available():
        return None
    import cupy

    return cupy


def to_host(array):
    """A CuPy array copied to the host; anything else as a numpy array (a numpy one as it is)."""
    import numpy as np

    return array.get() if hasattr(array, "get") else np.asarray(array)


def resolve_backend(requested: str, supported: tuple[str, ...]) -> str:
    if requested not in ("auto", "cpu", "gpu"):
        raise BenchError(f"unknown backend {requested!r}; known: auto, cpu, gpu")
    if requested == "auto":
        return "gpu" if "gpu" in supported and gpu_available() else "cpu"
    if requested not in supported:
        raise BenchError(f"this suite has no {requested} backend yet; available: {', '.join(supported)}")
    if requested == "gpu" and not gpu_available():
        raise BenchError("--backend gpu: no GPU found (CuPy missing or it sees no CUDA device)")
    return requested
