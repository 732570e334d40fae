"""Reproductions and claims, declared by the suites as data.

A Recipe names the paper figure or table it reproduces and the sweeps that feed it;
each Sweep gives its size under each profile (a Size: axis specs and measurement
settings), or none where the profile leaves it out. A Claim holds a paper's statement,
a function that computes ours from a machine's results, the rule for "holds", and
the cause of a difference, written once beside it. `bench reproduce` runs recipes;
`bench report` computes every claim's verdict. Model: triton's perf_report (a figure
and its sweep in one declaration).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

# profile -> the backend its sweeps run on (None: the GPU where there is one, else the
# CPU), and what it is for (bench reproduce --help).
PROFILES = {
    "cpu": ("cpu", "every suite on the CPU, small: `make figures`, minutes on 2 cores"),
    "quick": ("gpu", "every recipe on one GPU in at most 20 minutes: smaller corpora, fewer iterations and K"),
    "paper": ("gpu", "the papers' settings: their iterations, repeats and K grids, full-size corpora"),
    "ci": (None, "the regression gate of `bench check`: a few stable points a suite, on the GPU where there is "
                 "one (a minute or two), else on the CPU; kept apart in results/<machine>/ci/"),
}
# Profiles whose results are kept in a folder of their own under results/<machine>/, so that
# their many reruns never reach the figures.
FOLDERS = {"ci": "ci"}


def backend_of(profile: str, gpu: bool) -> str:
    """The backend a profile's sweeps run on, on a machine with or without a GPU."""
    return PROFILES[profile][0] or ("gpu" if gpu else "cpu")


SETTINGS = ("repeats", "warmup", "max_noise", "gpus", "gpu_memory_gib", "host_memory_gib")


@dataclass(frozen=True)
class Size:
    """A sweep under one profile: axis specs (as on the command line) and settings.
    gpus, gpu_memory_gib and host_memory_gib are what the sweep needs of the machine;
    where it lacks them the recipe is skipped, with the reason."""

    axes: Mapping[str, str] = field(default_factory=dict)
    repeats: int | None = None  # None: the suite's default on the backend
    warmup: int | None = None
    max_noise: float | None = None
    gpus: int = 0
    gpu_memory_gib: float = 0.0
    host_memory_gib: float = 0.0


def size(**values) -> Size:
    """A Size from keywords: settings by name (SETTINGS), every other keyword an axis
    spec, e.g. size(K="4..1024", iterations=3, repeats=3)."""
    settings = {k: values.pop(k) for k in SETTINGS if k in values}
    return Size(axes=MappingProxyType({k: str(v) for k, v in values.items()}), **settings)


@dataclass(frozen=True)
class Sweep:
    """One `bench sweep` of a suite: fixed axes and variants, and a size per profile
    (None: not run under that profile); the ci profile has a size per backend."""

    suite: str
    axes: Mapping[str, str] = field(default_factory=dict)
    variants: tuple[str, ...] = ()  # (): the suite's default set
    cpu: Size | None = None
    quick: Size | None = None
    paper: Size | None = None
    ci_cpu: Size | None = None
    ci_gpu: Size | None = None

    def at(self, profile: str, backend: str | None = None) -> Size | None:
        if profile == "ci":
            return self.ci_gpu if (backend or "gpu") == "gpu" else self.ci_cpu
        return getattr(self, profile)

    def specs(self, profile: str, backend: str | None = None) -> dict[str, str]:
        """The axis specs of the sweep under a profile (None where it is not run)."""
        chosen = self.at(profile, backend)
        return None if chosen is None else {**{k: str(v) for k, v in self.axes.items()}, **chosen.axes}


@dataclass(frozen=True)
class Recipe:
    """A paper figure or table, the sweeps that feed it, and the stems of the figures and
    tables it draws (files under figures/<machine>/ whose names start with one)."""

    name: str
    reproduces: str
    sweeps: tuple[Sweep, ...]
    figures: tuple[str, ...] = ()
    note: str = ""

    @property
    def reproduces_paper(self) -> bool:
        """Whether a reproduction profile (not ci) runs it: the report shows those alone."""
        return any(s.cpu or s.quick or s.paper for s in self.sweeps)


def gate(*sweeps: Sweep, note: str = "") -> Recipe:
    """A suite's regression gate: the few stable points that `bench check` compares, run by
    the ci profile alone (a sweep with ci_cpu for the CPU, one with ci_gpu for a GPU)."""
    return Recipe("ci", "the regression gate: the points `bench check` compares (the ci profile alone)", sweeps,
                  note=note)


@dataclass(frozen=True)
class Measured:
    """Ours, for a claim: the value its rule judges and the text the report shows."""

    value: Any
    text: str


@dataclass(frozen=True)
class Claim:
    """A paper's claim beside ours. `ours(results)` computes ours from a machine's results
    (a bench.report.Results) or returns None where they do not hold what it needs ("not
    measured here"); `holds(value)` is the rule; `rule` says it in words; `why` is the
    cause of a difference (with the profile behind it), shown where the claim differs."""

    id: str
    paper: str
    ours: Callable[[Any], Measured | None]
    holds: Callable[[Any], bool]
    rule: str
    why: str = ""
    recipe: str = ""  # the recipe whose results it reads
