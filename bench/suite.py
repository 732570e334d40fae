"""The protocol every suite implements, and the registry of suites.

A suite declares what it measures: axes (the workload's parameters and tunable
settings), variants (interchangeable implementations, each on a device, some of
them peer libraries), metrics (with unit, direction and how `bench check` gates
them), phases, plots and its source files. It builds a workload for a point and
runs one variant on it inside a RunContext the harness owns. The harness does
everything else: the cross product of the axes, timing with each variant's
device clock, repeats, storage, resume, progress, verification and checks.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from dataclasses import dataclass
from typing import Callable

from bench.errors import BenchError

# name -> module holding a SUITE object. BENCH_SUITES="name=module,..." adds more
# (plugins, and the tests' fake suite).
REGISTRY = {"lda": "impls.lda.suite", "lda-kernels": "impls.lda.kernel_suite", "sumrv": "impls.sumrv.suite",
            "admodel": "impls.admodel.suite", "admodel-fit": "impls.admodel.fit_suite", "saber": "impls.saber.suite",
            "saber-fit": "impls.saber.fit_suite"}
DEFAULT_SUITE = "lda"  # the paper user's `bench sweep --k 4..1024`


@dataclass(frozen=True)
class Axis:
    """A parameter of a point. `default` is a spec, or a function of (backend,
    the specs given so far) for defaults that depend on other axes; `parse`
    turns a spec into values (BenchError on bad input). A tunable axis (tune=True)
    is a setting of the variants rather than of the workload."""

    name: str
    default: str | Callable[[str, dict], str]
    parse: Callable[[str], list]
    help: str = ""
    tune: bool = False
    aliases: tuple[str, ...] = ()

    def default_spec(self, backend: str, given: dict) -> str:
        return self.default(backend, given) if callable(self.default) else self.default


# A numerical error gated by tolerance fails at ten times its baseline: a broken kernel's
# error is orders of magnitude larger, and atomics on a GPU move a correct one by up to 3x.
# Below ERROR_RESOLUTION an error is rounding, not a value to be ten times of: a float64
# reduction's error is 0 on one thread and ~1e-14 on several.
ERROR_TOLERANCE = 9.0
ERROR_RESOLUTION = 1e-12


@dataclass(frozen=True)
class Metric:
    """A measured column. gate: None (recorded only), "ratio" (to the reference
    variant measured in the same repeat) or "tolerance" (a change of the value itself
    relative to the baseline's, or to `resolution` where that is larger, for quality
    metrics). per="iteration" metrics go to the series file."""

    name: str
    unit: str
    better: str = "lower"
    per: str = "run"
    gate: str | None = None
    tolerance: float = 0.0
    resolution: float = 0.0
    help: str = ""

    def __post_init__(self):
        assert self.better in ("lower", "higher") and self.per in ("run", "iteration")
        assert self.gate in (None, "ratio", "tolerance")


@dataclass(frozen=True)
class Variant:
    name: str
    doc: str
    devices: tuple[str, ...] = ("cpu",)
    peer: bool = False  # another library, measured for comparison
    needs: tuple[str, ...] = ()  # importable packages it needs

    def missing(self) -> list[str]:
        return [name for name in self.needs if not _importable(name)]


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:  # a dotted name whose parent package is missing
        return False


@dataclass(frozen=True)
class Plot:
    """A generic figure: y against x, one line per `line`, one figure per `panel` value."""

    stem: str
    title: str
    x: str
    y: str = "seconds"
    line: str = "variant"
    panel: str | None = None
    logx: bool = False
    logy: bool = False
    series: bool = False  # drawn from the per-iteration series file


@dataclass(frozen=True)
class Defaults:
    """Measurement settings of a suite on a backend; the command line overrides them.
    With max_noise set, a point is repeated beyond `repeats` until the relative
    noise of every variant is below it, within budget_s (nvbench's stopping rule)."""

    repeats: int = 3
    warmup: int = 1
    max_noise: float | None = None
    budget_s: float = 10.0
    max_repeats: int = 1000
    note: str = ""


@dataclass(frozen=True)
class Label:
    """A text column a run records beside its metrics (what an adaptive variant chose): kept,
    never gated or averaged."""

    name: str
    help: str = ""


SECONDS = Metric("seconds", "s", gate="ratio", help="the whole measured run")


class Suite:
    name: str
    description: str
    axes: tuple[Axis, ...] = ()
    variants: tuple[Variant, ...] = ()
    reference: str = ""  # the variant other variants are compared with
    # The reference of GPU runs where `reference` runs on the CPU: a CPU time's noise would
    # hide a GPU kernel's change in the ratios that `bench check` gates.
    gpu_reference: str = ""
    metrics: tuple[Metric, ...] = ()  # besides seconds and the phases, which every suite has
    labels: tuple[Label, ...] = ()  # text a run returns beside its metrics
    phases: tuple[str, ...] = ()
    plots: tuple[Plot, ...] = ()
    sources: tuple[str, ...] = ()  # paths under the repository, hashed into code_version (required)
    default_variants: tuple[str, ...] = ()  # () = all
    verify_axes: tuple[Axis, ...] = ()
    paper: str = ""  # the paper it re-measures: title, authors, venue
    recipes: tuple = ()  # bench.recipes.Recipe: the paper's figures and tables, and how to reproduce them
    claims: tuple = ()  # bench.recipes.Claim: the paper's statements beside ours
    sanitizer_kernels: str = ""  # compute-sanitizer checks kernels whose names contain this ("": every kernel)

    def defaults(self, backend: str) -> Defaults:
        return Defaults()

    def skip(self, point: dict) -> str | None:
        """Why a combination of axis values is invalid, or None."""
        return None

    def skip_variant(self, point: dict, variant: str) -> str | None:
        """Why one variant is not measured at a point (a CPU peer at a size it would
        take minutes for), or None."""
        return None

    def prepare(self, point: dict):
        """The workload of a point, on its backend's device (untimed)."""
        raise NotImplementedError

    def check(self, points: list[dict]) -> None:
        """BenchError for what the axes' parsers cannot see (a corpus file missing)."""

    def run(self, workload, variant: str, ctx) -> dict | None:
        """Run `variant` once on the workload; time phases with ctx.phase(name),
        leave work out with ctx.untimed(), record per-iteration values with
        ctx.record(iteration, **values); return per-run metric (and label) values."""
        raise NotImplementedError

    def derived(self, workload, row: dict) -> dict:
        """Metrics computed from a timed row (rates, fractions of the copy bandwidth)."""
        return {}

    def work(self, workload, row: dict):
        """What each call of a GPU row's timed run must touch and do at least (a
        bench.ceilings.Work: footprint, multiply-adds, launches, calls), from which the harness
        computes its floor against the ceilings measured in the same run; None where a
        variant's is not stated."""
        return None

    @property
    def states_work(self) -> bool:
        return type(self).work is not Suite.work

    # Verification: a fresh case per point, a reference answer, an agreement rule.
    def verify_skip(self, point: dict) -> str | None:
        """Why a verification point cannot run on its backend, or None."""
        return None

    def verify_case(self, point: dict, seed: int):
        raise NotImplementedError(f"suite {self.name} has no verification")

    def output(self, case, variant: str, device: str):
        raise NotImplementedError

    def agrees(self, case, got, alpha: float) -> tuple[bool, str]:
        """(agrees, detail); alpha is the family-wise level for statistical checks."""
        raise NotImplementedError

    def render_figures(self, df, series, meta: dict, outdir) -> list:
        """Figures beyond the declared plots (the paper's own); [] by default."""
        return []

    def kernel_builds(self) -> list[tuple]:
        """(source, NVRTC options) of every CUDA file of the suite, as its GPU code compiles
        it: `bench list SUITE --kernels` lists the kernels of each."""
        return []

    # Derived from the declarations.
    def recipe(self, name: str):
        for recipe in self.recipes:
            if recipe.name == name:
                return recipe
        raise BenchError(f"unknown recipe {name!r} of suite {self.name}; known: "
                         f"{', '.join(r.name for r in self.recipes) or 'none'}")

    def variant(self, name: str) -> Variant:
        for variant in self.variants:
            if variant.name == name:
                return variant
        raise BenchError(f"unknown variant {name!r} of suite {self.name}; known: "
                         f"{', '.join(v.name for v in self.variants)}")

    def all_metrics(self) -> tuple[Metric, ...]:
        from bench.ceilings import METRICS as CEILINGS

        phases = tuple(Metric(f"{phase}_s", "s", help=f"time in phase {phase}") for phase in self.phases)
        return (SECONDS, *phases, *self.metrics, *(CEILINGS if self.states_work else ()))


def _registry() -> dict[str, str]:
    extra = dict(item.split("=", 1) for item in os.environ.get("BENCH_SUITES", "").split(",") if "=" in item)
    return {**REGISTRY, **extra}


def suite_names() -> list[str]:
    return list(_registry())


def get_suite(name: str) -> Suite:
    registry = _registry()
    if name not in registry:
        raise BenchError(f"unknown suite {name!r}; known: {', '.join(registry)}")
    try:
        return importlib.import_module(registry[name]).SUITE
    except (ImportError, AttributeError) as error:
        raise BenchError(f"suite {name}: cannot load {registry[name]}.SUITE ({error})") from None


def all_suites() -> list[Suite]:
    return [get_suite(name) for name in _registry()]
