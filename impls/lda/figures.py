"""The lda suite's figures: Figures 6, 7 and 8 of the butterfly paper (PPoPP 2017,
section 7), and the speed-up over Algorithm 1.

Figure 6: K = 32k + 16, the four application variants (mean-for-mode or Dirichlet-sampled
theta and phi, each in 32- and 64-bit), each with Algorithm 1 and with Algorithm 7.
Figure 7: whole-application time against K, one panel per precision of the intermediate
values (a: 32-bit, b: 64-bit). Figure 8: the same for 480 <= K <= 544, Algorithms 4 and
7 only, every point marked so the sawtooth in K mod 32 shows. Figures 7 and 8 and the
speed-up use the mean-for-mode application.

A variant measured at a few K only (say warpscan at 4 K of the 256 in Figure 7's grid)
is drawn as markers with no line, so no line suggests data between the points that were
not measured. On the GPU Algorithm 1's time spikes at K = 32k, so a speed-up read at
K = 1024 alone overstates it: speedup_summary gives it next to K = 1020 and the median
over the last period of K mod 32, 993 <= K <= 1024.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from functools import partial, reduce
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MultipleLocator

from bench.figures import caption, newest_run, per_setting, save, save_text, setting_stem

LABELS = {
    "alg1": "Algorithm 1 (baseline)",
    "alg4": "Algorithm 4 (register transpose)",
    "alg7": "Algorithm 7 (butterfly)",
}
PANELS = {"f32": ("a", "32-bit"), "f64": ("b", "64-bit")}
ZOOM_K = (480, 544)
ZOOM_VARIANTS = ("alg4", "alg7")
# Keys shown on the axes or by the panel; any other key that varies splits the figure.
DRAWN_KEYS = ("suite", "K", "precision")
# A variant is drawn as a line when its typical step in K (the median gap between the
# K it was measured at) is at most LINE_STEP times that of the panel's densest variant,
# and otherwise as markers alone; a line is broken where a gap exceeds BREAK_GAP steps.
LINE_STEP = 1.5
BREAK_GAP = 4
SPARSE_NOTE = "(measured K only)"
SPEEDUP_VARIANTS = ("alg4", "alg7", "warpscan", "segscan")
# The last period of Algorithm 1's K mod 32 spike at the top of the sweep.
SPEEDUP_WINDOW = (993, 1024)
SPEEDUP_POINTS = (1020, 1024)


def render_figures(df: pd.DataFrame, meta: dict, outdir: Path) -> list[Path]:
    """Write whichever of fig6, fig7a/7b, fig8a/8b and the speed-up have data, from the
    iteration count most rows of each precision were measured at (the sweeps'; on a tie
    the larger), and the table comparing iteration counts where a K has several; return
    the files written."""
    written = []
    if "iterations" in df and df["iterations"].nunique() > 1:
        written += _iterations_table(df, meta, outdir)
        sweeps = df.groupby("precision")["iterations"].agg(lambda counts: counts.mode().iloc[-1])
        df = df[df["iterations"] == df["precision"].map(sweeps)]
    if "update" in df and df["update"].nunique() > 1:
        fig6 = df[(df["K"] % 32 == 16) & (df["K"] <= 240) & df["variant"].isin(["alg1", "alg7"])]
        if fig6["update"].nunique() > 1:
            written += _figures(fig6, meta, outdir, "fig6-butterfly-application-variants",
                                "Figure 6: four application variants, with (solid) and without (dashed) butterfly",
                                _figure6, drawn=("update", "precision"))
            if "draw_z_s" in fig6 and {"alg1", "alg7"} <= set(fig6["variant"]):
                written += _figures(fig6, meta, outdir, "fig6-phases", "Figure 6 by phase", _figure6_phases,
                                    drawn=("update", "precision"), min_k=1)
        df = df[df["update"] == "mfm"]
    # The paper's Figure 7 grid is K = 4k + 4; a dense zoom sweep stored alongside
    # would otherwise draw a finer-grained stretch into it.
    grid = df[df["K"] % 4 == 0]
    if {"alg1", "alg4", "alg7"} <= set(grid["variant"]):
        written += _figures(grid, meta, outdir, "speedup-over-alg1",
                            "Speed-up over Algorithm 1, whole application",
                            _speedup, drawn=("precision",))
    for precision, (panel, bits) in PANELS.items():
        written += _figures(
            grid[grid["precision"] == precision], meta, outdir,
            f"fig7{panel}-time-vs-k-{precision}",
            f"Figure 7({panel}): complete LDA application, {bits} intermediate values",
            partial(_figure, zoom=False),
        )
        data = df[(df["precision"] == precision) & df["K"].between(*ZOOM_K) & df["variant"].isin(ZOOM_VARIANTS)]
        written += _figures(
            data, meta, outdir,
            f"fig8{panel}-zoom-{ZOOM_K[0]}-{ZOOM_K[1]}-{precision}",
            f"Figure 8({panel}): {ZOOM_K[0]} ≤ K ≤ {ZOOM_K[1]}, {bits} intermediate values",
            partial(_figure, zoom=True),
        )
    return written


def _step(ks: Iterable[int]) -> float:
    """The median gap between consecutive K; infinite for fewer than two K."""
    ks = sorted(set(ks))
    return float(pd.Series(ks).diff().median()) if len(ks) > 1 else math.inf


def reference_step(ks: Mapping[Hashable, Iterable[int]]) -> float:
    """The typical K step of the densest series (the one measured at the most K)."""
    sets = [set(values) for values in ks.values()]
    return _step(max(sets, key=len)) if sets else math.inf


def line_series(ks: Mapping[Hashable, Iterable[int]]) -> set:
    """Which of the series (name -> the K it was measured at) to draw as lines: those
    measured on nearly the same K grid as the densest series, that is with a typical
    step no more than LINE_STEP times its step.  A sweep cut short still is a line over
    the part that was run; a variant measured at a few chosen K (warpscan at 64, 256,
    512, 1024 against a step-4 sweep) is drawn as markers, not joined up across the K
    it skipped.
    """
    reference = reference_step(ks)
    return {name for name, values in ks.items() if _step(values) <= LINE_STEP * reference}


def _break_gaps(points: pd.DataFrame, max_gap: float) -> pd.DataFrame:
    """points (indexed by K) with a row of NaN inside every gap wider than max_gap, so a
    line drawn through them stops there instead of bridging K that were not measured."""
    ks = points.index.to_numpy()
    holes = [(a + b) / 2 for a, b in zip(ks, ks[1:]) if b - a > max_gap]
    if not holes:
        return points
    return pd.concat([points, pd.DataFrame(math.nan, index=holes, columns=points.columns)]).sort_index()


def _mark_alone(ax, values: pd.Series, **style) -> None:
    """Mark the K of a line broken by _break_gaps that have no measured neighbour: a line
    through one point draws nothing, and a K measured there would not show."""
    measured = values.notna()
    alone = values[measured & ~(measured.shift(1, fill_value=False) | measured.shift(-1, fill_value=False))]
    if len(alone):
        ax.plot(alone.index, alone.values, linestyle="none", markersize=3, **style)


def zoom_note(df: pd.DataFrame) -> str | None:
    """None when Algorithms 4 and 7 were each measured at every K of the zoom (the
    paper's Figure 8); otherwise a note of how sparse the data drawn there is."""
    every = set(range(ZOOM_K[0], ZOOM_K[1] + 1))
    measured = {v: set(df.loc[df["variant"] == v, "K"].astype(int)) & every for v in ZOOM_VARIANTS}
    if all(every <= ks for ks in measured.values()):
        return None
    ks = sorted(set().union(*measured.values()))
    step = reduce(math.gcd, (b - a for a, b in zip(ks, ks[1:])), 0)
    on_grid = set(range(ks[0], ks[-1] + 1, step)) if step else set(ks)
    if step > 1 and ks[0] - ZOOM_K[0] < step and ZOOM_K[1] - ks[-1] < step \
            and all(on_grid <= m for m in measured.values()):
        sparsity = f"K step {step}"
    else:
        sparsity = " and ".join(f"{v} at {len(m)} of {len(every)} K" for v, m in measured.items())
    return f"{sparsity}: not the paper's every-K zoom"


# The columns that identify a measured point: the harness' and the lda suite's axes.
POINT_KEYS = ("suite", "backend", "dataset", "scale", "update", "W", "precision", "K", "iterations")


def _point_keys(df: pd.DataFrame) -> list[str]:
    return [k for k in POINT_KEYS if k in df]


def _figures(df: pd.DataFrame, meta: dict, outdir: Path, stem: str, title: str, draw, drawn=(),
             min_k: int = 2) -> list[Path]:
    """One figure per combination of the keys that vary and `draw` does not show
    (never averaged over them), where at least min_k K were measured (one K draws no
    line: its numbers are in the CSV).  The stem gets a suffix naming the combination
    only when there are several."""
    if df.empty:
        return []
    shown = (*DRAWN_KEYS, *drawn)
    written = []
    for setting, subset in per_setting(df, [k for k in _point_keys(df) if k not in shown]):
        if subset["K"].nunique() < min_k:
            continue
        subtitle = ", ".join(f"{k}={v}" for k, v in setting.items())
        written += draw(subset, meta, outdir, setting_stem(stem, setting),
                        f"{title}\n({subtitle})" if setting else title)
    return written


def _colours(variants: Iterable[str]) -> dict[str, str]:
    """The paper's algorithms and ours first, each in the same colour in every figure."""
    fixed = [*LABELS, "warpscan", "pairscan", "segscan"]
    return {v: f"C{i}" for i, v in enumerate([*fixed, *sorted(set(variants) - set(fixed))])}


def _figure(df: pd.DataFrame, meta: dict, outdir: Path, stem: str, title: str, zoom: bool) -> list[Path]:
    fig = Figure(figsize=(7, 4.5))
    ax = fig.add_subplot()
    stats = df.groupby(["variant", "K"])["seconds"].agg(["median", "min", "max"])
    variants = set(df["variant"])
    colours = _colours(variants)
    ks = {v: stats.loc[v].index for v in variants}
    lines, max_gap = line_series(ks), BREAK_GAP * reference_step(ks)
    for variant in (v for v in colours if v in variants):
        points = stats.loc[variant]
        label = LABELS.get(variant, variant)
        if variant in lines:
            points = _break_gaps(points, max_gap)
            ax.plot(points.index, points["median"], color=colours[variant], marker="o" if zoom else None,
                    markersize=3, linewidth=1, label=label)
            if not zoom:  # the zoom marks every point
                _mark_alone(ax, points["median"], color=colours[variant], marker="o")
            ax.fill_between(points.index, points["min"], points["max"], color=colours[variant], alpha=0.2,
                            linewidth=0)
        else:
            ax.plot(points.index, points["median"], color=colours[variant], marker="o", markersize=4,
                    linestyle="none", label=f"{label} {SPARSE_NOTE}")
            ax.vlines(points.index, points["min"], points["max"], color=colours[variant], alpha=0.5, linewidth=1)
    note = zoom_note(df) if zoom else None
    if zoom:
        ax.xaxis.set_major_locator(MultipleLocator(8))
        ax.xaxis.set_minor_locator(MultipleLocator(1 if note is None else 4))
        if note:
            title += f"\n({note})"
    else:
        ax.set_ylim(bottom=0)
    ax.set_xlabel("K (number of topics)")
    ax.set_ylabel("Execution time, whole application (s)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    text = caption(meta, df) + "\nLines: median over repeats; bands: fastest to slowest repeat."
    if len(lines) < len(variants):
        text += f" Variants marked {SPARSE_NOTE}: points at the K measured, bars: fastest to slowest repeat."
    if note:
        text += f"\n{note[0].upper()}{note[1:]}; the sawtooth in K mod 32 is sampled, not traced point by point."
    return save(fig, outdir, stem, text)


def _figure6(df: pd.DataFrame, meta: dict, outdir: Path, stem: str, title: str) -> list[Path]:
    """Time against K = 32k + 16 for each application variant, with and without the butterfly."""
    fig = Figure(figsize=(7, 4.5))
    ax = fig.add_subplot()
    stats = df.groupby(["update", "precision", "variant", "K"])["seconds"].median()
    for i, ((update, precision), lines) in enumerate(stats.groupby(level=["update", "precision"])):
        name = {"mfm": "mean-for-mode", "dirichlet": "Dirichlet-sampled"}.get(update, update)
        for variant, style in (("alg1", "--"), ("alg7", "-")):
            if variant in lines.index.get_level_values("variant"):
                points = lines.xs(variant, level="variant").droplevel(["update", "precision"])
                ax.plot(points.index, points.values, style, color=f"C{i}", marker="o", markersize=3, linewidth=1,
                        label=f"{name}, {precision}, {'butterfly (Alg. 7)' if variant == 'alg7' else 'Alg. 1'}")
    ax.set_xticks(sorted(df["K"].unique()))
    ax.set_ylim(bottom=0)
    ax.set_xlabel("K (number of topics)")
    ax.set_ylabel("Execution time, whole application (s)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, ncol=2)
    return save(fig, outdir, stem, caption(meta, df) + "\nLines: median over repeats.")


def _speedups(df: pd.DataFrame, by: list[str], value: str = "seconds", reference: str = "alg1") -> pd.Series:
    """The reference variant's time (`value`: the whole run's, or a phase's) over each
    other variant's, the ratio taken within one repeat of one point (the variants run
    interleaved in a group), then the median over the repeats: a Series indexed by
    (*by, K, variant). A repeat is a run's: two runs' groups are never paired."""
    run = ["run_id"] if "run_id" in df and df["run_id"].notna().all() else []
    wide = df.pivot_table(index=[*by, "K", *run, "group", "repeat"], columns="variant", values=value)
    if reference not in wide:
        names = [*by, "K", "variant"]
        return pd.Series(dtype=float, index=pd.MultiIndex.from_arrays([[]] * len(names), names=names))
    ratios = wide.drop(columns=reference).rdiv(wide[reference], axis=0)
    ratios.columns.name = "variant"
    return ratios.stack().dropna().groupby(level=[*by, "K", "variant"]).median()


def _varying_keys(df: pd.DataFrame, shown: tuple[str, ...]) -> list[str]:
    """The point keys other than `shown` that take several values: a table splits by them."""
    return [k for k in _point_keys(df) if k not in shown and df[k].nunique(dropna=False) > 1]


def speedup_summary(df: pd.DataFrame) -> pd.DataFrame:
    """The speed-up over Algorithm 1 (mean-for-mode application) of Algorithms 4 and 7,
    and of warpscan and segscan where measured, near the top of the sweep.

    One row per (any other key that varies, precision, variant); columns: the speed-up
    at K = 1020 and at K = 1024 (Algorithm 1's K mod 32 spike), the median over the K in
    993..1024 that were measured, and how many K that median covers.  Each speed-up is
    the median over repeats of alg1_time / variant_time taken within one (group,
    repeat).  K that were not measured give NaN.
    """
    columns = [f"at_{k}" for k in SPEEDUP_POINTS] + ["window_median", "window_k"]
    if "update" in df:
        df = df[df["update"] == "mfm"]
    others = _varying_keys(df, ("suite", "K", "precision", "update"))
    by = [*others, "precision"]
    variants = [v for v in SPEEDUP_VARIANTS if v in set(df["variant"])]
    if df.empty or not variants:
        names = [*by, "variant"]
        return pd.DataFrame(columns=columns, index=pd.MultiIndex.from_arrays([[]] * len(names), names=names))
    speedups = _speedups(df[df["variant"].isin(["alg1", *variants])], by)
    rows = {}
    for values, _ in df.groupby(by, dropna=False):
        values = values if isinstance(values, tuple) else (values,)
        for variant in variants:
            try:
                series = speedups.xs((*values, variant), level=[*by, "variant"])
            except KeyError:
                series = pd.Series(dtype=float)
            window = series[(series.index >= SPEEDUP_WINDOW[0]) & (series.index <= SPEEDUP_WINDOW[1])].dropna()
            rows[(*values, variant)] = [*(series.get(k, float("nan")) for k in SPEEDUP_POINTS),
                                        window.median() if len(window) else float("nan"), len(window)]
    index = pd.MultiIndex.from_tuples(list(rows), names=[*by, "variant"])
    return pd.DataFrame(list(rows.values()), index=index, columns=columns).astype({"window_k": int})


def _figure6_phases(df: pd.DataFrame, meta: dict, outdir: Path, stem: str, title: str) -> list[Path]:
    """Figure 6's claim (the butterfly over Algorithm 1, the whole application) taken
    apart by phase: per application variant and K, the speed-up of the whole iteration
    and of the draw alone (each ratio within a repeat, median over repeats) and the
    draw's share of Algorithm 1's time. The other phases are the same for both, so the
    whole cannot gain more than the draw does. Each (update, precision, K) from the newest run
    that measured alg1 and alg7 there."""
    by = ["update", "precision"]
    points = (newest_run(at, lambda run: {"alg1", "alg7"} <= set(run["variant"])) for _, at in df.groupby([*by, "K"]))
    df = pd.concat([at for at in points if at is not None])
    whole, draw = (_speedups(df, by, value).xs("alg7", level="variant") for value in ("seconds", "draw_z_s"))
    alg1 = df[df["variant"] == "alg1"].groupby([*by, "K"])[["seconds", "rng_s", "draw_z_s", "counts_s",
                                                              "update_s"]].median()
    table = pd.DataFrame({"alg1 ms a run": alg1["seconds"] * 1e3, "alg1 over alg7, whole": whole,
                          "alg1 over alg7, draw": draw, "draw's share of alg1": alg1["draw_z_s"] / alg1["seconds"],
                          **{f"alg1 {phase} ms": alg1[f"{phase}_s"] * 1e3 for phase in ("rng", "counts", "update")}})
    text = table.reset_index().to_markdown(index=False, floatfmt=".3g")
    return [save_text(outdir, f"{stem}.md", f"{title.replace(chr(10), ' ')}; {caption(meta, df).replace(chr(10), '; ')}"
                      f"\n\n{text}\n\nSpeed-ups: Algorithm 1's seconds over Algorithm 7's, within a repeat, "
                      "median over repeats; the draw's from the phase draw_z.")]


def _iterations_table(df: pd.DataFrame, meta: dict, outdir: Path) -> list[Path]:
    """The figures' short runs against the paper's long ones: at each K measured with
    several iteration counts, every variant's time per iteration and speed-up over
    Algorithm 1 (within a repeat, median over repeats), and Algorithm 4's time over
    Algorithm 7's (ST1/ST2), per iteration count."""
    df = df[df["update"] == "mfm"] if "update" in df else df
    others = _varying_keys(df, ("suite", "K", "precision", "iterations", "update"))
    counts = df.groupby([*others, "precision", "K"])["iterations"].transform("nunique")
    df = df[counts > 1]
    if df.empty:
        return []
    by = [*others, "precision", "K", "iterations"]
    per_iteration = (df.assign(ms=df["seconds"] / df["iterations"] * 1e3)
                     .pivot_table(index=by, columns="variant", values="ms", aggfunc="median")
                     .add_suffix(" ms/it"))
    speedup = _speedups(df, [*others, "precision", "iterations"]).unstack("variant").add_prefix("alg1 over ")
    speedup = speedup.reorder_levels(by) if not speedup.empty else speedup
    table = per_iteration.join(speedup)
    if {"alg4", "alg7"} <= set(df["variant"]):
        alg4_over = _speedups(df, [*others, "precision", "iterations"], reference="alg4")
        table["alg4 over alg7"] = alg4_over.xs("alg7", level="variant").reorder_levels(by)
    table["runs"] = df.groupby(by)["run_id"].agg(lambda runs: ", ".join(sorted(set(runs))))
    text = table.reset_index().to_markdown(index=False, floatfmt=".3g")
    return [save_text(outdir, "lda-iterations.md",
                      f"Time per iteration and speed-ups at several iteration counts; "
                      f"{caption(meta, df).replace(chr(10), '; ')}\n\n{text}\n\n"
                      "Speed-ups: one variant's seconds over another's within a repeat (the variants run "
                      "interleaved), median over repeats. alg4 over alg7 above 1: the butterfly is faster. "
                      "Each row is the newest code's; compare times only between rows of one run.")]


def _ratio(value: float) -> str:
    return "not measured" if pd.isna(value) else f"{value:.2f}"


def _speedup(df: pd.DataFrame, meta: dict, outdir: Path, stem: str, title: str) -> list[Path]:
    """Algorithm 1's time over each other variant's, each ratio taken within one
    repeat of one point (the variants run interleaved), median over repeats."""
    speedup = _speedups(df, ["precision"])
    fig = Figure(figsize=(7, 4.5))
    ax = fig.add_subplot()
    colours = _colours(df["variant"])
    series = {(variant, precision): points.droplevel(["precision", "variant"])
              for (precision, variant), points in speedup.groupby(level=["precision", "variant"])}
    ks = {name: points.index for name, points in series.items()}
    lines, max_gap = line_series(ks), BREAK_GAP * reference_step(ks)
    for variant in (v for v in colours if v != "alg1"):
        for precision, style in (("f32", "-"), ("f64", "--")):
            if (variant, precision) not in series:
                continue
            points = series[(variant, precision)]
            label = f"{LABELS.get(variant, variant)}, {precision}"
            if (variant, precision) in lines:
                points = _break_gaps(points.to_frame(), max_gap).iloc[:, 0]
                ax.plot(points.index, points.values, style, color=colours[variant], linewidth=1, label=label)
                _mark_alone(ax, points, color=colours[variant], marker="o" if precision == "f32" else "s")
            else:
                ax.plot(points.index, points.values, color=colours[variant], linestyle="none",
                        marker="o" if precision == "f32" else "s", markersize=4, label=f"{label} {SPARSE_NOTE}")
    ax.axhline(1, color="0.5", linewidth=0.8)
    ax.axvspan(SPEEDUP_WINDOW[0] - 0.5, SPEEDUP_WINDOW[1] + 0.5, color="0.85", alpha=0.6, linewidth=0, zorder=0,
               label=f"K {SPEEDUP_WINDOW[0]}..{SPEEDUP_WINDOW[1]} (caption: medians)")
    ax.set_xlabel("K (number of topics)")
    ax.set_ylabel("Speed-up over Algorithm 1 (time ratio)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)  # beside: no point hidden
    summary = speedup_summary(df)
    window = "; ".join(
        f"{precision} {variant} {_ratio(row.window_median)} over {row.window_k} K"
        f" (K=1020: {_ratio(row.at_1020)}, K=1024: {_ratio(row.at_1024)})"
        for (*_, precision, variant), row in zip(summary.index, summary.itertuples(index=False))
    )
    text = (caption(meta, df)
            + "\nLines: median over repeats of the ratio within each repeat (variants run interleaved)."
            + f"\nShaded, {SPEEDUP_WINDOW[0]} ≤ K ≤ {SPEEDUP_WINDOW[1]}: median over the K measured there, a whole"
            + " period of K mod 32 (K = 1024 alone can sit on Algorithm 1's K = 32k spike), with K = 1020 and"
            + f" K = 1024 in brackets: {window or 'no data'}.")
    return save(fig, outdir, stem, text)
