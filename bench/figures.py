"""Figure plumbing shared by the suites; knows no suite's columns.

Suites draw on matplotlib.figure.Figure objects (no pyplot: no global state, no GUI
backend; PNG goes through Agg) and hand them to save().
"""

from __future__ import annotations

import itertools
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from bench.errors import BenchError
from bench.results import key_columns, latest_code, load, read_csv, read_sidecar, schema_for

CAPTION_FONTSIZE = 6


def render_all(results_root: Path, figures_root: Path, suites: list, warn=print,
               machines: list[str] | None = None) -> list[Path]:
    """Render every suite's figures for every results_root/<machine>/<suite>.csv (of the
    named machines only, where given): `suites` are all that draw into figures_root.

    Each suite sees, for each point and variant, the runs of the latest code version
    (results.latest_code), so figures never pool new code with old measurements. A
    file that cannot be read is reported through `warn` and skipped; the others are drawn.
    Where every file was read, the figures and tables the results no longer draw are
    removed (remove_stale).
    """
    written = []
    for machine_dir in sorted(p for p in Path(results_root).iterdir() if p.is_dir()):
        if machines is not None and machine_dir.name not in machines:
            continue
        outdir = Path(figures_root) / machine_dir.name
        drawn, unread = [], False
        for suite in suites:
            csv_path = machine_dir / f"{suite.name}.csv"
            if not csv_path.exists():
                continue
            try:
                df, schema, sidecar = load(csv_path, suite.name, lambda name: schema_for(suite))
                series_path = machine_dir / f"{suite.name}-series.csv"
                series = read_csv(series_path) if series_path.exists() else pd.DataFrame()
            except BenchError as error:
                warn(f"skipped: {error}")
                unread = True
                continue
            if df.empty:
                continue
            df = latest_code(df, schema)
            series = latest_code(series, schema)
            meta = {**sidecar, "schema": schema, "machine": machine_dir.name}
            for plot in suite.plots:
                drawn += draw_plot(plot, series if plot.series else df, meta, outdir)
            drawn += suite.render_figures(df, series, meta, outdir)
            drawn += floor_figure(df, meta, outdir, suite.name)
        for suite in suites:
            profile_path = machine_dir / f"{suite.name}-profile.csv"
            if profile_path.exists():
                for figure in (stall_figure, roofline_figure):
                    drawn += figure(profile_path, outdir)
        if not unread:
            remove_stale(outdir, drawn)
        written += drawn
    return written


DRAWN_SUFFIXES = (".png", ".pdf", ".md")  # what save and save_text write


def remove_stale(outdir: Path, drawn: list[Path]) -> None:
    """The figures and tables in a machine's folder that its results no longer draw (one whose
    name gained a setting when a second value of it was measured, one of results since
    removed), deleted, so that its REPORT.md shows only what the results draw."""
    if not outdir.is_dir():
        return
    kept = {Path(path).resolve() for path in drawn}
    for path in outdir.iterdir():
        if path.suffix in DRAWN_SUFFIXES and path.resolve() not in kept:
            path.unlink()


@dataclass
class ProfileRun:
    """A `bench profile` file's newest code: for each point and variant the rows of its
    newest run (a resumed profile takes the pairs of the interrupted one), the point
    columns that vary (they label a kernel), the others' values, and the sidecar entry of
    the newest run (its peaks are the roofline's)."""

    rows: pd.DataFrame
    varying: list
    constant: dict
    info: dict

    def labels(self, frame: pd.DataFrame) -> pd.Series:
        return frame[[*self.varying, "variant", "kernel"]].astype(str).agg(" ".join, axis=1)

    def caption(self) -> str:
        newest = self.rows.sort_values("timestamp").iloc[-1]
        runs = sorted(self.rows["run_id"].unique())
        return (f"Machine {newest['machine']}; code version {newest['code_version']}; "
                + (f"run {runs[0]}" if len(runs) == 1 else f"runs {', '.join(runs)} (peaks of {newest['run_id']})")
                + "\n" + ", ".join(f"{k}={v}" for k, v in self.constant.items())
                + "\nNsight Compute, one launch of each kernel (bench profile; the sidecar has the commands)")


def latest_profile(csv_path: Path) -> ProfileRun:
    df = read_csv(csv_path).sort_values("timestamp", kind="stable")
    df = df[df["code_version"] == df["code_version"].iloc[-1]]
    point_columns = list(df.columns[:list(df.columns).index("variant")])  # suite, backend, the axes
    newest = df.groupby([*point_columns, "variant"], dropna=False)["run_id"].transform("last")
    df = df[df["run_id"] == newest]
    varying = [c for c in point_columns if df[c].nunique() > 1]
    info = read_sidecar(csv_path.with_suffix(".json")).get("runs", {}).get(df["run_id"].iloc[-1], {})
    return ProfileRun(df, varying, {c: df[c].iloc[0] for c in point_columns if c not in varying}, info)


def stall_figure(csv_path: Path, outdir: Path, reasons_shown: int = 6) -> list[Path]:
    """A `bench profile` file's newest code (latest_profile): each kernel's warp stalls per issued
    instruction, by reason (the largest few, the rest as other), stacked: the bar's length
    is the cycles a warp waits per instruction it issues."""
    from bench.profile import STALL_PREFIX, STALL_SUFFIX

    run = latest_profile(csv_path)
    stalls = run.rows[run.rows["metric"].str.startswith(STALL_PREFIX)]
    if stalls.empty:
        return []
    reason = stalls["metric"].str[len(STALL_PREFIX):-len(STALL_SUFFIX)]
    table = stalls.assign(label=run.labels(stalls), reason=reason).pivot_table("value", "label", "reason",
                                                                               aggfunc="first")
    ordered = stalls.sort_values([*run.varying, "variant", "kernel"], kind="stable")  # K = 993 before 1000
    table = table.reindex(pd.unique(run.labels(ordered)))
    top = table.sum().sort_values(ascending=False).index[:reasons_shown]
    table = table[top].assign(other=table.drop(columns=top).sum(axis=1))
    fig = Figure(figsize=(8, 0.4 * len(table) + 1.5))
    ax = fig.add_subplot()
    table.plot.barh(stacked=True, ax=ax, width=0.7, colormap="tab10")
    ax.set(xlabel="warp cycles stalled per issued instruction, by reason", ylabel="")
    ax.invert_yaxis()
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))  # beside the bars, never over one
    ax.grid(alpha=0.3, axis="x")
    ax.set_title(f"{csv_path.stem}: stall reasons", fontsize=10)
    return save(fig, outdir, f"{csv_path.stem}-stalls", run.caption())


def roofline_figure(csv_path: Path, outdir: Path) -> list[Path]:
    """A `bench profile` file's newest code (latest_profile) against the peaks measured in its
    newest run (the sidecar; bench.peaks): each kernel's achieved GFLOP/s against its flops per DRAM byte,
    under the roof min(FMA peak, intensity x copy bandwidth), a panel per precision (that
    of most of its flops, whose flops alone it is credited with); and a table of every
    kernel, flop-less ones too (at their point's precision; flop columns blank where the run
    did not count flops), with its fractions of the peaks and of the issue slots, and the
    ceiling that binds it (memory, compute or issue). Nothing for a run without peaks, time
    or DRAM bytes."""
    from bench.profile import kernel_rates

    run = latest_profile(csv_path)
    peaks = run.info.get("peaks")
    rates = kernel_rates(run.rows).dropna(subset=["seconds", "bytes"]) if peaks else pd.DataFrame()
    if rates.empty:
        return []
    counted = rates[["flops_f32", "flops_f64"]].notna().any(axis=1)  # the run collected the flops set
    flops = rates[["flops_f32", "flops_f64"]].fillna(0.0)
    by_flops = pd.Series(np.where(flops["flops_f64"] > flops["flops_f32"], "f64", "f32"), index=rates.index)
    # A kernel without flops keeps its point's precision, where the suite has that axis.
    precision = by_flops.where(flops.max(axis=1) > 0, rates.get("precision", by_flops))
    rates = rates.assign(precision=precision, flops=flops.max(axis=1), label=run.labels(rates))
    copy = peaks["copy_gbps"]
    peak = rates["precision"].map(lambda p: peaks[f"fma_gflops_{p}"])
    rates = rates.assign(gflops=rates["flops"] / rates["seconds"] / 1e9, gbps=rates["bytes"] / rates["seconds"] / 1e9,
                         intensity=rates["flops"] / rates["bytes"])
    roof = np.minimum(peak, rates["intensity"] * copy)
    rates = rates.assign(fma_frac=rates["gflops"] / peak, copy_frac=rates["gbps"] / copy,
                         roof_frac=(rates["gflops"] / roof).where(rates["flops"] > 0),
                         bound=np.where(rates["intensity"] * copy < peak, "memory", "compute"))
    # The issue slots bound a kernel too (one instruction a cycle per scheduler): where the
    # share of them busy exceeds the share of its roof it reaches, they are its ceiling.
    by_issue = rates["issue_frac"] > rates["roof_frac"].fillna(rates["copy_frac"])
    rates = rates.assign(roof_frac=rates["roof_frac"].where(~by_issue, rates["issue_frac"]),
                         bound=rates["bound"].where(~by_issue, "issue"))
    drawn = rates[(rates["flops"] > 0) & (rates["bytes"] > 0)]  # a point of finite intensity
    precisions = sorted(drawn["precision"].unique())
    written = []
    if precisions:
        fig = Figure(figsize=(6 * len(precisions), 4.5))
        for i, precision in enumerate(precisions):
            ax = fig.add_subplot(1, len(precisions), i + 1)
            points = drawn[drawn["precision"] == precision]
            top = peaks[f"fma_gflops_{precision}"]
            low, high = min(points["intensity"].min(), top / copy) / 10, max(points["intensity"].max(), top / copy) * 10
            x = np.geomspace(low, high, 200)
            ax.plot(x, np.minimum(top, x * copy), color="black", linewidth=1,
                    label=f"roof: copy {copy:,.0f} GB/s, FMA {top:,.0f} GFLOP/s")
            for j, (_, kernel) in enumerate(points.iterrows()):
                ax.scatter(kernel["intensity"], kernel["gflops"], color=f"C{j}",
                           label=f"{kernel['label']} ({kernel['roof_frac']:.0%} of its {kernel['bound']} roof)")
            ax.set(xscale="log", yscale="log", xlabel="flops per DRAM byte", ylabel="achieved GFLOP/s",
                   title=f"{precision} kernels")
            ax.grid(alpha=0.3, which="both")
            ax.legend(fontsize=6, loc="lower right")
        fig.suptitle(f"{csv_path.stem}: roofline", fontsize=10)
        written += save(fig, outdir, f"{csv_path.stem}-roofline", run.caption() + "\nPeaks measured before the "
                        "profile in the same run (bench.peaks); flops from the thread-level FMA, add and multiply "
                        "counters (a multiply-add counts 2); bytes: DRAM read plus written; an issue roof: the "
                        "share of issue slots busy, where above the share of the drawn roof")
    def where_counted(column, form):  # blank where the run did not count flops
        return rates[column].map(form.format).where(counted, "")

    table = pd.DataFrame({"kernel": rates["label"], "precision": rates["precision"],
                          "ms": rates["seconds"].map(lambda v: f"{v * 1e3:.3g}"),
                          "GFLOP/s": where_counted("gflops", "{:,.0f}"),
                          "GB/s": rates["gbps"].map("{:,.0f}".format),
                          "flops/byte": where_counted("intensity", "{:.3g}"),
                          "of FMA peak": where_counted("fma_frac", "{:.1%}"),
                          "of copy bandwidth": rates["copy_frac"].map("{:.1%}".format),
                          "of issue slots": rates["issue_frac"].map(lambda v: "" if np.isnan(v) else f"{v:.1%}"),
                          "of its roof": rates["roof_frac"].map(lambda v: "" if np.isnan(v) else f"{v:.1%}"),
                          "roof": rates["bound"].where(counted | by_issue, "")})
    return [*written, save_text(outdir, f"{csv_path.stem}-roofline.md", run.caption().replace("\n", "; ") +
                                "\n\n" + table.to_markdown(index=False, disable_numparse=True))]


BOUND_COLOURS = {"dram": "C0", "l2": "C1", "fma": "C2", "launch": "C3"}  # bench.ceilings.CEILINGS
MARKERS = "osD^v<>PXh*"
GUIDES = {"at the floor": (1, "-"), "10x the floor": (10, "--"), "100x the floor": (100, ":")}


def floor_figure(df: pd.DataFrame, meta: dict, outdir: Path, name: str) -> list[Path]:
    """A suite's GPU points against their floors (bench.ceilings), the roofline read in time:
    each point and variant's measured time (median over repeats) against the least time that
    the DRAM, L2, FMA and launch ceilings measured in the same run allow its work; colour: the
    ceiling that binds (the most common over the repeats), marker: the variant. Nothing where no
    row has a floor."""
    if "floor_s" not in df:
        return []
    rows = df.dropna(subset=["floor_s", "seconds"])
    rows = rows[rows["floor_s"] > 0]
    if rows.empty:
        return []
    keys = [k for k in key_columns(meta["schema"]) if k in rows]
    grouped = rows.groupby([*keys, "variant"], dropna=False)
    points = grouped[["floor_s", "seconds"]].median().join(grouped["bound"].agg(lambda b: b.mode().iloc[0]))
    points = points.reset_index()
    fig = Figure(figsize=(7, 5))
    ax = fig.add_subplot()
    ends = np.array([points["floor_s"].min() / 2, points["floor_s"].max() * 2])
    for label, (times, style) in GUIDES.items():
        ax.plot(ends, ends * times, color="0.4", linestyle=style, linewidth=0.8, label=label)
    markers = dict(zip(sorted(points["variant"].unique()), itertools.cycle(MARKERS)))
    for (variant, bound), group in points.groupby(["variant", "bound"], dropna=False):
        ax.scatter(group["floor_s"], group["seconds"], marker=markers[variant], s=14, alpha=0.8,
                   color=BOUND_COLOURS.get(bound, "0.5"), label=f"{variant} ({bound} bound)")
    ax.set(xscale="log", yscale="log", xlabel="floor: the least time the ceilings allow (s)",
           ylabel="measured time (s)", title=f"{name}: every GPU point against its floor")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1))
    note = ("Each marker: a point of the sweep and a variant, the median over repeats. Floor: the largest of the "
            "times its DRAM, L2, FMA and launch ceilings, measured in the same run, allow the work the suite counts "
            "for it (bench.ceilings); on the solid line it runs at its floor, below it it beats a ceiling (a count "
            "or a ceiling is wrong).")
    return save(fig, outdir, f"{name}-floors", caption(meta, rows) + "\n" + note)


def newest_run(rows: pd.DataFrame, measured) -> pd.DataFrame | None:
    """The rows of the newest run whose own rows satisfy `measured` (a test of a run's rows:
    "both systems", "two values of the axis"), so that what is compared is that run's; None where
    no run does."""
    runs = [run for run, run_rows in rows.groupby("run_id") if measured(run_rows)]
    return rows[rows["run_id"] == max(runs)] if runs else None


def each_variants_newest_run(rows: pd.DataFrame) -> pd.DataFrame:
    """Each variant's rows from its own newest run (where no one run measured them all)."""
    return rows[rows["run_id"] == rows.groupby("variant")["run_id"].transform("max")]


def per_setting(df: pd.DataFrame, keys, always=()):
    """(setting, rows) for each combination of the keys that vary in df (and of the
    keys in `always`), so that no figure pools them; ({}, df) when none vary."""
    split = [k for k in keys if k in df and (k in always or df[k].nunique(dropna=False) > 1)]
    if not split:
        yield {}, df
        return
    for values, subset in df.groupby(split, dropna=False):
        yield dict(zip(split, values)), subset


def setting_stem(stem: str, setting: dict) -> str:
    """A file stem naming a setting: fig7a-time-vs-k-f32-dataset-kos."""
    suffix = "-".join(f"{k}-{v}" for k, v in setting.items())
    return f"{stem}-{re.sub(r'[^A-Za-z0-9.]+', '-', suffix)}" if setting else stem


def draw_plot(plot, df: pd.DataFrame, meta: dict, outdir: Path) -> list[Path]:
    """A declared Plot: y against x, one line per `line` value, one figure per `panel`
    value and per combination of any other axis that varies (never pooled) where x
    takes several values. Run
    rows: the median over repeats, with a min-max band; series rows: one curve per
    repeat."""
    if df.empty or plot.x not in df or plot.y not in df:
        return []
    schema = meta["schema"]
    keys = [k for k in key_columns(schema) if k not in (plot.x, plot.line)]
    written = []
    for setting, subset in per_setting(df, keys, always=(plot.panel,)):
        if subset[plot.x].nunique() < 2:  # a single x draws no line: its numbers are in the CSV
            continue
        fig = Figure(figsize=(7, 4.5))
        ax = fig.add_subplot()
        for i, (name, lines) in enumerate(subset.groupby(plot.line, dropna=False)):
            style = {"color": f"C{i}", "linewidth": 1}
            if plot.series:
                for j, (_, curve) in enumerate(lines.groupby(["run_id", "group", "repeat"])):
                    curve = curve.sort_values(plot.x)
                    ax.plot(curve[plot.x], curve[plot.y], label=str(name) if j == 0 else None, alpha=0.7, **style)
                continue
            stats = lines.groupby(plot.x)[plot.y].agg(["median", "min", "max"])
            ax.plot(stats.index, stats["median"], marker="o", markersize=3, label=str(name), **style)
            ax.fill_between(stats.index, stats["min"], stats["max"], color=style["color"], alpha=0.2, linewidth=0)
        unit = schema["columns"].get(plot.y, {}).get("unit", "")
        ax.set_xlabel(plot.x)
        ax.set_ylabel(f"{plot.y} ({unit})" if unit else plot.y)
        if plot.logx:
            ax.set_xscale("log")
            xs = subset[plot.x].dropna().unique()
            plain_log_labels(ax.xaxis, xs if len(xs) <= MAX_LABELLED_SIZES else None)
        ax.set_yscale("log" if plot.logy else "linear")
        named = ", ".join(f"{k}={v}" for k, v in setting.items())
        ax.set_title(plot.title + (f" ({named})" if named else ""), fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        note = ("Lines: one per repeat." if plot.series else
                "Lines: median over repeats; bands: fastest to slowest repeat.")
        written += save(fig, outdir, setting_stem(plot.stem, setting), caption(meta, subset) + "\n" + note)
    return written


MAX_LABELLED_SIZES = 12  # a log x axis of at most this many measured sizes is labelled at each


def plain_log_labels(axis, at=None) -> None:
    """A log axis labelled in plain numbers, at 1, 2 and 5 of each decade (matplotlib's
    3x10^-1 beside 4x10^-1 overlap where an axis spans about a decade), or at `at` alone (a
    sweep's few measured sizes: 32, 64, 128)."""
    if at is not None:
        axis.set_major_locator(FixedLocator(sorted(set(at))))
        axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(FuncFormatter(
        lambda v, _: f"{v:g}" if v > 0 and round(v / 10 ** np.floor(np.log10(v))) in (2, 5) else ""))


def _distinct(values) -> str:
    return " / ".join(dict.fromkeys(str(v) for v in values if v is not None)) or "?"


def caption(meta: dict, df: pd.DataFrame) -> str:
    """Where and how the data in df were measured, one topic per line."""
    runs = meta.get("runs", {})
    envs = [runs[r] for r in df["run_id"].unique() if r in runs]
    keys = [k for k in key_columns(meta["schema"]) if k in df]
    constant = {k: df[k].iloc[0] for k in keys if df[k].nunique(dropna=False) == 1}
    backends = set(df["backend"]) if "backend" in df else set()

    if backends and backends != {"cpu"} and any(e.get("gpu_name") for e in envs):
        model = _distinct(e.get("gpu_name") for e in envs)
        cuda = _distinct(e.get("cuda_runtime") for e in envs)
        driver = _distinct(e.get("driver_version") for e in envs)
        model += f" (CUDA {cuda}, driver {driver})"
    else:
        model = _distinct(f"{e.get('cpu_model')}, {e.get('cpu_count')} CPUs" for e in envs)
    versions = ", ".join(
        f"{name} {_distinct(e.get('versions', {}).get(name) for e in envs)}"
        for name in ("numpy", "numba", "cupy")
        if any(e.get("versions", {}).get(name) for e in envs)
    )
    machine = f"Machine {meta.get('machine', '?')}: {model}; backend {_distinct(sorted(backends))}"
    if versions:
        machine += f"; {versions}"

    settings = ", ".join(f"{k}={v}" for k, v in constant.items() if k not in ("suite", "backend"))
    measured = df.drop_duplicates([*keys, "variant", "run_id", "group", "repeat"])
    repeats = measured.groupby([*keys, "variant"], dropna=False).size()
    n_repeats = str(repeats.min()) if repeats.min() == repeats.max() else f"{repeats.min()}-{repeats.max()}"
    dates = pd.to_datetime(df["timestamp"], utc=True, format="ISO8601").dt.strftime("%Y-%m-%d")
    date_range = dates.min() if dates.min() == dates.max() else f"{dates.min()} to {dates.max()}"
    codes = _distinct(sorted(df["code_version"].astype(str).unique()))
    lines = [machine, f"Settings: {settings or 'none constant'}; repeats per point: {n_repeats}",
             f"Measured {date_range}; code version {codes}"]
    if "sm_clock_mhz_min" in df and df["sm_clock_mhz_min"].notna().any():
        throttled = df.loc[df["throttled"].astype(str).str.lower() == "true", "group"].nunique()
        lines.append(f"SM clock during the points {df['sm_clock_mhz_min'].min():.0f}-"
                     f"{df['sm_clock_mhz_max'].max():.0f} MHz; {throttled} point(s) measured while throttled")
    elif "load_1m" in df and df["load_1m"].notna().any():
        lines.append(f"Load average (1 min) during the points {df['load_1m'].min():.2f}-{df['load_1m'].max():.2f}")
    return "\n".join(lines)


def save_text(outdir: Path, name: str, text: str) -> Path:
    """A table beside the figures (markdown), written as outdir/name."""
    path = Path(outdir) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    return path


def save(fig: Figure, outdir: Path, stem: str, caption_text: str | None = None) -> list[Path]:
    """Write stem.png (150 dpi) and stem.pdf, with the caption as small text under the axes."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    if caption_text:
        # Wrap to the figure's width; bbox_inches="tight" grows the canvas to take the text.
        width = int(fig.get_figwidth() * 72 / (CAPTION_FONTSIZE * 0.55))
        lines = [wrapped for line in caption_text.splitlines() for wrapped in textwrap.wrap(line, width)]
        fig.text(0.01, 0, "\n".join(lines), ha="left", va="top", fontsize=CAPTION_FONTSIZE, color="0.3")
    paths = [outdir / f"{stem}.png", outdir / f"{stem}.pdf"]
    fig.savefig(paths[0], dpi=150, bbox_inches="tight")
    # No creation date, so an unchanged figure gives an unchanged committed file.
    fig.savefig(paths[1], bbox_inches="tight", metadata={"CreationDate": None})
    return paths
