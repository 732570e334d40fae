"""Plans and measures sweeps of any suite.

A plan is the cross product of the suite's axes (minus the combinations the suite
skips, with reasons) and the chosen variants, each on a device (minus those whose
package or device is missing, with reasons). A point is measured with all its
variants interleaved, repeat by repeat, after untimed warm-ups, beside a calibration
timed in the same repeat; rows are appended a point at a time, so an interrupted
sweep keeps every finished point, and the finished variants of the point it was
measuring, and a rerun adds only what is missing.
"""

from __future__ import annotations

import itertools
import os
import resource
import signal
import statistics
import sys
import threading
import time
import traceback
import uuid
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from bench import ceilings, envinfo, results, slowdown
from bench.backend import compiled_kernels
from bench.errors import BenchError
from bench.suite import Suite
from bench.timing import RunContext, calibrate, calibration_id, warm_calibration

console = Console(stderr=True, soft_wrap=True)  # a line per message, whole, in a CI log too


@dataclass
class Settings:
    repeats: int
    warmup: int
    out_dir: Path
    fresh: bool = False
    max_noise: float | None = None  # stop a point once its relative noise is below this
    budget_s: float = 10.0  # ... or once it has taken this long
    max_repeats: int = 1000
    flush_l2: bool = False

    def __post_init__(self):
        if self.repeats < 1 or self.warmup < 0:
            raise BenchError("need --repeats >= 1 and --warmup >= 0")
        if self.max_repeats < self.repeats:
            raise BenchError(f"--max-repeats {self.max_repeats} is below --repeats {self.repeats}, the least a point "
                             "takes")
        if self.max_noise is not None and not 0 < self.max_noise < 1:
            raise BenchError(f"--max-noise must be 0 (off) or in (0, 1), got {self.max_noise}")
        if self.budget_s <= 0:
            raise BenchError(f"--timeout must be > 0 seconds, got {self.budget_s}")


@dataclass
class Plan:
    suite: Suite
    backend: str
    points: list[dict]
    variants: list[tuple[str, str]]  # (variant, device)
    skipped_points: list[tuple[dict, str]] = field(default_factory=list)
    skipped_variants: dict[str, str] = field(default_factory=dict)
    skipped_at: list[tuple[dict, str, str]] = field(default_factory=list)  # (point, variant, why)

    def variants_at(self, point: dict) -> list[tuple[str, str]]:
        """The variants measured at a point: those the suite does not skip there."""
        return [(name, device) for name, device in self.variants if not self.suite.skip_variant(point, name)]

    def pairs(self) -> int:
        return sum(len(self.variants_at(point)) for point in self.points)

    def describe_skips(self) -> list[str]:
        by_reason: dict[str, list[str]] = {}  # one line a reason: a CPU sweep skips every GPU variant alike
        for name, why in self.skipped_variants.items():
            by_reason.setdefault(why, []).append(name)
        lines = [f"variant{'s' * (len(names) > 1)} {', '.join(names)} skipped: {why}"
                 for why, names in by_reason.items()]
        at: dict[tuple[str, str], int] = {}
        for _, name, why in self.skipped_at:
            at[name, why] = at.get((name, why), 0) + 1
        lines += [f"variant {name} skipped at {n} point(s): {why}" for (name, why), n in at.items()]
        reasons: dict[str, int] = {}
        for _, why in self.skipped_points:
            reasons[why] = reasons.get(why, 0) + 1
        lines += [f"{n} point(s) skipped: {why}" for why, n in reasons.items()]
        return lines


def _axis(axes, name: str, suite: Suite):
    for axis in axes:
        if name == axis.name or name in axis.aliases:
            return axis
    raise BenchError(f"suite {suite.name} has no axis {name!r}; axes: {', '.join(a.name for a in axes)}")


def resolve_specs(suite: Suite, given: dict[str, str], backend: str, axes=None) -> dict[str, str]:
    """Every axis' spec: the given one (by name or alias) or its default, in axis order."""
    axes = suite.axes if axes is None else axes
    by_axis = {}
    for name, spec in given.items():
        axis = _axis(axes, name, suite)
        if axis.name in by_axis:
            raise BenchError(f"axis {axis.name} given twice")
        by_axis[axis.name] = str(spec)
    resolved = {}
    for axis in axes:
        resolved[axis.name] = by_axis.get(axis.name) or axis.default_spec(backend, {**by_axis, **resolved})
    return resolved


def plan(suite: Suite, given: dict[str, str], backend: str, variant_names: list[str] | None = None,
         verification: bool = False, first_only: bool = False) -> Plan:
    """Every point and variant of a sweep (or of `bench verify`, over the suite's
    verify_axes), checked before anything is measured. first_only: axes not given
    take the first value of their default (`bench run` measures one point)."""
    if verification and not suite.verify_axes:
        raise BenchError(f"suite {suite.name} has no verification")
    axes = suite.verify_axes if verification else suite.axes
    skip = suite.verify_skip if verification else suite.skip
    specs = resolve_specs(suite, given, backend, axes)
    values = [_axis(axes, name, suite).parse(spec) for name, spec in specs.items()]
    if first_only:
        given_axes = {_axis(axes, name, suite).name for name in given}
        values = [v if name in given_axes else v[:1] for name, v in zip(specs, values)]
    points, skipped = [], []
    for combination in itertools.product(*values):
        point = {"suite": suite.name, "backend": backend, **dict(zip(specs, combination))}
        why = skip(point)
        if why:
            skipped.append((point, why))
        else:
            points.append(point)
    names = variant_names or list(suite.default_variants) or [v.name for v in suite.variants]
    chosen, skipped_variants = [], {}
    for name in dict.fromkeys(names):
        variant = suite.variant(name)
        device = "gpu" if backend == "gpu" and "gpu" in variant.devices else "cpu"
        if device not in variant.devices:
            skipped_variants[name] = f"runs on {', '.join(variant.devices)} only; the backend is {backend}"
        elif missing := variant.missing():
            skipped_variants[name] = f"needs {', '.join(missing)} (not installed)"
        else:
            chosen.append((name, device))
    skipped_at, kept = [], []
    for point in points:
        at_point = [(point, name, why) for name, _ in chosen if (why := suite.skip_variant(point, name))]
        skipped_at += at_point
        if len(at_point) < len(chosen):
            kept.append(point)
        else:
            skipped.append((point, "every variant is skipped there"))
    result = Plan(suite, backend, kept, chosen, skipped, skipped_variants, skipped_at)
    if not chosen:
        raise BenchError("no variant can run: " + "; ".join(result.describe_skips()))
    if not kept:
        raise BenchError("every combination is invalid: " + "; ".join(result.describe_skips()))
    return result


def peak_host_memory_gib() -> float:
    """This process's peak resident memory so far (Linux counts it in KiB): what a corpus
    beyond the GPU's memory asked of the host."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def describe(point: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in point.items() if k not in ("suite", "backend"))


def _declared(suite: Suite, values: dict, per: str) -> dict:
    declared = {m.name for m in suite.metrics if m.per == per} | {label.name for label in suite.labels if per == "run"}
    unknown = set(values) - declared
    if unknown:
        kinds = "metrics or labels" if per == "run" else "metrics"
        raise RuntimeError(f"suite {suite.name} returned undeclared {per} {kinds} {sorted(unknown)}")
    return values


def _noise(seconds: list[float]) -> float:
    """Relative standard error of the mean: shrinks as repeats accumulate."""
    if len(seconds) < 2:
        return float("inf")
    return statistics.stdev(seconds) / statistics.fmean(seconds) / len(seconds) ** 0.5


def _gpu_monitor(backend: str):
    if backend != "gpu":
        return None
    from bench.gpu_monitor import ClockMonitor

    return ClockMonitor()


# Set in the environment of the `bench run` that bench profile runs under ncu: it measures no
# ceilings (ncu serialises launches, so no launch latency can be measured; profile measures them apart).
PROFILED = "BENCH_PROFILED"


def _limits(suite: Suite, backend: str) -> dict:
    """The ceilings a GPU row's floor is computed from, measured once in this process
    (bench.peaks, cached); {} where the suite states no work, there is no GPU, or the
    process runs under bench profile's ncu."""
    if backend != "gpu" or not suite.states_work or os.environ.get(PROFILED):
        return {}
    from bench import peaks

    return peaks.limits()


NOTE_S = 30  # a point's preparation, or a variant's run with its untimed work, that takes longer is reported as it ends


def in_turn(variants: list, repeat: int) -> list:
    """The variants in the order of this repeat: row `repeat` of a Williams design, so that
    over a whole cycle of repeats (n for n variants, 2n where n is odd) each variant runs
    first as often as another, and right after each other variant as often. A run can
    inherit cost from the one before it (impls/sumrv/kernels/NOTES.md): a fixed order would
    give each variant its neighbour's cost for good."""
    n = len(variants)
    if n < 2:
        return list(variants)
    row = repeat % (2 * n if n % 2 else n)
    first = [0] + [k for i in range(1, n // 2 + 1) for k in (i, n - i)][:n - 1]  # 0, 1, n-1, 2, n-2, ...
    order = [variants[(k + row) % n] for k in first]
    return order[::-1] if row >= n else order


def measure_point(plan: Plan, point: dict, settings: Settings, done: dict[str, int] | None = None, keep=None,
                  status=None):
    """(rows, series rows) of one point: every variant, interleaved, repeat by repeat, up to
    settings.repeats (more while noisy). done: the repeats each variant already has, from an
    earlier run; a variant is measured only from there. keep(rows, series), where given, takes
    the rows once the point is measured, and those measured so far where it is interrupted
    or fails, with interrupts deferred (a variant that finished, a training run of minutes, is
    not measured again). status(text) hears what runs: the preparation, the warm-up, then each variant."""
    suite, backend = plan.suite, plan.backend
    done = done or {}
    everyone = plan.variants_at(point)
    variants = [(name, device) for name, device in everyone if done.get(name, 0) < settings.repeats]
    if not variants:  # every variant has its repeats (another process measured them)
        return [], []
    first_repeat = min(done.get(name, 0) for name, _ in variants)
    slow = slowdown.factors()  # {} but where detection is being measured
    if status:
        status("preparing")
    began = time.monotonic()
    workload = suite.prepare(point)
    took = time.monotonic() - began
    if took > NOTE_S:  # explains a silent minute or more (a corpus of billions of tokens)
        console.print(f"prepared in {took:.0f} s (untimed): {describe(point)}")
    if status:
        status("warming up")
    for name, device in variants:
        for _ in range(settings.warmup):
            with RunContext(device).timed() as ctx:
                suite.run(workload, name, ctx)
    steady = {name: slowdown.steady_seconds(lambda ctx: suite.run(workload, name, ctx), device)
              for name, device in variants if slowdown.factor_for(slow, name) > 1}
    warm_calibration(backend)
    limits = _limits(suite, backend)
    if settings.flush_l2:
        from bench.gpu_monitor import flush_l2
    rows, series = [], []
    seconds: dict[str, list[float]] = {name: [] for name, _ in variants}
    monitor = _gpu_monitor(backend)
    started = time.monotonic()
    try:
        with monitor or nullcontext():
            for repeat in itertools.count(first_repeat):
                calibration = calibrate(backend)
                for name, device in in_turn(everyone, repeat):
                    if (name, device) not in variants or done.get(name, 0) > repeat:
                        continue  # measured by an earlier run; its place in the design stays
                    if status:
                        status(f"{name} (repeat {repeat + 1})")
                    if settings.flush_l2 and device == "gpu":
                        flush_l2()
                    ctx = RunContext(device)
                    run_began = time.monotonic()
                    with ctx.timed():
                        values = suite.run(workload, name, ctx) or {}
                        if slow:
                            slowdown.wait(device, (slowdown.factor_for(slow, name) - 1) * steady.get(name, 0.0))
                    common = {**point, "variant": name, "device": device, "repeat": repeat}
                    row = {**common, "seconds": ctx.seconds,
                           **{f"{phase}_s": ctx.phases.get(phase, 0.0) for phase in suite.phases},
                           **_declared(suite, values, "run"), **calibration}
                    # The floor first: a suite's derived metrics may read the ceilings beside it.
                    work = suite.work(workload, row) if limits and device == "gpu" else None
                    if work is not None:
                        row.update(ceilings.floors(work, limits, row["seconds"], l2_flushed=settings.flush_l2))
                    row.update(_declared(suite, suite.derived(workload, row), "run"))
                    rows.append(row)
                    series += [{**common, **_declared(suite, {k: v for k, v in s.items() if k not in
                                                              ("iteration", "wall_s")}, "iteration"),
                                "iteration": s["iteration"], "wall_s": s["wall_s"]} for s in ctx.series]
                    seconds[name].append(ctx.seconds)
                    took = time.monotonic() - run_began
                    if took > NOTE_S:  # with its untimed work (a convergence curve's evaluations), said apart
                        untimed = f", {took - ctx.seconds:.0f} s more untimed" if took - ctx.seconds >= 1 else ""
                        console.print(f"{name}: {ctx.seconds:.0f} s (repeat {repeat + 1}{untimed}): {describe(point)}")
                measured = repeat + 1 - first_repeat
                if repeat + 1 < settings.repeats:
                    continue
                # A variant resumed for its last repeat has one sample here: its noise is not this run's.
                judged = [s for name, s in seconds.items() if len(s) > 1 or not done.get(name)]
                if (settings.max_noise is None or measured >= settings.max_repeats
                        or time.monotonic() - started > settings.budget_s
                        or max(map(_noise, judged), default=0.0) < settings.max_noise):
                    break
    finally:
        # A second Ctrl-C (or the budget's alarm) waits until what was measured is kept.
        interrupting = sys.exc_info()[1]
        try:
            with interrupts_deferred():
                if rows:
                    hygiene = {"load_1m": os.getloadavg()[0], **(monitor.summary() if monitor else {})}
                    for row in rows:
                        s = seconds[row["variant"]]
                        row["cv"] = statistics.stdev(s) / statistics.fmean(s) if len(s) > 1 else None
                        row.update({k: v for k, v in hygiene.items() if k in results.HYGIENE})
                    if keep:
                        keep(rows, series)
        except Exception as error:
            if interrupting is None:
                raise
            console.print(f"[red]what was measured of this point could not be kept[/]: {error}")
    return rows, series


def _kernels(backend: str) -> dict:
    """The kernels this process compiled, with their resources; {} off the GPU, or where the
    GPU cannot say (a failed kernel can leave its context unusable: the failure is reported)."""
    if backend != "gpu":
        return {}
    try:
        return compiled_kernels()
    except Exception:
        return {}


def _size(path: Path) -> int:
    """A file's size (0 where there is none yet): it grows only when rows are appended."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_run_id() -> str:
    """A run's id: its UTC start and a random suffix, so that ids sort by time."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ-") + uuid.uuid4().hex[:6]


INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)


@contextmanager
def interrupts_deferred():
    """The INTERRUPTS that arrive within the block are raised as it ends. Python runs a
    signal's handler in the main thread whichever thread the OS handed it to, so a handler
    that holds it works where a thread's signal mask would not (numba's and CuPy's threads,
    which block nothing, take a Ctrl-C sent to the process)."""
    held = []
    handlers = {number: signal.signal(number, lambda number, frame: held.append(number)) for number in INTERRUPTS}
    try:
        yield
    finally:
        for number, handler in handlers.items():
            signal.signal(number, signal.SIG_DFL if handler is None else handler)  # (None: not set from Python)
        for number in dict.fromkeys(held):
            signal.raise_signal(number)  # to the handler it had (an enclosing block's holds it again)


class Stop(Exception):
    """Stop a sweep cleanly before its next point (bench reproduce's budget): finished
    points are kept, the sidecar says "stopped", and the exception goes on to the caller."""


def settings_for(plan: Plan, out_dir: Path, repeats=None, warmup=None, max_noise=None, budget=None,
                 max_repeats=None, flush_l2: bool = False, fresh: bool = False) -> Settings:
    """The suite's defaults on the plan's backend, with what is given (not None) instead."""
    defaults = plan.suite.defaults(plan.backend)
    if flush_l2 and plan.backend != "gpu":
        raise BenchError("--flush-l2 flushes the GPU's L2: it needs --backend gpu")
    repeats = defaults.repeats if repeats is None else repeats
    return Settings(
        repeats=repeats, warmup=defaults.warmup if warmup is None else warmup, out_dir=out_dir, fresh=fresh,
        max_noise=defaults.max_noise if max_noise is None else (max_noise or None),
        budget_s=defaults.budget_s if budget is None else budget,
        max_repeats=max(repeats, defaults.max_repeats) if max_repeats is None else max_repeats, flush_l2=flush_l2)


def pending(plan: Plan, settings: Settings) -> list[tuple[dict, dict[str, int]]]:
    """(point, repeats each variant already has) of every point where a variant still lacks
    repeats with this code and warm-up in the output directory."""
    schema = results.schema_for(plan.suite)
    code = envinfo.code_version(plan.suite.sources)
    csv_path = settings.out_dir / f"{plan.suite.name}.csv"
    index = {} if settings.fresh else results.measured_repeats(csv_path, schema, code, settings.warmup)
    todo = [(point, results.repeats_done(index, point, [name for name, _ in plan.variants_at(point)]))
            for point in plan.points]
    return [(point, done) for point, done in todo if min(done.values(), default=0) < settings.repeats]


class Heartbeat:
    """In a log, where no live bar runs, a line for a point that has run NOTE_S seconds since it
    began or since the last such line: what it runs and for how long (a first run's
    compilation, a large corpus's preparation), so that a log is never silent for minutes."""

    def __init__(self, enabled: bool):
        self.enabled, self.point, self.doing, self.since, self.began = enabled, None, "", 0.0, 0.0
        self._stop = threading.Event()

    def __enter__(self):
        if self.enabled:
            threading.Thread(target=self._beat, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self._stop.set()

    def start(self, point: str | None) -> None:
        """The point now measured (None: none)."""
        self.point, self.doing = point, ""
        self.since = self.began = time.monotonic()

    def _beat(self):
        while not self._stop.wait(min(5.0, NOTE_S / 3)):
            point, now = self.point, time.monotonic()
            if point is not None and now - self.since >= NOTE_S:
                self.since = now
                console.print(f"{point}: {self.doing or 'starting'}, {now - self.began:.0f} s into the point")


def progress_bar() -> Progress:
    """The progress display of a sweep, and of bench reproduce's whole plan; none where stderr
    is not a terminal (a log, CI), which gets a line every 30 s instead, not the bar's last
    frame printed when it stops."""
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TextColumn("ETA"), TimeRemainingColumn(), console=console, disable=not console.is_terminal)


def _add_new_axes(path: Path, suite, required: list[str]) -> None:
    """A results file of the suite written before it gained an axis: each of its rows takes
    the axis's default, the behaviour it measured (a new axis defaults to what came before
    it: docs/writing-a-suite.md). Only where every column it lacks is such an axis, with one
    default value; else check_header refuses the file."""
    header = results.read_header(path)
    if header is None:
        return
    axes = {axis.name: axis for axis in suite.axes}
    defaults = {}
    for name in (c for c in required if c not in header):
        axis = axes.get(name)
        values = axis.parse(axis.default) if axis is not None and not callable(axis.default) else []
        if len(values) != 1:
            return
        defaults[name] = results.as_text(values[0])
    if defaults:
        results.add_columns(path, defaults)
        console.print(f"{path}: its rows predate the axes {', '.join(defaults)}; they take the defaults "
                      + ", ".join(f"{name} = {value}" for name, value in defaults.items()))


def sweep(plan: Plan, settings: Settings, argv: list[str] | None = None, progress=None, before_point=None,
          label: str = "") -> int:
    """Measure every point not yet measured with this code and settings; return an exit status.

    progress: (a rich Progress, its task) to advance instead of a bar of the sweep's own
    (bench reproduce shows one over its whole plan); before_point(point, points left) may
    raise Stop; label goes before each point's description."""
    suite = plan.suite
    schema = results.schema_for(suite)
    csv_path = settings.out_dir / f"{suite.name}.csv"
    series_path = settings.out_dir / f"{suite.name}-series.csv"
    sidecar = settings.out_dir / f"{suite.name}.json"
    columns, series_cols = results.row_columns(schema), results.series_columns(schema)
    for path in (csv_path, series_path):
        required = [*results.key_columns(schema), "code_version", "run_id"]
        _add_new_axes(path, suite, required)
        results.check_header(path, required)
    if not suite.sources:
        raise RuntimeError(f"suite {suite.name} declares no sources: its code version would miss its own code")
    code = envinfo.code_version(suite.sources)
    env = envinfo.collect_env(argv or sys.argv)
    machine = envinfo.machine_slug(env, plan.backend)
    run_id = new_run_id()

    suite.check(plan.points)
    # The results file's size before its rows are read: rows another process appends after this
    # are read again before the point they may be (taken later, the size could include them unread).
    written = _size(csv_path)
    todo = pending(plan, settings)
    if len(todo) < len(plan.points):
        console.print(f"{len(plan.points) - len(todo)} of {len(plan.points)} points already have {settings.repeats} "
                      f"repeats in {csv_path}, from an earlier run or sweep (same code, warm-up; --fresh re-measures "
                      "them)")
    begun = sum(1 for _, done in todo if any(done.values()))
    if begun:
        console.print(f"resuming: {begun} of {len(todo)} points left go on from the repeats their variants have "
                      f"in {csv_path}")
    if not todo:
        return 0
    monitor = _gpu_monitor(plan.backend)
    info = {**env, "suite": suite.name, "code_version": code, "backend": plan.backend, "machine": machine,
            "variants": dict(plan.variants), "skipped_variants": plan.skipped_variants,
            "skipped": plan.describe_skips(), "repeats": settings.repeats, "warmup": settings.warmup,
            "max_noise": settings.max_noise, "budget_s": settings.budget_s, "flush_l2": settings.flush_l2,
            "calibration": calibration_id(plan.backend),
            "clock_monitor": monitor.unavailable_reason if monitor else None,
            "points": len(todo), "status": "running",
            **({"slowdown": os.environ[slowdown.ENV]} if slowdown.factors() else {})}
    results.update_sidecar(sidecar, run_id, info, schema=schema)
    for line in plan.describe_skips():
        console.print(line)

    done = elsewhere = 0
    kept: set[str] = set()  # the variants of the point being measured whose rows are kept
    kernels_before = set(_kernels(plan.backend))  # the sidecar records those this sweep compiles
    claims = results.Claims(settings.out_dir, suite.name)
    reread = None  # the repeats measured, as last read again (None: as todo lists them)
    started = last_note = time.monotonic()
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    status = {"status": "complete"}
    own_bar = progress_bar() if progress is None else None
    try:
        with own_bar or nullcontext(), Heartbeat(enabled=not console.is_terminal) as heartbeat:
            bar, task = (own_bar, own_bar.add_task("starting", total=len(todo))) if own_bar else progress
            def keep(rows, series):
                # measure_point calls it with interrupts deferred: a point's series and rows are
                # written together, and known written, before an interrupt that came meanwhile.
                nonlocal written, kept
                stamp = {"warmup": settings.warmup, "group": uuid.uuid4().hex[:12], "run_id": run_id,
                         "code_version": code, "timestamp": now(), "machine": machine}
                results.append_rows(series_path, [{**row, **stamp} for row in series], series_cols)
                sizes = results.append_rows(csv_path, [{**row, **stamp} for row in rows], columns)
                if sizes:  # another process appended since this one last read: read again before the next point
                    written = sizes[1] if sizes[0] == written else -1
                kept = {row["variant"] for row in rows}

            for point, had in todo:
                if not claims.take(point):
                    elsewhere += 1  # another process is measuring it
                    bar.advance(task)
                    continue
                if not settings.fresh and _size(csv_path) != written:
                    # Another process wrote rows since this one last read them: this point and the
                    # ones after it may be among them. (The size first: rows appended while the file
                    # is read are read again at the next point.)
                    written = _size(csv_path)
                    reread = results.measured_repeats(csv_path, schema, code, settings.warmup)
                if reread is not None:
                    had = results.repeats_done(reread, point, [name for name, _ in plan.variants_at(point)])
                    if min(had.values(), default=0) >= settings.repeats:
                        bar.advance(task)
                        continue
                if before_point:
                    before_point(point, len(todo) - done)
                description = label + describe(point)
                bar.update(task, description=description)
                heartbeat.start(description)

                def show(text: str) -> None:
                    bar.update(task, description=f"{description}: {text}")
                    heartbeat.doing = text

                measure_point(plan, point, settings, had, keep, show)
                heartbeat.start(None)
                kept = set()  # the point is whole
                done += 1
                bar.advance(task)
                if not console.is_terminal and (time.monotonic() - last_note > 30 or done == len(todo)):
                    # No live bar in a log: a line every 30 s instead.
                    last_note = time.monotonic()
                    eta = (last_note - started) / done * (len(todo) - done)
                    console.print(f"[{done}/{len(todo)}] {label}{describe(point)}; ETA {eta:.0f} s")
    except Stop:
        status = {"status": "stopped"}
        raise
    except KeyboardInterrupt:
        status = {"status": "interrupted"}
        partly = f" (and {', '.join(sorted(kept))} of the one in progress)" if kept else ""
        console.print("[yellow]interrupted[/]: " + (
            f"{done} of {len(todo)} points measured{partly} and kept in {csv_path}; run the same command again "
            "to resume." if done or kept else "before a point was measured: nothing to keep."))
        return 130
    except BaseException as error:
        if isinstance(error.__context__, KeyboardInterrupt):
            # Interrupted, and reporting it failed: a pipe (tee) that the same Ctrl-C closed,
            # which rich turns into SystemExit.
            status = {"status": "interrupted"}
        else:
            status = {"status": "failed", "error": f"{type(error).__name__}: {error}",
                      "traceback": None if isinstance(error, BenchError) else  # its paths from the checkout
                      traceback.format_exc(limit=8).replace(f"{envinfo.REPO_ROOT}{os.sep}", "")}
        raise
    finally:
        claims.release()
        signal.signal(signal.SIGTERM, previous)
        kernels = {name: v for name, v in _kernels(plan.backend).items() if name not in kernels_before}
        results.update_sidecar(sidecar, run_id, {**status, "points_done": done, "finished": now(),
                                                 "peak_host_memory_gib": peak_host_memory_gib(),
                                                 **({"kernels": kernels} if kernels else {})})
    if elsewhere:
        console.print(f"{elsewhere} points skipped: another process was measuring them (run the same command "
                      "again once it is done to check that nothing is missing)")
    console.print(f"{done} points measured; results in {csv_path}")
    return 0
