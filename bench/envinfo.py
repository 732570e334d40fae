"""The environment a run was measured in: hardware, software versions, code identity.

Every probe is wrapped: a missing GPU, CuPy, nvidia-smi, git or .git (the GPU machine
gets a copy of the tree without .git) gives None, never an exception.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import re
import shlex
import socket
import subprocess
from datetime import datetime, timezone
from functools import cache
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
CODE_DIRS = ("bench", "impls")
CODE_PATTERNS = ("*.py", "*.cu", "*.cuh", "catalogue.toml")  # the catalogue defines the synthetic corpora
# What a suite reproduces, claims and draws, not how it measures: editing a claim's words, a
# recipe's sizes, a figure or the report leaves the results current (and `bench reproduce`
# measures nothing again for it).
NOT_MEASURING = ("recipes.py", "figures.py", "report.py")
PACKAGES = ("numpy", "numba", "pandas", "scipy", "matplotlib", "typer", "cupy", "pynvml", "torch", "tomotopy")

# cudaDeviceAttr values; CUDA 13 dropped the clock fields from cudaDeviceProp.
_ATTR_SM_CLOCK_KHZ = 13
_ATTR_MEM_CLOCK_KHZ = 36


def _probe(fn, *args):
    try:
        return fn(*args)
    except Exception:
        return None


def _cpu_model() -> str:
    fields = {}
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        name, _, value = line.partition(":")
        fields.setdefault(name.strip(), value.strip())
    # x86 says "model name"; some ARM kernels say "Hardware" or "Model" instead.
    for name in ("model name", "Hardware", "Model"):
        if fields.get(name):
            return fields[name]
    raise LookupError("no CPU model in /proc/cpuinfo")


# Where a distribution is not named as its module: CuPy's wheels carry the CUDA release
# (cupy-cuda12x), pynvml comes as nvidia-ml-py.
DISTRIBUTIONS = {"cupy": ("cupy", "cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x"), "pynvml": ("nvidia-ml-py", "pynvml")}


@cache
def _package_versions() -> dict:
    # Metadata, not import: a package that fails to import (numba-cuda with a new numpy)
    # still reports its version, and nothing heavy is imported. By name, not through
    # packages_distributions(), which reads every installed file list (7 s of a GPU gate's
    # process on a machine with a few hundred packages).
    def version(module: str) -> str | None:
        for name in DISTRIBUTIONS.get(module, (module,)):
            found = _probe(importlib.metadata.version, name)
            if found:
                return found
        return None

    return {module: version(module) for module in PACKAGES}


def _command(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30).stdout.strip()


def _cuda_version(number: int) -> str:
    return f"{number // 1000}.{number % 1000 // 10}"


def _gpu_info() -> dict:
    """GPU facts through CuPy (device 0), plus the driver release from nvidia-smi."""
    import cupy

    runtime = cupy.cuda.runtime
    count = runtime.getDeviceCount()
    if count == 0:
        raise LookupError("no CUDA device")
    name = runtime.getDeviceProperties(0)["name"]
    return {
        "gpu_name": name.decode() if isinstance(name, bytes) else name,
        "gpu_count": count,
        "gpu_max_sm_clock_mhz": _probe(lambda: runtime.deviceGetAttribute(_ATTR_SM_CLOCK_KHZ, 0) // 1000),
        "gpu_max_mem_clock_mhz": _probe(lambda: runtime.deviceGetAttribute(_ATTR_MEM_CLOCK_KHZ, 0) // 1000),
        "cuda_runtime": _probe(lambda: _cuda_version(runtime.runtimeGetVersion())),
        "cuda_driver_api": _probe(lambda: _cuda_version(runtime.driverGetVersion())),
        "driver_version": _probe(
            lambda: _command("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader").splitlines()[0]
        ),
    }


_NO_GPU = dict.fromkeys(
    ("gpu_name", "gpu_count", "gpu_max_sm_clock_mhz", "gpu_max_mem_clock_mhz",
     "cuda_runtime", "cuda_driver_api", "driver_version")
)


def _git(*args: str) -> str | None:
    if not (REPO_ROOT / ".git").exists():
        return None
    return _probe(_command, "git", "-C", str(REPO_ROOT), *args)


def _numba_threads() -> int:
    import numba

    return numba.config.NUMBA_NUM_THREADS


def collect_env(argv: list[str]) -> dict:
    """A JSON-ready description of this machine, its software and the code being run."""
    commit = _git("rev-parse", "HEAD")
    # Dirty means the code differs from the commit; results/ and figures/ change on every run.
    status = _git("status", "--porcelain", "--", *CODE_DIRS)
    return {
        "cpu_model": _probe(_cpu_model) or platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        # The CPU backend's parallel loops use this many threads (NUMBA_NUM_THREADS).
        "numba_threads": _probe(_numba_threads),
        "os": platform.platform(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "versions": _probe(_package_versions) or dict.fromkeys(PACKAGES),
        **(_probe(_gpu_info) or _NO_GPU),
        "git_commit": commit,
        "git_dirty": None if commit is None or status is None else bool(status),
        "hostname": socket.gethostname(),
        "argv": recorded_argv(argv),
        "command": shlex.join(recorded_argv(argv)),
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


LOCATION_OPTIONS = ("--out", "--results", "--figures")


def recorded_argv(argv: list[str]) -> list[str]:
    """The command line as a run records it: the program as `bench`, however it was started
    (`python -m bench` gives __main__.py's path), and the folders it wrote to as DIR: the
    record lies in that folder, and another machine's folders tell a reader nothing."""
    argv = list(argv)
    if argv and (Path(argv[0]).name == "bench" or Path(argv[0]).name == "__main__.py"
                 and Path(argv[0]).parent.name == "bench"):
        argv[0] = "bench"
    recorded = argv[:1]
    for previous, arg in zip(argv, argv[1:]):
        name, equals, _ = arg.partition("=")
        recorded.append("DIR" if previous in LOCATION_OPTIONS else
                        f"{name}=DIR" if equals and name in LOCATION_OPTIONS else arg)
    return recorded


def code_version(sources: tuple[str, ...] = CODE_DIRS) -> str:
    """Short sha256 over the source files under bench/ and the given paths (a suite's
    own directories): relative path and bytes, so a change to one suite leaves
    another's code version alone."""
    roots = dict.fromkeys(["bench", *sources])
    files = sorted(
        {(path.relative_to(REPO_ROOT).as_posix(), path)
         for root in roots
         for pattern in CODE_PATTERNS
         for path in ((REPO_ROOT / root).rglob(pattern) if (REPO_ROOT / root).is_dir() else [REPO_ROOT / root])
         if path.is_file() and path.match(pattern) and path.name not in NOT_MEASURING}
    )
    digest = hashlib.sha256()
    for relative, path in files:
        data = path.read_bytes()
        # Lengths delimit the fields, so no two different trees hash the same stream.
        for part in (relative.encode(), data):
            digest.update(len(part).to_bytes(8, "little"))
            digest.update(part)
    return digest.hexdigest()[:12]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def machine_slug(env: dict, backend: str) -> str:
    """Filesystem-safe name of the hardware a backend ran on: the results directory name.

    backend "cpu" gives "cpu-<model>-<n>c" (trademark marks and the "@ clock" suffix
    dropped); any other backend is a GPU and gives its model name, e.g. "nvidia-h100-80gb-hbm3".
    """
    if backend.lower() == "cpu":
        model = re.sub(r"\((r|tm)\)|@.*", " ", env.get("cpu_model") or "unknown", flags=re.IGNORECASE)
        return f"cpu-{_slug(model)}-{env.get('cpu_count') or 0}c"
    if not env.get("gpu_name"):
        raise ValueError(f"backend {backend!r} needs a GPU, but none was detected")
    return _slug(env["gpu_name"])
