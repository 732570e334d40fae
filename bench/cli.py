"""The `bench` command."""

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from bench import envinfo, harness, results
from bench.backend import resolve_backend
from bench.corpus import CorpusError
from bench.errors import BenchError
from bench.kspec import parse_k, parse_list
from bench.suite import all_suites, get_suite

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "results"
FIGURES = REPO / "figures"

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Re-measure GPU papers on sampling from discrete distributions and topic models.")
data_app = typer.Typer(no_args_is_help=True, help="Corpora: list, info, fetch, synth.")
app.add_typer(data_app, name="data")
# Wide when writing to a log or pipe, so tables are not squeezed to 80 columns.
out = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True)

SuiteOpt = typer.Option("lda", "--suite", help="Suite to run (see `bench list`).")
BackendOpt = typer.Option("auto", "--backend", help="auto (GPU when CuPy sees one) | cpu | gpu.")


def _sweep_options(k, precision, dataset, scale, update, warp, iterations) -> dict:
    return {"k": k, "precision": precision, "dataset": dataset, "scale": scale, "update": update,
            "W": warp, "iterations": iterations}


@app.command()
def sweep(
    k: Optional[str] = typer.Option(None, "--k", help="Topics: A..B (step 4), A..B:S, or a comma list."),
    variant: Optional[str] = typer.Option(None, "--variant", help="Comma list of variants."),
    precision: Optional[str] = typer.Option(None, "--precision", help="f32, f64 or f32,f64."),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="Catalogue name or path."),
    scale: Optional[float] = typer.Option(None, "--scale", help="Shrink a synthetic corpus."),
    update: Optional[str] = typer.Option(None, "--update", help="mfm (mean-for-mode) and/or dirichlet."),
    warp: Optional[int] = typer.Option(None, "--warp", help="Warp size W: 8, 16 or 32."),
    iterations: Optional[int] = typer.Option(None, "--iterations", help="Iterations per timed run."),
    repeats: Optional[int] = typer.Option(None, "--repeats", help="Timed repeats per point."),
    warmup: Optional[int] = typer.Option(None, "--warmup", help="Untimed warm-up runs per variant."),
    backend: str = BackendOpt,
    suite: str = SuiteOpt,
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Directory for <suite>.csv (default results/<machine>)."),
    fresh: bool = typer.Option(False, "--fresh", help="Re-measure points already measured."),
):
    """Measure a sweep; resumes where an earlier run of the same sweep stopped."""
    chosen = get_suite(suite)
    backend = resolve_backend(backend, chosen.backends)
    defaults = chosen.defaults(backend)
    points = chosen.points(_sweep_options(k, precision, dataset, scale, update, warp, iterations), backend)
    variants = parse_list(variant, chosen.variants, "variant") if variant else list(defaults.variants)
    repeats = defaults.repeats if repeats is None else repeats
    warmup = defaults.warmup if warmup is None else warmup
    if repeats < 1 or warmup < 0:
        raise BenchError("--repeats must be >= 1 and --warmup >= 0")
    if out_dir is None:
        out_dir = RESULTS / envinfo.machine_slug(envinfo.collect_env(sys.argv), backend)
    constant = {key: value for key, value in points[0].items()
                if key not in ("suite", "backend") and all(p[key] == value for p in points)}
    err.print(f"{len(points)} points x {len(variants)} variants x {repeats} repeats on {backend}, "
              + " ".join(f"{key}={value}" for key, value in constant.items()))
    if all(v is None for v in (dataset, scale, iterations)):
        err.print(defaults.note)
    settings = harness.SweepSettings(variants, repeats, warmup, backend, out_dir, fresh)
    raise typer.Exit(harness.sweep(chosen, points, settings))


@app.command()
def run(
    k: int = typer.Option(256, "--k", help="Number of topics."),
    variant: str = typer.Option("alg7", "--variant"),
    precision: str = typer.Option("f32", "--precision"),
    dataset: Optional[str] = typer.Option(None, "--dataset"),
    scale: Optional[float] = typer.Option(None, "--scale"),
    update: str = typer.Option("mfm", "--update"),
    warp: int = typer.Option(32, "--warp"),
    iterations: Optional[int] = typer.Option(None, "--iterations"),
    backend: str = BackendOpt,
    suite: str = SuiteOpt,
):
    """Measure one point once (after a warm-up) and show where the time goes."""
    chosen = get_suite(suite)
    backend = resolve_backend(backend, chosen.backends)
    parse_list(variant, chosen.variants, "variant")
    [point] = chosen.points(_sweep_options(str(k), precision, dataset, scale, update, warp, iterations), backend)
    settings = harness.SweepSettings([variant], 1, 1, backend, Path("."))
    [row] = list(harness.measure_point(chosen, point, settings))
    table = Table(title=f"{suite} {variant}: {harness.describe(point)}")
    table.add_column("phase")
    table.add_column("seconds", justify="right")
    table.add_column("share", justify="right")
    for phase in chosen.phases:
        table.add_row(phase, f"{row[phase + '_s']:.4f}", f"{row[phase + '_s'] / row['seconds']:.1%}")
    table.add_row("whole run", f"{row['seconds']:.4f}", "100%")
    out.print(table)
    extras = {key: value for key, value in row.items() if key not in point and not key.endswith("_s")
              and key not in ("variant", "repeat", "seconds")}
    out.print(", ".join(f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}"
                        for key, value in extras.items()))


@app.command()
def verify(
    k: str = typer.Option("1..70", "--k", help="K spec to check; here A..B means every K from A to B."),
    warp: str = typer.Option("32", "--warp", help="Comma list of warp sizes (8, 16, 32)."),
    precision: str = typer.Option("f32,f64", "--precision"),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed of the random inputs (default: fresh)."),
    backend: str = BackendOpt,
):
    """Check every draw-z variant: identical z with dyadic weights, chi-square vs exact probabilities."""
    from impls.lda.model import PRECISIONS
    from impls.lda.suite import WARP_SIZES
    from impls.lda.verify import draw_on_gpu, verify_point
    from impls.lda.drawz_cpu import draw_z
    import numpy as np

    backend = resolve_backend(backend, get_suite("lda").backends)
    ks = parse_k(k, default_step=1)
    warps = [int(w) for w in parse_list(warp, [str(w) for w in WARP_SIZES], "warp size")]
    if backend == "gpu" and warps != [32]:
        raise BenchError("--backend gpu checks the hardware warp only: use --warp 32")
    precisions = parse_list(precision, PRECISIONS, "precision")
    seed = int(np.random.SeedSequence().entropy % 2**32) if seed is None else seed
    draw = draw_on_gpu if backend == "gpu" else draw_z
    reports = [verify_point(K, W, p, seed, draw=draw) for W in warps for p in precisions for K in ks]
    alpha = 1e-3 / len(reports)  # Bonferroni: the whole run fails by chance with probability < 0.1%
    table = Table(title=f"bench verify --backend {backend} (seed {seed}; chi-square passes at p >= {alpha:.1e})")
    for column in ("W", "precision", "K", "tokens", "z identical to CPU alg1", "min chi-square p", "result"):
        table.add_column(column, justify="right")
    failures = 0
    for report in reports:
        differing = {v: n for v, n in report["mismatches"].items() if n}
        p_min = min(report["chi2_p"].values())
        ok = not differing and p_min >= alpha
        failures += not ok
        table.add_row(str(report["W"]), report["precision"], str(report["K"]), str(report["tokens"]),
                      "all" if not differing else ", ".join(f"{v}: {n} differ" for v, n in differing.items()),
                      f"{p_min:.3g}", "[green]pass[/]" if ok else "[red]FAIL[/]")
    out.print(table)
    out.print(f"{len(reports) - failures} of {len(reports)} points pass" + (f"; {failures} FAIL" if failures else ""))
    raise typer.Exit(1 if failures else 0)


@app.command()
def figures(
    results_dir: Path = typer.Option(RESULTS, "--results", help="Root of results/<machine>/ directories."),
    out_dir: Path = typer.Option(FIGURES, "--out", help="Root of figures/<machine>/ directories."),
    ensure: bool = typer.Option(False, "--ensure", help="Run the default CPU sweep first if this machine has no results."),
):
    """Render every figure whose results exist."""
    from bench.figures import render_all

    if ensure:
        slug = envinfo.machine_slug(envinfo.collect_env(sys.argv), "cpu")
        for chosen in all_suites():
            if not (results_dir / slug / f"{chosen.name}.csv").exists():
                err.print(f"no {chosen.name} results for this machine ({slug}): running the default CPU sweep")
                defaults = chosen.defaults("cpu")
                points = chosen.points({}, "cpu")
                settings = harness.SweepSettings(list(defaults.variants), defaults.repeats, defaults.warmup,
                                                 "cpu", results_dir / slug)
                err.print(defaults.note)
                status = harness.sweep(chosen, points, settings)
                if status:
                    raise typer.Exit(status)
    written = render_all(results_dir, out_dir, all_suites())
    for path in written:
        out.print(str(path))
    if not written:
        err.print(f"no results under {results_dir}: run `bench sweep` first")
        raise typer.Exit(1)


@app.command()
def check(
    new: Path = typer.Argument(..., help="Result CSV (or directory) to check."),
    baseline: Path = typer.Option(..., "--baseline", help="Result CSV (or directory) to compare with."),
    suite: str = SuiteOpt,
    threshold: float = typer.Option(0.10, "--threshold", help="Ratio change that counts (0.10 = 10%)."),
    alpha: float = typer.Option(0.05, "--alpha", help="Significance level of the Mann-Whitney U test."),
    column: str = typer.Option("seconds", "--column", help="Measurement column to compare."),
):
    """Compare ratios between variants (each over the suite's reference, measured
    in the same run) point by point; exit 1 when one is significantly slower."""
    from bench.check import compare, exit_code, render_table

    for path in (new, baseline):
        if not path.exists():
            raise BenchError(f"no such result file: {path}")
    chosen = get_suite(suite)
    try:
        result = compare(results.read_results(new), results.read_results(baseline), chosen.reference_variant,
                         threshold=threshold, alpha=alpha, column=column)
    except ValueError as error:
        raise BenchError(str(error)) from error
    out.print(render_table(result))
    code = exit_code(result)
    counts = result["verdict"].value_counts().to_dict()
    out.print(", ".join(f"{n} {v}" for v, n in sorted(counts.items())) + (" -> regression" if code else ""))
    raise typer.Exit(code)


@app.command("env")
def env_command():
    """Print what this machine and its software are (recorded with every result)."""
    out.print_json(json.dumps(envinfo.collect_env(sys.argv), default=str))


@app.command("list")
def list_command():
    """List the suites, their variants and phases."""
    for chosen in all_suites():
        out.print(f"[bold]{chosen.name}[/]: {chosen.description} (backends: {', '.join(chosen.backends)}; "
                  f"phases: {', '.join(chosen.phases)}; reference: {chosen.reference_variant})")
        for name, text in chosen.variants.items():
            out.print(f"  {name:<12} {text}")


@data_app.command("list")
def data_list():
    """The catalogue of corpora."""
    from bench.corpus import catalogue

    table = Table()
    for column in ("name", "kind", "documents", "vocabulary", "tokens", "description"):
        table.add_column(column)
    for name, entry in catalogue().items():
        stats = entry.get("stats", entry)
        table.add_row(name, entry.get("kind", ""), *(f"{stats.get(key, '')}" for key in
                                                     ("documents", "vocabulary", "tokens")),
                      entry.get("description", ""))
    out.print(table)


@data_app.command("info")
def data_info(
    name: str = typer.Argument(..., help="Catalogue name or path to a docword/.ldac file or directory."),
    scale: float = typer.Option(1.0, "--scale"),
    seed: int = typer.Option(0, "--seed"),
):
    """Load and validate a corpus, then print its statistics."""
    from bench.corpus import load_corpus

    corpus = load_corpus(name, scale=scale, seed=seed)
    table = Table(title=f"{corpus.name} (valid)")
    table.add_column("statistic")
    table.add_column("value", justify="right")
    for key, value in corpus.stats().items():
        table.add_row(key, f"{value:,.1f}" if isinstance(value, float) else f"{value:,}")
    out.print(table)


@data_app.command("fetch")
def data_fetch(name: str = typer.Argument(...)):
    """Download a real corpus into the cache, verifying its checksum."""
    from bench.corpus import fetch

    out.print(str(fetch(name)))


@data_app.command("synth")
def data_synth(
    name: str = typer.Argument(..., help="Synthetic corpus name (see `bench data list`)."),
    out_dir: Path = typer.Option(Path("."), "--out", help="Directory for docword/vocab files."),
    scale: float = typer.Option(1.0, "--scale"),
    seed: int = typer.Option(0, "--seed"),
):
    """Generate a synthetic corpus and write it in UCI format."""
    from bench.corpus import synthesize, write_uci

    corpus = synthesize(name, scale=scale, seed=seed)
    for path in write_uci(corpus, out_dir, corpus.name):
        out.print(str(path))


def main():
    try:
        app()
    except (BenchError, CorpusError) as error:
        err.print(f"[red]error:[/] {error}", soft_wrap=True, highlight=False)
        sys.exit(getattr(error, "exit_code", 1))
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
