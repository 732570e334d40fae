"""The interface every suite implements, and the registry of suites.

A suite names its variants (interchangeable implementations of one job), the
axes of a measured point, the phases it times, and how to build a workload for
a point and run one variant on it.  The harness does everything else: sweeps,
repeats, timing, storage, resume, progress."""

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from bench.errors import BenchError

# name -> module holding a SUITE object; later suites (saber, sumrv, admodel) add a line.
REGISTRY = {"lda": "impls.lda.suite"}


@dataclass(frozen=True)
class SweepDefaults:
    """What `bench sweep` does when an option is left out, per backend."""

    options: dict
    variants: tuple[str, ...]
    repeats: int
    warmup: int
    note: str = ""


@dataclass
class Measurement:
    """One timed run: whole seconds, per-phase seconds, and extra columns."""

    seconds: float
    phases: dict
    extra: dict = field(default_factory=dict)


class Suite(ABC):
    name: str
    description: str
    variants: dict[str, str]  # name -> one-line description
    reference_variant: str  # the variant others are compared with in `bench check`
    phases: tuple[str, ...]
    backends: tuple[str, ...]

    @abstractmethod
    def defaults(self, backend: str) -> SweepDefaults: ...

    @abstractmethod
    def points(self, options: dict, backend: str) -> list[dict]:
        """The points of a sweep (dicts of axis values, CSV column order), from
        the user's options (None = default); BenchError for bad values."""

    @abstractmethod
    def prepare(self, point: dict):
        """Build the workload of a point (data on the backend's device)."""

    @abstractmethod
    def measure(self, workload, variant: str, timer) -> dict:
        """Run `variant` once on the workload inside timer.run(), timing its
        phases with timer.phase(); return extra columns for the row."""

    @abstractmethod
    def render_figures(self, df, meta: dict, outdir) -> list: ...


def get_suite(name: str) -> Suite:
    if name not in REGISTRY:
        raise BenchError(f"unknown suite {name!r}; known: {', '.join(REGISTRY)}")
    return importlib.import_module(REGISTRY[name]).SUITE


def all_suites() -> list[Suite]:
    return [get_suite(name) for name in REGISTRY]
