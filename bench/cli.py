"""The `bench` command: generic over suites (`bench list` shows them)."""

import json
import math
import os
import sys
import warnings
from pathlib import Path
from typing import Optional

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from bench import __version__, envinfo, harness
from bench.backend import gpu_available, resolve_backend
from bench.corpus import CorpusError
from bench.errors import BenchError
from bench.recipes import PROFILES, backend_of
from bench.specs import parse_choices
from bench.suite import DEFAULT_SUITE, all_suites, get_suite, suite_names

# Outputs go where the user is (or says), never into the installed package.
RESULTS = Path(os.environ.get("BENCH_RESULTS", "results"))
FIGURES = Path(os.environ.get("BENCH_FIGURES", "figures"))



class _Plain:
    """Help as it is typed: `--help` with no `<bool>` beside it, and a required argument as
    NEW, not {NEW} (newer typer writes both)."""

    def get_help_option(self, ctx):
        option = super().get_help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option

    def collect_usage_pieces(self, ctx):
        return [piece[1:-1] if piece.startswith("{") and piece.endswith("}") else piece
                for piece in super().collect_usage_pieces(ctx)]


class Command(_Plain, typer.core.TyperCommand):
    pass


class Group(_Plain, typer.core.TyperGroup):
    pass


app = typer.Typer(cls=Group, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Re-measure GPU papers on sampling from discrete distributions and topic models.")
data_app = typer.Typer(cls=Group, no_args_is_help=True, help="Corpora: list, info, fetch, synth.")
app.add_typer(data_app, name="data")
# Wide when writing to a log or pipe, so tables are not squeezed to 80 columns.
out = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, soft_wrap=True, highlight=False)

AXES_HELP = ("[SUITE] (default lda), then axes as -a NAME=SPEC or --NAME SPEC (e.g. --k 4..1024); "
             "`bench list SUITE` shows them")
EXTRA = {"allow_extra_args": True, "ignore_unknown_options": True}
AXES_USAGE = "[SUITE] [-a NAME=SPEC | --NAME SPEC]... [OPTIONS]"
BackendOpt = typer.Option("auto", "--backend", help="auto (GPU when CuPy sees one) | cpu | gpu.")
AxisOpt = typer.Option([], "-a", "--axis", metavar="NAME=SPEC",
                       help="An axis' values, repeatable: 4..1024, 16..4096:*2, 2^3..2^14, a,b.")
VariantOpt = typer.Option(None, "--variant", help="Comma list of variants.", show_default="the suite's default set")


def _version(value: bool):
    if value:
        out.print(f"bench {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, metavar="",
                                              help="Print the version and exit.")):
    """Re-measure GPU papers on sampling from discrete distributions and topic models."""


def _suite_and_axes(extra: list[str], axis: list[str]) -> tuple[str, dict[str, str]]:
    """SUITE (optional, first) and axis specs from `-a NAME=SPEC` and `--NAME SPEC`."""
    extra = list(extra)
    name = extra.pop(0) if extra and not extra[0].startswith("-") else DEFAULT_SUITE
    given: dict[str, str] = {}

    def add(key, spec):
        if key in given:
            raise BenchError(f"axis {key} given twice")
        given[key] = spec

    for item in axis:
        key, eq, spec = item.partition("=")
        if not eq or not key or not spec:
            raise BenchError(f"-a {item!r}: expected NAME=SPEC, e.g. -a K=4..1024")
        add(key, spec)
    while extra:
        token = extra.pop(0)
        if not token.startswith("--") or len(token) < 3:
            raise BenchError(f"unexpected argument {token!r}: {AXES_HELP}")
        key, eq, spec = token[2:].partition("=")
        if not eq:
            if not extra or extra[0].startswith("--"):
                raise BenchError(f"option {token} needs a value")
            spec = extra.pop(0)
        if not spec:
            raise BenchError(f"option {token} needs a value")
        add(key, spec)
    return name, given


def _plan(extra, axis, variant, backend, **kwargs):
    name, given = _suite_and_axes(extra, axis)
    suite = get_suite(name)
    supported = tuple(sorted({d for v in suite.variants for d in v.devices}))
    backend = resolve_backend(backend, supported)
    variants = parse_choices(variant, [v.name for v in suite.variants], "variant") if variant is not None else None
    return harness.plan(suite, given, backend, variants, **kwargs)


def _default_out(out_dir: Path | None, backend: str) -> Path:
    """--out, or results/<machine>/."""
    return out_dir or RESULTS / envinfo.machine_slug(envinfo.collect_env(sys.argv), backend)


def _out_dir(out_dir: Path | None, backend: str, option: str = "--out") -> Path:
    """--out, or results/<machine>/: BenchError where it cannot be written. Not created here:
    the first result written creates it, so that a run refused before it measures leaves none."""
    directory = _default_out(out_dir, backend)
    chain = (directory.absolute(), *directory.absolute().parents)  # the folder, then those above it
    at = next(i for i, path in enumerate(chain) if path.exists())
    existing = chain[at]
    problem = "not a directory" if not existing.is_dir() else \
        "not writable" if not os.access(existing, os.W_OK | os.X_OK) else None
    if problem and at == 0:
        raise BenchError(f"{option} {directory}: {problem}")
    if problem:
        raise BenchError(f"{option} {directory}: cannot create it ({existing} is {problem})")
    if at > 0:  # writable is not creatable everywhere (/proc, /sys): try, and leave nothing
        first = chain[at - 1]
        try:
            first.mkdir()
            first.rmdir()
        except OSError as error:
            raise BenchError(f"{option} {directory}: cannot create it ({first}: {error.strerror})") from None
    return directory


def _constant(points: list[dict]) -> str:
    return " ".join(f"{key}={value}" for key, value in points[0].items()
                    if key not in ("suite", "backend") and all(p[key] == value for p in points))


@app.command(cls=Command, context_settings=EXTRA, options_metavar=AXES_USAGE)
def sweep(
    ctx: typer.Context,
    axis: list[str] = AxisOpt,
    variant: Optional[str] = VariantOpt,
    backend: str = BackendOpt,
    repeats: Optional[int] = typer.Option(None, "--repeats", help="Timed repeats per point (the minimum with "
                                          "--max-noise).", show_default="the suite's, per backend"),
    warmup: Optional[int] = typer.Option(None, "--warmup", help="Untimed runs per variant before the repeats.",
                                         show_default="the suite's"),
    max_noise: Optional[float] = typer.Option(None, "--max-noise", help="Repeat a point until the relative "
                                              "standard error of every variant's mean is below this (0 = off).",
                                              show_default="the suite's"),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Seconds a point may take under --max-noise.",
                                            show_default="the suite's"),
    max_repeats: Optional[int] = typer.Option(None, "--max-repeats", help="Cap on repeats under --max-noise.",
                                              show_default="the suite's"),
    flush_l2: bool = typer.Option(False, "--flush-l2", metavar="", help="Evict the GPU's L2 before every timed "
                                  "GPU run."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Directory for <suite>.csv.",
                                           show_default="results/<machine>"),
    fresh: bool = typer.Option(False, "--fresh", metavar="", help="Re-measure points already measured."),
    dry_run: bool = typer.Option(False, "--dry-run", metavar="", help="Print the points and their count; measure "
                                 "nothing."),
):
    """Measure a sweep of a suite: every combination of its axes, all variants interleaved.

    Resumes where an earlier run of the same sweep stopped; a rerun with more repeats
    adds the missing ones."""
    plan = _plan(ctx.args, axis, variant, backend)
    settings = harness.settings_for(plan, Path("."), repeats, warmup, max_noise, timeout, max_repeats, flush_l2,
                                    fresh)
    names = ", ".join(f"{name} ({device})" for name, device in plan.variants)
    err.print(f"{plan.suite.name}: {len(plan.points)} points x {len(plan.variants)} variants ({names}) x "
              f"{settings.repeats} repeats on {plan.backend}; {_constant(plan.points)}")
    if not axis and not [a for a in ctx.args if a.startswith("--")]:
        err.print(plan.suite.defaults(plan.backend).note)
    if dry_run:
        for line in plan.describe_skips():
            err.print(line)
        for point in plan.points:
            out.print(harness.describe(point))
        settings.out_dir = _default_out(out_dir, plan.backend)
        have = len(plan.points) - len(harness.pending(plan, settings))
        already = f", {have} of them already measured in {settings.out_dir} (this code)" if have else ""
        out.print(f"{len(plan.points)} points, {plan.pairs()} (point, variant) pairs{already}; "
                  "nothing measured (--dry-run)")
        return
    settings.out_dir = _out_dir(out_dir, plan.backend)
    raise typer.Exit(harness.sweep(plan, settings))


@app.command(cls=Command, context_settings=EXTRA, options_metavar=AXES_USAGE)
def run(ctx: typer.Context, axis: list[str] = AxisOpt, variant: Optional[str] = VariantOpt,
        backend: str = BackendOpt):
    """Measure one point once (after a warm-up) and show where the time goes.

    Axes not given take the first value of their default."""
    plan = _plan(ctx.args, axis, variant, backend, first_only=True)
    if len(plan.points) != 1:
        raise BenchError(f"bench run measures one point; these axes give {len(plan.points)}: give single values")
    [point] = plan.points
    for line in plan.describe_skips():
        err.print(line)
    plan.suite.check(plan.points)
    settings = harness.Settings(repeats=1, warmup=1, out_dir=Path("."))
    rows, _ = harness.measure_point(plan, point, settings)
    table = Table(title=f"{plan.suite.name}: {harness.describe(point)}")
    table.add_column("phase")
    for row in rows:
        table.add_column(f"{row['variant']} ({row['device']}) s", justify="right")
    for phase in [*plan.suite.phases, None]:
        column = f"{phase}_s" if phase else "seconds"
        table.add_row(phase or "whole run", *(f"{row[column]:.4g} ({row[column] / row['seconds']:.0%})"
                                             for row in rows))
    out.print(table)
    for row in rows:
        metrics = {m.name: row.get(m.name) for m in plan.suite.metrics if row.get(m.name) is not None}
        out.print(f"{row['variant']}: " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                                    for k, v in {**metrics, "copy_gbps": row["copy_gbps"]}.items()
                                                    if v is not None))


@app.command(cls=Command, context_settings=EXTRA, options_metavar=AXES_USAGE)
def verify(
    ctx: typer.Context,
    axis: list[str] = AxisOpt,
    variant: Optional[str] = typer.Option(None, "--variant", help="Comma list of variants.", show_default="all"),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed of the fresh inputs.", show_default="fresh"),
    backend: str = BackendOpt,
    sanitizer: Optional[str] = typer.Option(None, "--sanitizer", metavar="memcheck|racecheck|synccheck|initcheck",
                                            help="Run the verification under compute-sanitizer with this tool and "
                                                 "report its errors by kernel (exit 1 on any).", show_default="none"),
):
    """Check every variant against the suite's reference answer on fresh inputs.

    Exact where the suite makes exactness possible, at every point of the suite's
    verification axes. Exit 1 on a failed check (or a sanitizer error)."""
    if sanitizer is not None:
        from bench import sanitize

        name, _ = _suite_and_axes(ctx.args, axis)
        command = ["verify", *ctx.args, *(f"--axis={a}" for a in axis), "--backend", backend,
                   *(["--variant", variant] if variant else []), *(["--seed", str(seed)] if seed is not None else [])]
        raise typer.Exit(sanitize.run(get_suite(name), sanitizer, command, echo=out.print))
    name, _ = _suite_and_axes(ctx.args, axis)
    all_variants = ",".join(v.name for v in get_suite(name).variants)
    plan = _plan(ctx.args, axis, variant or all_variants, backend, verification=True)
    suite = plan.suite
    for line in plan.describe_skips():
        err.print(line)
    seed = int(np.random.SeedSequence().entropy % 2**32) if seed is None else seed
    checks = plan.pairs()
    alpha = 1e-3 / checks  # Bonferroni: the whole run fails by chance with probability < 0.1%
    table = Table(title=f"bench verify {suite.name} on {plan.backend} (seed {seed}; statistical checks pass at "
                        f"p >= {alpha:.1e})")
    axes = [a.name for a in suite.verify_axes]
    for column in (*axes, "variant", "device", "result", "detail"):
        table.add_column(column)
    failures, counts = 0, {}
    for point in plan.points:
        case = suite.verify_case(point, seed)
        for variant_name, device in plan.variants_at(point):
            ok, detail = suite.agrees(case, suite.output(case, variant_name, device), alpha)
            failures += not ok
            passed, total = counts.get(variant_name, (0, 0))
            counts[variant_name] = (passed + ok, total + 1)
            if checks <= VERIFY_ROWS or not ok:  # a long run lists its failures only
                table.add_row(*(str(point[a]) for a in axes), variant_name, device,
                              "[green]pass[/]" if ok else "[red]FAIL[/]", detail)
    if table.row_count:
        out.print(table)
    out.print(f"{checks - failures} of {checks} checks pass ({len(plan.points)} points, {len(plan.variants)} "
              "variants)" + (f"; {failures} FAIL" if failures else ""))
    if checks > VERIFY_ROWS:
        out.print("; ".join(f"{name}: {passed} of {total} pass" for name, (passed, total) in counts.items()))
    raise typer.Exit(1 if failures else 0)


VERIFY_ROWS = 300  # beyond this many checks bench verify lists only the failures


@app.command(cls=Command, context_settings=EXTRA, options_metavar=AXES_USAGE)
def profile(
    ctx: typer.Context,
    axis: list[str] = AxisOpt,
    variant: Optional[str] = VariantOpt,
    metric: str = typer.Option("all", "--metric", help="Comma list of metric sets: time, occupancy, memory, "
                               "local, global, issue, flops, stalls; or all."),
    kernels: str = typer.Option(".", "--kernels", help="Regular expression (no ':') of the kernel names to "
                                "profile; the default takes every kernel, the libraries' and the harness's too."),
    invocation: int = typer.Option(2, "--invocation", help="Which launch of each kernel to profile (2: the one "
                                   "after the warm-up's first)."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Directory for <suite>-profile.csv.",
                                           show_default="results/<machine>/"),
):
    """Profile every point and variant under Nsight Compute (ncu).

    One launch of each kernel, its counters as tidy rows in <suite>-profile.csv."""
    from bench import profile as profiler

    ncu = profiler.ncu_executable()  # before anything else: without ncu there is nothing to do
    chosen = profiler.metrics_of(list(profiler.METRIC_SETS) if metric == "all" else metric.split(","))
    if ":" in kernels or not kernels:
        raise BenchError(f"--kernels {kernels!r}: a non-empty regular expression without ':' (ncu's separator)")
    if invocation < 1:
        raise BenchError(f"--invocation must be >= 1, got {invocation}")
    plan = _plan(ctx.args, axis, variant, "gpu")
    plan.suite.check(plan.points)
    directory = _out_dir(out_dir, "gpu")
    path = profiler.profile(plan, ncu, chosen, kernels, invocation, directory, echo=err.print)
    out.print(f"counters in {path}")


ResultsOpt = typer.Option(RESULTS, "--results", help="Root of the results/<machine>/ directories "
                          "(or $BENCH_RESULTS).")
FiguresOpt = typer.Option(FIGURES, "--figures", help="Root of the figures/<machine>/ directories "
                          "(or $BENCH_FIGURES).")


def _machine_dirs(results_dir: Path) -> list[Path]:
    if not results_dir.is_dir():
        raise BenchError(f"--results {results_dir}: not a directory (run `bench reproduce` or `bench sweep` first)")
    machines = sorted(p for p in results_dir.iterdir() if p.is_dir())
    if not machines and any(results_dir.glob("*.csv")):  # `bench sweep --out DIR` writes where it is told
        raise BenchError(f"--results {results_dir}: holds results itself, not <machine>/ folders of them; give "
                         "the folder above it, or sweep with --out DIR/<machine>")
    return machines


def _draw(results_dir: Path, figures_dir: Path, machines: list[str] | None = None) -> list[Path]:
    """Every figure and REPORT.md of the machines' results (all machines where None)."""
    from bench import report
    from bench.figures import render_all

    suites = all_suites()
    directories = _machine_dirs(results_dir)  # first: a one-line error where there is no such directory
    written = render_all(results_dir, figures_dir, suites, warn=lambda text: err.print(f"[yellow]{text}[/]"),
                         machines=machines)
    for directory in directories:
        if machines is None or directory.name in machines:
            written.append(report.write(directory, figures_dir / directory.name, suites))
    return written


@app.command(cls=Command)
def figures(results_dir: Path = ResultsOpt, figures_dir: Path = FiguresOpt):
    """Draw every figure whose results exist, and write each machine's REPORT.md."""
    written = _draw(results_dir, figures_dir)
    for path in written:
        out.print(str(path))
    if not any(path.suffix == ".png" for path in written):
        reports = [path for path in written if path.name == "REPORT.md"]
        err.print(f"no figures: no results under {results_dir} (run `bench reproduce` first)" if not reports else
                  f"no figures: the results under {results_dir} hold no figure's points yet (a figure needs two "
                  "values of its x axis, or its recipe's sweep); the report says what they hold")


@app.command(cls=Command)
def report(results_dir: Path = ResultsOpt, figures_dir: Path = FiguresOpt):
    """Write results/<machine>/REPORT.md from the results alone, for every machine.

    Per suite: the figures (linked) and tables of each recipe, and the paper's claims
    beside ours with computed verdicts. The same results give the same bytes."""
    from bench import report as reports

    for directory in _machine_dirs(results_dir):
        out.print(str(reports.write(directory, figures_dir / directory.name, all_suites())))


@app.command(cls=Command)
def reproduce(
    targets: Optional[list[str]] = typer.Argument(None, metavar="[SUITE[:RECIPE]]...", show_default=False,
                                                  help="Suites or single recipes.", ),
    profile: Optional[str] = typer.Option(None, "--profile", metavar="|".join(PROFILES), help="Sizes: "
                                          + "; ".join(f"{name}: {what}" for name, (_, what) in PROFILES.items())
                                          + ".", show_default="cpu without a GPU, quick with one"),
    dry_run: bool = typer.Option(False, "--dry-run", metavar="", help="Print the plan (recipes, sweeps, points, "
                                 "expected time); measure nothing."),
    budget: Optional[str] = typer.Option(None, "--budget", metavar="DURATION", help="Stop cleanly within this "
                                         "time (600, 90s, 9m, 1h30m), figures and report included; a rerun goes "
                                         "on where it stopped.", show_default="none"),
    results_dir: Path = ResultsOpt,
    figures_dir: Path = FiguresOpt,
    estimate_from: Optional[str] = typer.Option(None, "--estimate-from", metavar="MACHINE",
                                                help="Estimate times from the results of another machine type "
                                                     "(a directory under --results).",
                                                show_default="this machine's"),
    fresh: bool = typer.Option(False, "--fresh", metavar="", help="Measure every point again, as a new run beside "
                               "the earlier ones (the ci profile's runs for bench check)."),
):
    """Reproduce the papers' figures and tables: every recipe's sweeps, then the figures and REPORT.md.

    Measures only what is missing (an interrupted run resumes); a recipe that needs what
    this machine lacks (a second GPU, a corpus, memory) is skipped with the reason. The ci
    profile measures the points `bench check` gates into results/<machine>/ci/, and draws
    nothing. Exit 0 when done, 1 when a recipe failed (the others' figures are still
    drawn), 2 on bad input, 3 when the budget ran out with points left (run it again to
    go on)."""
    from bench import reproduce as plans

    profile = profile or ("quick" if gpu_available() else "cpu")
    parse_choices(profile, list(PROFILES), "profile")
    backend = backend_of(profile, gpu_available())
    seconds = plans.parse_duration(budget) if budget is not None else None
    if backend == "gpu" and not dry_run and not gpu_available():
        raise BenchError(f"profile {profile} runs on a GPU and none was found (CuPy missing or it sees no CUDA "
                         "device); --profile cpu runs on the CPU, --dry-run shows the plan")
    machine = plans.this_machine(backend)
    jobs = plans.build(plans.select(targets or []), profile, backend, results_dir, machine, fresh)
    source = estimate_from or machine.slug
    estimates = plans.results_dir(results_dir, source, profile)
    if estimate_from and not estimates.is_dir():  # a typo would otherwise read as "no estimate"
        known = sorted(p.name for p in results_dir.iterdir() if p.is_dir()) if results_dir.is_dir() else []
        raise BenchError(f"--estimate-from {estimate_from}: no such machine's results under {results_dir} "
                         f"({', '.join(known) or 'none there'})")
    estimator = plans.Estimator(estimates if source and estimates.is_dir() else None)
    lines, expected, unknown = plans.describe(jobs, estimator, machine, profile)
    pending = sum(len(job.todo) for job in jobs if not job.skip)
    recipes = len({job.label for job in jobs})
    where = machine.slug or "a GPU (none here)"
    err.print(f"bench reproduce --profile {profile} on {where}: {recipes} recipes, {len(jobs)} sweeps")
    for line in lines:
        err.print(line, markup=False)
    estimate = (f"expected {plans._minutes(expected)} of measuring" + (f", plus {unknown} points with no earlier "
                "measurement" if unknown else "") + f" (from {estimates})") if estimator.directory else \
        f"no estimate (no results of {source or 'this machine type'} under {results_dir})"
    out.print(f"{pending} points to measure; {estimate}")
    if dry_run:
        return
    out_dir = plans.results_dir(results_dir, machine.slug, profile)
    _out_dir(out_dir, backend, "--results")  # a one-line error where it cannot be written
    clock = plans.Budget(seconds, estimator)
    first = next(((job, point, done) for job in jobs if not job.skip for point, done in job.todo), None)
    if seconds is not None and first is not None:
        need = clock.expected(*first)
        if need is not None and need > clock.left():
            raise BenchError(f"--budget {budget} is too short for any point: the first ({first[0].label}) is "
                             f"expected to take {plans._minutes(need)}")
    failures, stops = plans.run(jobs, clock, echo=err.print)
    if not out_dir.exists():  # every sweep refused before it wrote a result
        out.print(f"no results in {out_dir}: nothing was measured")
    elif out_dir == results_dir / machine.slug:
        written = _draw(results_dir, figures_dir, [machine.slug])
        out.print(f"{sum(p.suffix == '.png' for p in written)} figures in {figures_dir / machine.slug}; report "
                  f"{out_dir / 'REPORT.md'}")
    else:
        out.print(f"results in {out_dir} (for bench check; no figures)")
    for line in failures:
        err.print(f"[red]failed[/]: {line}")
    if stops:
        left = plans.points_left(jobs)
        err.print(f"[yellow]stopped by the budget[/]: {stops[0]}; {left} points left: run the same command "
                  "again to go on")
        raise typer.Exit(3)
    raise typer.Exit(1 if failures else 0)


@app.command(cls=Command)
def check(
    new: Path = typer.Argument(..., metavar="NEW", help="Result CSV (or results directory) to check."),
    baseline: Path = typer.Option(..., "--baseline", metavar="BASE", help="Result CSV (or directory) to compare "
                                  "with."),
    suite: Optional[str] = typer.Option(None, "--suite", help="Suite whose file to read in a directory.",
                                        show_default="the file's suite; in directories every suite of BASE"),
    threshold: float = typer.Option(0.10, "--threshold", help="Change of a ratio to the reference that counts, a "
                                   "fraction (0.1: 10%)."),
    calibration_threshold: float = typer.Option(0.25, "--calibration-threshold",
                                                help="Change of the reference's time over the calibration that "
                                                     "counts (catches a slower reference or slower everything)."),
    alpha: float = typer.Option(0.05, "--alpha", help="Significance level of the Mann-Whitney U test."),
    metric: Optional[str] = typer.Option(None, "--metric", help="Comma list of gated metrics to check.",
                                         show_default="every gated metric"),
    allow_missing: bool = typer.Option(False, "--allow-missing", metavar="",
                                       help="Points or variants missing from NEW do not fail the check."),
    fmt: str = typer.Option("table", "--format", help="table | markdown | json."),
):
    """Compare NEW with BASE metric by metric, each gated as its suite declares.

    With two directories (results/<machine>/ci/ of `bench reproduce --profile ci`), every
    suite with results in BASE is checked, and one missing from NEW is a regression. A ratio
    counts as changed when it moved beyond --threshold and the change is significant
    (Mann-Whitney U at --alpha); where the repeats are too few for the test ever to reach
    --alpha (3 a side), by the threshold alone ("too few" in the p column).
    Exit 0 when nothing regressed, 1 when something regressed or is missing, 2 on bad
    input (also an impossible value: a time that is not positive, a negative count)."""
    from bench.check import compare_files, exit_code, render_json, render_markdown, render_table, suites_in, summary

    parse_choices(fmt, ("table", "markdown", "json"), "format")
    for value, name in ((threshold, "--threshold"), (calibration_threshold, "--calibration-threshold")):
        if not 0 < value <= 1:  # 10 for 10% would let a tenfold slowdown through
            raise BenchError(f"{name} is a fraction (0.1: 10%) in (0, 1], got {value}")
    if not 0 < alpha < 1:
        raise BenchError(f"--alpha must be in (0, 1), got {alpha}")
    names: list[str | None] = [suite]  # None: the suite a file's schema names
    if suite is None and new.is_dir():
        if not baseline.is_dir():
            raise BenchError(f"--baseline {baseline}: not a directory, and NEW is one (--suite names one suite)")
        names = suites_in(baseline, suite_names())
        if not names:
            raise BenchError(f"--baseline {baseline}: no results of any suite ({', '.join(suite_names())})")
    compared, absent = [], []
    for name in names:
        if suite is None and name and not (new / f"{name}.csv").exists():  # directories: BASE's suites
            absent.append(name)  # every point of the suite is missing
            continue
        compared.append(compare_files(new, baseline, name, threshold=threshold,
                                      calibration_threshold=calibration_threshold, alpha=alpha,
                                      metrics=metric.split(",") if metric else None))
    if not compared:  # --allow-missing or not: comparing nothing is no check
        raise BenchError(f"{new} holds none of BASE's suites ({', '.join(absent)}); a results directory of "
                         "`bench reproduce --profile ci` is results/<machine>/ci")
    lines = [f"{result.attrs['suite']}: {summary(result, allow_missing)}" for result in compared]
    lines += [f"{name}: MISSING, no {name}.csv in {new}" + ("" if allow_missing else " -> regression")
              for name in absent]
    if fmt in ("json", "markdown"):  # for machines: never wrapped, and nothing else on stdout
        print(render_json(compared, absent) if fmt == "json" else
              "\n\n".join(f"## {r.attrs['suite']}\n\n{render_markdown(r)}" for r in compared))
        for line in lines:
            err.print(line, markup=False)
    else:
        for result in compared:
            out.print(render_table(result))
        for line in lines:
            out.print(line, markup=False)
    failed = any(exit_code(result, allow_missing) for result in compared) or (absent and not allow_missing)
    raise typer.Exit(int(bool(failed)))


@app.command("env", cls=Command)
def env_command():
    """Print what this machine and its software are (recorded with every result), and the
    folder under results/ its runs go to."""
    env = envinfo.collect_env(sys.argv)
    backend = resolve_backend("auto", ("cpu", "gpu"))
    out.print_json(json.dumps({**env, "results_folder": envinfo.machine_slug(env, backend)}, default=str))


@app.command("list", cls=Command)
def list_command(suite: Optional[str] = typer.Argument(None, metavar="[SUITE]", help="One suite, in detail.",
                                                       show_default="every suite, briefly"),
                 kernels: bool = typer.Option(False, "--kernels", metavar="", help="SUITE's CUDA kernels compiled "
                                              "for this GPU: registers, local memory (spills), shared memory.")):
    """The suites; with SUITE its axes, variants, metrics, plots, recipes and claims."""
    if kernels:
        if suite is None:
            raise BenchError("--kernels lists one suite's kernels: bench list SUITE --kernels")
        _list_kernels(get_suite(suite))
        return
    if suite is None:
        for chosen in all_suites():
            out.print(f"[bold]{chosen.name}[/]: {chosen.description}; variants: "
                      f"{', '.join(v.name for v in chosen.variants)}")
        out.print("`bench list SUITE` for its axes, variants and metrics")
        return
    chosen = get_suite(suite)
    out.print(f"[bold]{chosen.name}[/]: {chosen.description}")
    table = Table(title="axes (-a NAME=SPEC or --NAME SPEC)")
    for column in ("axis", "default on cpu", "default on gpu", "kind", "help"):
        table.add_column(column)
    for axis in chosen.axes:
        table.add_row(" / ".join((axis.name, *axis.aliases)), axis.default_spec("cpu", {}),
                      axis.default_spec("gpu", {}), "tunable" if axis.tune else "workload", axis.help)
    out.print(table)
    table = Table(title=f"variants (reference: {chosen.reference}; default: "
                        f"{', '.join(chosen.default_variants) or 'all'})")
    for column in ("variant", "devices", "peer", "needs", "description"):
        table.add_column(column)
    for variant in chosen.variants:
        missing = variant.missing()
        needs = ", ".join(f"{n} (missing)" if n in missing else n for n in variant.needs)
        table.add_row(variant.name, ", ".join(variant.devices), "yes" if variant.peer else "", needs, variant.doc)
    out.print(table)
    table = Table(title="metrics")
    for column in ("metric", "unit", "better", "per", "gate", "help"):
        table.add_column(column)
    for metric in chosen.all_metrics():
        gate = f"tolerance {metric.tolerance:.0%} of base" if metric.gate == "tolerance" else metric.gate or ""
        table.add_row(metric.name, metric.unit, metric.better, metric.per, gate, metric.help)
    for label in chosen.labels:
        table.add_row(label.name, "text", "", "run", "", label.help)
    out.print(table)
    for backend in ("cpu", "gpu"):
        d = chosen.defaults(backend)
        noise = f", until noise < {d.max_noise:g} within {d.budget_s:g} s" if d.max_noise else ""
        out.print(f"defaults on {backend}: repeats {d.repeats}, warm-ups {d.warmup}{noise}")
    if chosen.plots:
        out.print("plots: " + ", ".join(plot.stem for plot in chosen.plots))
    for recipe in chosen.recipes:
        out.print(f"recipe {chosen.name}:{recipe.name}: {recipe.reproduces}")
    if chosen.claims:
        out.print("claims: " + ", ".join(claim.id for claim in chosen.claims) + " (bench report)")


def _list_kernels(suite) -> None:
    from bench.backend import kernel_table

    if not gpu_available():
        raise BenchError("--kernels compiles the suite's kernels for this GPU: no GPU found (CuPy missing or it sees "
                         "no CUDA device)")
    builds = suite.kernel_builds()
    if not builds:
        out.print(f"suite {suite.name} has no CUDA kernels of its own")
        return
    table = Table(title=f"{suite.name}: kernels compiled for this GPU")
    for column in ("kernel", "source", "options", "registers", "local bytes (spills, local arrays)",
                   "static shared bytes", "max threads per block"):
        table.add_column(column, justify="right" if column[0].islower() and " " in column else "left")
    for source, options in builds:
        for row in kernel_table(source, tuple(options)):
            table.add_row(row["kernel"], source.name, " ".join(options), str(row["registers"]),
                          str(row["local_bytes"]), str(row["shared_bytes"]), str(row["max_threads"]))
    out.print(table)


@data_app.command("list", cls=Command)
def data_list():
    """The catalogue of corpora."""
    from bench.corpus import catalogue

    table = Table()
    for column in ("name", "kind", "documents", "vocabulary", "tokens", "description"):
        table.add_column(column)
    for name, entry in catalogue().items():
        stats = entry.get("stats", entry)
        # tokens: the exact count where the catalogue has it, else UCI's published estimate
        tokens = stats.get("tokens", f"about {stats['tokens_approx']}" if "tokens_approx" in stats else "")
        table.add_row(name, entry.get("kind", ""), f"{stats.get('documents', '')}", f"{stats.get('vocabulary', '')}",
                      f"{tokens}", entry.get("description", ""))
    out.print(table)


@data_app.command("info", cls=Command)
def data_info(
    name: str = typer.Argument(..., metavar="NAME|PATH", help="Catalogue name or path to a docword/.ldac file "
                               "or directory."),
    scale: float = typer.Option(1.0, "--scale", help="A synthetic corpus' size (documents, vocabulary, tokens) "
                                "over its catalogue size: 0.1 a tenth, 2 twice."),
    seed: int = typer.Option(0, "--seed", help="Seed of a synthetic corpus (added to its catalogue seed)."),
):
    """Load and validate a corpus, then print its statistics."""
    from bench.corpus import load_corpus

    corpus = load_corpus(name, scale=scale, seed=seed)
    table = Table(title=f"{corpus.name} (valid)")
    table.add_column("statistic")
    table.add_column("value", justify="right")
    for key, value in corpus.stats().items():
        text = f"{value:,.4g}" if isinstance(value, float) else f"{value:,}"
        if key == "zipf_exponent" and math.isnan(value):
            text = "n/a: too few words used to fit"  # (Corpus.zipf_exponent)
        table.add_row(key, text)
    out.print(table)


@data_app.command("fetch", cls=Command)
def data_fetch(name: str = typer.Argument(..., metavar="NAME", help="A real corpus of the catalogue.")):
    """Download a real corpus into the cache, verifying its checksum."""
    from bench.corpus import fetch

    out.print(str(fetch(name)))


@data_app.command("synth", cls=Command)
def data_synth(
    name: str = typer.Argument(..., metavar="NAME", help="Synthetic corpus name (see `bench data list`)."),
    out_dir: Path = typer.Option(Path("."), "--out", help="Directory for docword/vocab files."),
    scale: float = typer.Option(1.0, "--scale", help="The corpus' size (documents, vocabulary, tokens) over its "
                                "catalogue size: 0.1 a tenth, 2 twice."),
    seed: int = typer.Option(0, "--seed", help="Seed (added to the catalogue's)."),
):
    """Generate a synthetic corpus and write it in UCI format."""
    from bench.corpus import synthesize, write_uci

    corpus = synthesize(name, scale=scale, seed=seed)
    for path in write_uci(corpus, out_dir, corpus.name):
        out.print(str(path))


def main():
    """Bad input ends in one line on stderr and exit 2; each command documents its other
    exit statuses (1: a regression, a failed check or a failed recipe)."""
    warnings.showwarning = lambda message, *args, **kwargs: err.print(f"[yellow]warning:[/] {message}")
    try:
        status = app(standalone_mode=False)
    except (BenchError, CorpusError) as error:
        err.print(f"[red]error:[/] {error}")
        sys.exit(error.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        err.print("interrupted")
        sys.exit(130)
    except MemoryError as error:  # a point too large for this machine (numpy says how much it asked for)
        err.print(f"[red]error:[/] out of memory: {error or 'an allocation failed'}: ask for a smaller point "
                  "(K, scale, batch)")
        sys.exit(2)
    except Exception as error:
        if not hasattr(error, "format_message"):  # a bug: show its traceback
            raise
        # A usage error of click (vendored by newer typer): bad option, missing argument. With no
        # arguments the help was printed and the message is empty.
        message = " ".join(error.format_message().split())
        if message:
            err.print(f"[red]error:[/] {message}")
        sys.exit(2)
    sys.exit(status if isinstance(status, int) else 0)
