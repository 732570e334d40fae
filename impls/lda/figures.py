"""The lda suite's figures: Figures 6, 7 and 8 of the butterfly paper (PPoPP 2017,
section 7), and the speed-up over Algorithm 1.

Figure 6: K = 32k + 16, the four application variants (mean-for-mode or Dirichlet-sampled
theta and phi, each in 32- and 64-bit), each with Algorithm 1 and with Algorithm 7.
Figure 7: whole-application time against K, one panel per precision of the intermediate
values (a: 32-bit, b: 64-bit). Figure 8: the same for 480 <= K <= 544, Algorithms 4 and
7 only, every point marked so the sawtooth in K mod 32 shows. Figures 7 and 8 and the
speed-up use the mean-for-mode application.
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MultipleLocator

from bench.figures import caption, save
from bench.results import key_columns

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


def render_figures(df: pd.DataFrame, meta: dict, outdir: Path) -> list[Path]:
    """Write whichever of fig6, fig7a/7b, fig8a/8b and the speed-up have data; return the files written."""
    written = []
    if "update" in df and df["update"].nunique() > 1:
        fig6 = df[(df["K"] % 32 == 16) & (df["K"] <= 240) & df["variant"].isin(["alg1", "alg7"])]
        if fig6["update"].nunique() > 1:
            written += _figures(fig6, meta, outdir, "fig6-butterfly-application-variants",
                                "Figure 6: four application variants, with (solid) and without (dashed) butterfly",
                                _figure6, drawn=("update", "precision"))
        df = df[df["update"] == "mfm"]
    # The paper's Figure 7 grid is K = 4k + 4; a dense zoom sweep stored alongside
    # would otherwise draw a finer-grained stretch into it.
    grid = df[df["K"] % 4 == 0]
    if {"alg1", "alg4", "alg7"} <= set(grid["variant"]):
        written += _figures(grid, meta, outdir, "speedup-over-alg1",
                            "Speed-up of Algorithms 4 and 7 over Algorithm 1, whole application",
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


def _figures(df: pd.DataFrame, meta: dict, outdir: Path, stem: str, title: str, draw, drawn=()) -> list[Path]:
    """One figure per combination of the keys that vary and `draw` does not show
    (never averaged over them).  The stem gets a suffix naming the combination
    only when there are several."""
    if df.empty:
        return []
    shown = (*DRAWN_KEYS, *drawn)
    split = [k for k in key_columns(df.columns) if k not in shown and df[k].nunique(dropna=False) > 1]
    if not split:
        return draw(df, meta, outdir, stem, title)
    written = []
    for values, subset in df.groupby(split, dropna=False):
        setting = dict(zip(split, values))
        suffix = re.sub(r"[^A-Za-z0-9.]+", "-", "-".join(f"{k}-{v}" for k, v in setting.items()))
        subtitle = ", ".join(f"{k}={v}" for k, v in setting.items())
        written += draw(subset, meta, outdir, f"{stem}-{suffix}", f"{title}\n({subtitle})")
    return written


def _figure(df: pd.DataFrame, meta: dict, outdir: Path, stem: str, title: str, zoom: bool) -> list[Path]:
    fig = Figure(figsize=(7, 4.5))
    ax = fig.add_subplot()
    stats = df.groupby(["variant", "K"])["seconds"].agg(["median", "min", "max"])
    # The paper's algorithms first, each in the same colour in every figure.
    variants = set(df["variant"])
    colours = {v: f"C{i}" for i, v in enumerate([*LABELS, *sorted(variants - set(LABELS))])}
    for variant in (v for v in colours if v in variants):
        points = stats.loc[variant]
        ax.plot(
            points.index, points["median"], color=colours[variant], marker="o" if zoom else None,
            markersize=3, linewidth=1, label=LABELS.get(variant, variant),
        )
        ax.fill_between(points.index, points["min"], points["max"], color=colours[variant], alpha=0.2, linewidth=0)
    if zoom:
        ax.xaxis.set_major_locator(MultipleLocator(8))
        ax.xaxis.set_minor_locator(MultipleLocator(1))
    else:
        ax.set_ylim(bottom=0)
    ax.set_xlabel("K (number of topics)")
    ax.set_ylabel("Execution time, whole application (s)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, outdir, stem, caption(meta, df) + "\nLines: median over repeats; bands: fastest to slowest repeat.")


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


def _speedup(df: pd.DataFrame, meta: dict, outdir: Path, stem: str, title: str) -> list[Path]:
    """Algorithm 1's time over Algorithms 4's and 7's, each ratio taken within one
    repeat of one point (the variants run interleaved), median over repeats."""
    wide = df.pivot_table(index=["precision", "K", "group", "repeat"], columns="variant", values="seconds")
    fig = Figure(figsize=(7, 4.5))
    ax = fig.add_subplot()
    for variant, colour in (("alg4", "C1"), ("alg7", "C2")):
        speedup = (wide["alg1"] / wide[variant]).dropna().groupby(["precision", "K"]).median()
        for precision, style in (("f32", "-"), ("f64", "--")):
            if precision in speedup.index.get_level_values("precision"):
                points = speedup.xs(precision, level="precision")
                ax.plot(points.index, points.values, style, color=colour, linewidth=1,
                        label=f"{LABELS[variant]}, {precision}")
    ax.axhline(1, color="0.5", linewidth=0.8)
    ax.set_xlabel("K (number of topics)")
    ax.set_ylabel("Speed-up over Algorithm 1 (time ratio)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, outdir, stem, caption(meta, df)
                + "\nLines: median over repeats of the ratio within each repeat (variants run interleaved).")
