"""Loading the suites' CUDA sources through CuPy (imported on first use: importing
this module needs no GPU)."""

from functools import cache
from pathlib import Path


@cache
def _module(source: Path, options: tuple[str, ...], device: int):
    import cupy

    return cupy.RawModule(code=source.read_text(), options=options)


@cache
def _kernel(source: Path, name: str, options: tuple[str, ...], device: int):
    return _module(source, options, device).get_function(name)


def raw_kernel(source: Path, name: str, options: tuple[str, ...] = ("-std=c++17",)):
    """A kernel (cupy RawKernel) of a .cu file for the current GPU, compiled once per
    process (CuPy also caches on disk) and loaded once per GPU."""
    import cupy

    return _kernel(source, name, options, cupy.cuda.runtime.getDevice())
