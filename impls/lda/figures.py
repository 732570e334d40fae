"""The lda suite's figures: Figures 7 and 8 of the butterfly paper (PPoPP 2017, section 7).

Figure 7: whole-application time against K, one panel per precision of the intermediate
values (a: 32-bit, b: 64-bit). Figure 8: the same for 480 <= K <= 544, Algorithms 4 and
7 only, every point marked so the sawtooth in K mod 32 shows.
"""

from __future__ import annotations

import re
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
    """Write whichever of fig7a/7b/8a/8b have data; return the files written."""
    written = []
    for precision, (panel, bits) in PANELS.items():
        data = df[df["precision"] == precision]
        # The paper's Figure 7 grid is K = 4k + 4; a dense zoom sweep stored alongside
        # would otherwise draw a finer-grained stretch into it.
        written += _figures(
            data[data["K"] % 4 == 0], meta, outdir,
            stem=f"fig7{panel}-time-vs-k-{precision}",
            title=f"Figure 7({panel}): complete LDA application, {bits} intermediate values",
            zoom=False,
        )
        written += _figures(
            data[data["K"].between(*ZOOM_K) & data["variant"].isin(ZOOM_VARIANTS)], meta, outdir,
            stem=f"fig8{panel}-zoom-{ZOOM_K[0]}-{ZOOM_K[1]}-{precision}",
            title=f"Figure 8({panel}): {ZOOM_K[0]} ≤ K ≤ {ZOOM_K[1]}, {bits} intermediate values",
            zoom=True,
        )
    return written


def _figures(df: pd.DataFrame, meta: dict, outdir: Path, stem: str, title: str, zoom: bool) -> list[Path]:
    """One figure per combination of the other keys that vary (never averaged over them).

    The stem gets a suffix naming the combination only when there are several.
    """
    if df.empty:
        return []
    split = [k for k in key_columns(df.columns) if k not in DRAWN_KEYS and df[k].nunique(dropna=False) > 1]
    if not split:
        return _figure(df, meta, outdir, stem, title, zoom)
    written = []
    for values, subset in df.groupby(split, dropna=False):
        setting = dict(zip(split, values))
        suffix = re.sub(r"[^A-Za-z0-9.]+", "-", "-".join(f"{k}-{v}" for k, v in setting.items()))
        subtitle = ", ".join(f"{k}={v}" for k, v in setting.items())
        written += _figure(subset, meta, outdir, f"{stem}-{suffix}", f"{title}\n({subtitle})", zoom)
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
