"""Choosing between the CPU and GPU backends, and the GPU helpers every suite uses (CuPy
is imported on first use: importing this module needs no GPU)."""

from functools import cache
from importlib.resources.abc import Traversable

import numpy as np

from bench.errors import BenchError

NULL = np.uintp(0)  # a null pointer argument of a kernel: CuPy passes None as 0xffffffff (cupy issue 9046)


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


@cache
def _module(source: Traversable, options: tuple[str, ...], device: int):
    import cupy

    return cupy.RawModule(code=source.read_text(), options=options)


_COMPILED: dict[tuple, object] = {}  # (source, name, options) -> kernel: what this process compiled


@cache
def _kernel(source: Traversable, name: str, options: tuple[str, ...], device: int):
    kernel = _module(source, options, device).get_function(name)
    _COMPILED[source, name, options] = kernel
    return kernel


def kernel_attributes(kernel) -> dict:
    """A compiled kernel's resources: registers per thread, local memory per thread (spills
    and local arrays), static shared memory per block."""
    attributes = kernel.attributes
    return {"registers": attributes["num_regs"], "local_bytes": attributes["local_size_bytes"],
            "shared_bytes": attributes["shared_size_bytes"], "max_threads": attributes["max_threads_per_block"]}


def compiled_kernels() -> dict[str, dict]:
    """Every kernel this process compiled ("name options"), with its resources (recorded in a
    GPU run's sidecar)."""
    return {" ".join((name, *options)): {"source": source.name, **kernel_attributes(kernel)}
            for (source, name, options), kernel in sorted(_COMPILED.items(), key=lambda item: item[0][1:])}


def kernel_names(source: Traversable, options: tuple[str, ...] = ("-std=c++17",)) -> list[str]:
    """The names of every kernel a .cu file defines (its macros expanded): NVRTC's PTX entries,
    or the .text sections of the cubin it returns on newer GPUs."""
    import re

    from cupy.cuda import compiler

    binary = compiler.compile_using_nvrtc(source.read_text(), options=options)
    binary = binary[0] if isinstance(binary, tuple) else binary  # (code, name mapping) in newer CuPy
    binary = binary if isinstance(binary, bytes) else binary.encode()
    names = re.findall(rb"\.entry\s+([A-Za-z_]\w*)\s*\(", binary) or re.findall(rb"\.text\.([A-Za-z_]\w*)\x00", binary)
    return sorted({name.decode() for name in names})


def kernel_table(source: Traversable, options: tuple[str, ...] = ("-std=c++17",)) -> list[dict]:
    """Every kernel of a .cu file compiled for the current GPU, with its resources."""
    return [{"kernel": name, **kernel_attributes(raw_kernel(source, name, options))}
            for name in kernel_names(source, options)]


def raw_kernel(source: Traversable, name: str, options: tuple[str, ...] = ("-std=c++17",)):
    """A kernel (cupy RawKernel) of a .cu file for the current GPU, compiled once per
    process (CuPy also caches on disk) and loaded once per GPU. source is the file as
    importlib.resources.files gives it (package data): read with .read_text(), named by
    .name in the sidecar, and hashable (the compile caches are keyed on it)."""
    import cupy

    return _kernel(source, name, options, cupy.cuda.runtime.getDevice())


def allow_shared_memory(kernel, shared: int) -> None:
    """Let `kernel` (a cupy RawKernel) launch with `shared` bytes of dynamic shared memory a
    block: past its default (48 KiB less its static shared memory), a kernel must opt in. (The
    attribute is a driver call, not read for none: a small launch is its host's cost.)"""
    if shared and shared > kernel.max_dynamic_shared_size_bytes:
        kernel.max_dynamic_shared_size_bytes = shared


def device_attribute(name: str) -> int:
    """An attribute of the current GPU (CuPy's Device.attributes), read once per GPU: the
    GPUs of one machine may differ."""
    import cupy

    return _device_attribute(name, cupy.cuda.runtime.getDevice())


@cache
def _device_attribute(name: str, device: int) -> int:
    import cupy

    return cupy.cuda.Device(device).attributes[name]


def multiprocessors() -> int:
    """The SMs of the current GPU."""
    return device_attribute("MultiProcessorCount")
