"""Loading the suites' CUDA sources through CuPy (imported on first use: importing
this module needs no GPU)."""

from functools import cache
from pathlib import Path


@cache
def _module(source: Path, options: tuple[str, ...]):
    import cupy

    return cupy.RawModule(code=source.read_text(), options=options)


@cache
def raw_kernel(source: Path, name: str, options: tuple[str, ...] = ("-std=c++17",)):
    """A kernel (cupy RawKernel) of a .cu file, compiled once per process (CuPy also
    caches on disk)."""
    return _module(source, options).get_function(name)
