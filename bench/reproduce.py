"""`bench reproduce`: the suites' recipes as one resumable plan, within a time budget.

A plan is every sweep of the chosen recipes at one profile's sizes, each checked
against the machine (GPUs, memory, corpora) and skipped with its reason where the
machine lacks what it needs. Running it measures what is missing (as sweeps resume),
under one progress display, and stops cleanly before the budget runs out: a point
is started only when the time it is expected to take (from this machine type's
earlier results, else from the points measured so far) fits in what is left, and a
point still running when the budget ends is abandoned. Then the figures are drawn and
the report written, also when a recipe failed.
"""

from __future__ import annotations

import os
import re
import signal
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from bench import harness, results
from bench.corpus import catalogue, locate
from bench.errors import BenchError
from bench.recipes import FOLDERS, PROFILES, Recipe, Size, Sweep
from bench.suite import Suite, all_suites, get_suite

_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?$")
FIGURE_RESERVE_S = 60.0  # of a budget, kept for drawing the figures and writing the report


def parse_duration(text: str) -> float:
    """Seconds in '90', '90s', '9m', '1h30m', '2.5h'."""
    match = _DURATION.match(text.strip().lower())
    if not text.strip() or not match or not any(match.groups()):
        raise BenchError(f"bad duration {text!r}: use seconds or h/m/s, e.g. 600, 90s, 9m, 1h30m")
    hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total <= 0:
        raise BenchError(f"bad duration {text!r}: must be more than 0")
    return total


def select(targets: list[str]) -> list[tuple[Suite, Recipe]]:
    """(suite, recipe) for SUITE or SUITE:RECIPE targets; every recipe of every suite for none."""
    if not targets:
        return [(suite, recipe) for suite in all_suites() for recipe in suite.recipes]
    chosen = []
    for target in targets:
        name, _, recipe = target.partition(":")
        suite = get_suite(name)
        if recipe:
            chosen.append((suite, suite.recipe(recipe)))
        elif not suite.recipes:
            owners = [s.name for s in all_suites() if s.recipes]
            raise BenchError(f"suite {name} declares no recipes of its own (its sweeps are in another suite's "
                             f"recipes); suites with recipes: {', '.join(owners)}")
        else:
            chosen += [(suite, r) for r in suite.recipes]
    unique = {(suite.name, recipe.name): (suite, recipe) for suite, recipe in chosen}
    return list(unique.values())


@dataclass
class Job:
    """One sweep of a recipe under the profile: its plan and settings, or why it is skipped."""

    owner: str  # the suite that declares the recipe
    recipe: Recipe
    sweep: Sweep
    size: Size | None
    plan: harness.Plan | None = None
    settings: harness.Settings | None = None
    skip: str | None = None
    todo: list = field(default_factory=list)  # (point, repeats each variant has)
    downloads: list[str] = field(default_factory=list)  # real corpora not present here

    @property
    def label(self) -> str:
        return f"{self.owner}:{self.recipe.name}"


@dataclass
class Machine:
    """What the sweeps may need of this machine."""

    slug: str
    gpus: int | None  # None: unknown (a dry run of a GPU profile on a machine without one)
    gpu_memory_gib: float
    host_memory_gib: float

    def lacks(self, size: Size) -> str | None:
        if self.gpus is None:
            return None
        if size.gpus > self.gpus:
            return f"needs {size.gpus} GPUs; this machine has {self.gpus}"
        if size.gpu_memory_gib and size.gpu_memory_gib > self.gpu_memory_gib:
            return f"needs {size.gpu_memory_gib:g} GiB of GPU memory; this GPU has {self.gpu_memory_gib:.0f}"
        if size.host_memory_gib and size.host_memory_gib > self.host_memory_gib:
            return f"needs {size.host_memory_gib:g} GiB of host memory; this machine has {self.host_memory_gib:.0f}"
        return None


def this_machine(backend: str) -> Machine:
    """This machine as a profile's backend sees it (a GPU profile without a GPU: unknown)."""
    from bench import envinfo
    from bench.backend import gpu_available

    host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    env = envinfo.collect_env([])
    if backend == "cpu":
        return Machine(envinfo.machine_slug(env, "cpu"), 0, 0.0, host)
    if not gpu_available():
        return Machine("", None, 0.0, host)
    import cupy

    memory = cupy.cuda.runtime.getDeviceProperties(0)["totalGlobalMem"] / 2**30
    return Machine(envinfo.machine_slug(env, "gpu"), env["gpu_count"], memory, host)


def results_dir(results_root: Path, slug: str, profile: str) -> Path:
    """Where a profile's results go: results/<machine>/, or a folder of its own below it (ci)."""
    return results_root / (slug or "<gpu>") / FOLDERS.get(profile, "")


def build(selected: list[tuple[Suite, Recipe]], profile: str, backend: str, results_root: Path, machine: Machine,
          fresh: bool = False) -> list[Job]:
    """Every sweep of the selected recipes under the profile, planned and checked against the machine;
    fresh: every point measured again (a new run beside the earlier ones)."""
    if profile not in PROFILES:
        raise BenchError(f"unknown profile {profile!r}; known: {', '.join(PROFILES)}")
    jobs, planned = [], set()
    for owner, recipe in selected:
        for sweep in recipe.sweeps:
            job = Job(owner.name, recipe, sweep, sweep.at(profile, backend))
            jobs.append(job)
            if job.size is None:
                job.skip = f"not in the {profile} profile"
                continue
            suite = get_suite(sweep.suite)
            job.plan = harness.plan(suite, sweep.specs(profile, backend), backend, list(sweep.variants) or None)
            job.settings = harness.settings_for(job.plan, results_dir(results_root, machine.slug, profile),
                                                repeats=job.size.repeats, warmup=job.size.warmup,
                                                max_noise=job.size.max_noise, fresh=fresh)
            job.downloads = sorted({point["dataset"] for point in job.plan.points
                                    if catalogue().get(str(point.get("dataset")), {}).get("kind") == "uci"
                                    and locate(point["dataset"]) is None})
            job.skip = machine.lacks(job.size)
            # A point whose variants an earlier sweep of the plan measures (all of them) is not counted twice.
            pending = harness.pending(job.plan, job.settings) if machine.slug else \
                [(point, {}) for point in job.plan.points]
            job.todo = _new_points(job.plan, pending, planned)
    return jobs


def _run_keys(plan: harness.Plan, point: dict) -> set[tuple]:
    """What two sweeps share at a point: (suite, point, variant) for each variant measured there."""
    where = tuple(sorted((k, str(v)) for k, v in point.items()))
    return {(plan.suite.name, where, name) for name, _ in plan.variants_at(point)}


def _new_points(plan: harness.Plan, points: list[tuple[dict, dict]], planned: set[tuple]) -> list:
    """The points whose variants are not all measured by a sweep before (planned: their keys, updated)."""
    new = []
    for point, done in points:
        keys = _run_keys(plan, point)
        if not keys <= planned:
            planned |= keys
            new.append((point, done))
    return new


def points_left(jobs: list[Job]) -> int:
    """Points the jobs still lack, a point that an earlier sweep measures counted once (as build does)."""
    planned: set[tuple] = set()
    return sum(len(_new_points(job.plan, harness.pending(job.plan, job.settings), planned))
               for job in jobs if job.plan and not job.skip)


class Estimator:
    """Expected wall time of a point, from a machine type's earlier results: the time between
    the point's rows and the ones before them in the same run (the whole point: its set-up, the
    warm-ups and the repeats) per run of one variant, times the runs left to measure (those a
    variant already has left out); the mean over runs."""

    def __init__(self, directory: Path | None):
        self.directory = directory
        self._walls: dict[str, pd.Series] = {}

    def _point_walls(self, suite: Suite) -> pd.Series:
        if suite.name in self._walls:
            return self._walls[suite.name]
        walls = pd.Series(dtype=float)
        path = self.directory / f"{suite.name}.csv" if self.directory else None
        if path is not None and path.exists():
            df, schema, sidecar = results.load(path, suite.name, lambda name: results.schema_for(suite))
            walls = self._walls_of(df, results.key_columns(schema), sidecar.get("runs", {}))
        self._walls[suite.name] = walls
        return walls

    @staticmethod
    def _walls_of(df: pd.DataFrame, keys: list[str], runs: dict) -> pd.Series:
        if df.empty:
            return pd.Series(dtype=float)
        df = df.assign(time=pd.to_datetime(df["timestamp"], utc=True, format="ISO8601"))
        points = df.groupby("group").agg(run_id=("run_id", "first"), time=("time", "first"),
                                         warmup=("warmup", "first"), runs=("variant", "size"),
                                         variants=("variant", "nunique"), **{k: (k, "first") for k in keys})
        points = points.sort_values("time")
        started = points["run_id"].map(lambda r: runs.get(r, {}).get("timestamp"))
        previous = points.groupby("run_id")["time"].shift()
        previous = previous.fillna(pd.to_datetime(started, utc=True, format="ISO8601", errors="coerce"))
        seconds = (points["time"] - previous).dt.total_seconds()
        # per run of one variant, warm-up or repeat (a resumed point's group holds some variants only)
        per_run = seconds / (points["runs"] + points["warmup"] * points["variants"])
        key = points[keys].astype(str).agg("|".join, axis=1)
        # Timestamps are whole seconds: a short point's gap is 0 or 1; the mean of them is unbiased.
        return per_run[seconds.notna()].groupby(key[seconds.notna()]).mean()

    def point(self, job: Job, point: dict, done: dict[str, int]) -> float | None:
        walls = self._point_walls(get_suite(job.sweep.suite))
        if walls.empty:
            return None
        keys = results.key_columns(results.schema_for(job.plan.suite))
        key = "|".join(results.as_text(point[k]) for k in keys)
        if key not in walls.index:
            return None
        left = [job.settings.repeats - done.get(name, 0) for name, _ in job.plan.variants_at(point)]
        return float(walls[key]) * (sum(max(0, n) for n in left) + job.settings.warmup * sum(n > 0 for n in left))


def describe(jobs: list[Job], estimator: Estimator, machine: Machine, profile: str) -> tuple[list[str], float, int]:
    """The plan as lines, the expected seconds of the points with an estimate, and the
    number of points without one."""
    lines, total, unknown, last = [], 0.0, 0, None
    for job in jobs:
        if job.label != last:
            in_profile = [j for j in jobs if j.label == job.label and j.size is not None]
            last = job.label
            if not in_profile and profile in FOLDERS:  # the ci profile: its own recipes alone
                continue
            lines.append(f"{job.label}: {job.recipe.reproduces}" + ("" if in_profile else
                                                                    f" (not in the {profile} profile)"))
        head = f"    {job.sweep.suite}"
        if job.size is None:  # the sweep is not part of this profile: nothing to say
            continue
        if job.skip:
            lines.append(f"{head}: skipped, {job.skip}")
            continue
        points, variants = len(job.plan.points), len(job.plan.variants)
        estimates = [estimator.point(job, point, done) for point, done in job.todo]
        known = [e for e in estimates if e is not None]
        total += sum(known)
        unknown += len(estimates) - len(known)
        expected = (f"expected {_minutes(sum(known))}" + (f" for {len(known)} of them" if
                                                          len(known) < len(estimates) else "")) if known else \
            "no estimate"
        spec = " ".join(f"{k}={v}" for k, v in job.sweep.specs(profile, job.plan.backend).items())
        lines.append(f"{head}: {points} points x {variants} variants x {job.settings.repeats} repeats; "
                     f"{len(job.todo)} to measure, {expected}; {spec}")
        for line in job.plan.describe_skips():
            lines.append(f"        {line}")
        if job.downloads:
            lines.append(f"        needs {', '.join(job.downloads)}: not in the cache or on BENCH_DATA_PATH, "
                         "downloaded first (skipped if that fails)")
    return lines, total, unknown


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


class Budget:
    """A deadline for measuring: points start only where their expected time fits; a
    point still running at the deadline is abandoned (SIGALRM), finished ones kept."""

    def __init__(self, seconds: float | None, estimator: Estimator):
        self.deadline = None if seconds is None else time.monotonic() + max(1.0, seconds - self._reserve(seconds))
        self.estimator = estimator
        self.walls: dict[str, list[float]] = {}  # per job label: the points measured so far
        self.started: tuple[str, float] | None = None  # the point being measured: (job, when)
        self.stopped = False

    @staticmethod
    def _reserve(seconds: float) -> float:
        return min(FIGURE_RESERVE_S, 0.1 * seconds)

    def left(self) -> float:
        return float("inf") if self.deadline is None else self.deadline - time.monotonic()

    def expected(self, job: Job, point: dict, done: dict[str, int]) -> float | None:
        earlier = self.estimator.point(job, point, done)
        if earlier is not None:
            return earlier
        walls = self.walls.get(job.label)
        return sum(walls) / len(walls) if walls else None

    def before_point(self, job: Job):
        def check(point: dict, left: int) -> None:
            if self.started is not None:
                label, when = self.started
                self.walls.setdefault(label, []).append(time.monotonic() - when)
            if self.stopped or self.left() <= 0:
                self.stopped = True
                raise harness.Stop("the budget ran out")
            done = next((d for p, d in job.todo if p == point), {})
            expected = self.expected(job, point, done)
            if expected is not None and expected > self.left():
                self.stopped = True
                raise harness.Stop(f"the next point of {job.label} is expected to take {_minutes(expected)}, "
                                   f"more than the {_minutes(max(0.0, self.left()))} left")
            self.started = (job.label, time.monotonic())
        return check

    def __enter__(self):
        if self.deadline is not None:
            def expire(signum, frame):
                self.stopped = True
                raise harness.Stop("the budget ran out during a point (abandoned; finished points and its finished "
                                   "variants are kept)")

            self._previous = signal.signal(signal.SIGALRM, expire)
            signal.setitimer(signal.ITIMER_REAL, max(0.01, self.left()))
        return self

    def __exit__(self, *exc):
        if self.deadline is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous)
        return False


def run(jobs: list[Job], budget: Budget, echo) -> tuple[list[str], list[str]]:
    """Measure every job's missing points under one progress display; (failures, stops)."""
    failures, stops = [], []
    runnable = [job for job in jobs if not job.skip and job.todo]
    fetched: dict[str, str | None] = {}
    for job in runnable:
        for name in job.downloads:
            if name not in fetched:
                fetched[name] = _fetch(name)
        missing = [f"{name} ({fetched[name]})" for name in job.downloads if fetched[name]]
        if missing:
            job.skip = f"corpus not available: {'; '.join(missing)}"
            echo(f"{job.label}: skipped, {job.skip}")
    runnable = [job for job in runnable if not job.skip]
    progress = harness.progress_bar()
    with progress, budget:
        task = progress.add_task("reproduce", total=sum(len(job.todo) for job in runnable))
        for job in runnable:
            if budget.stopped:
                break
            try:
                status = harness.sweep(job.plan, job.settings, progress=(progress, task),
                                       before_point=budget.before_point(job), label=f"{job.label} ")
                if status == 130:
                    raise KeyboardInterrupt
            except harness.Stop as stop:
                stops.append(f"{job.label}: {stop}")
                break
            except (KeyboardInterrupt, SystemExit):
                raise
            except Exception as error:  # one recipe failing must not lose the others
                detail = str(error) if isinstance(error, BenchError) else traceback.format_exc(limit=6)
                failures.append(f"{job.label} ({job.sweep.suite}): {detail.strip()}")
                echo(f"[red]{job.label} failed[/]: {detail.strip()}")
    return failures, stops


def _fetch(name: str) -> str | None:
    """None once a real corpus is here (downloaded if need be), else why not."""
    from bench.corpus import CorpusError, fetch

    try:
        fetch(name)
        return None
    except CorpusError as error:
        return str(error)
