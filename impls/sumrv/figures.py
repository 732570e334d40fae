"""The sumrv figures: time against n at m = n (every variant), the speed-up of ours
(strip) over every other variant, and ours' fraction of the peak over (m, n); the method
auto ran at each shape (a table); and the summary table of the README."""

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from bench.figures import (caption, each_variants_newest_run, newest_run, per_setting, plain_log_labels, save,
                           save_text, setting_stem)
from bench.results import key_columns

OURS = "strip"


def _settings(df: pd.DataFrame, meta: dict, drop=("m", "n")):
    keys = [k for k in key_columns(meta["schema"]) if k not in drop and k in df]
    return per_setting(df, keys, always=("batch", "precision", "space"))


def _title(text: str, setting: dict) -> str:
    return text + " (" + ", ".join(f"{k}={v}" for k, v in setting.items()) + ")"


def speedups(df: pd.DataFrame, over: str = OURS) -> pd.DataFrame:
    """Per point and variant, the median over repeats of variant time / `over`'s time,
    each ratio taken within one measured repeat (columns: the point's keys, variant, speedup)."""
    keys = ["group", "repeat"]
    ours = df[df["variant"] == over][[*keys, "seconds"]].rename(columns={"seconds": "ours"})
    pairs = df[df["variant"] != over].merge(ours, on=keys)
    pairs["speedup"] = pairs["seconds"] / pairs["ours"]
    point = [c for c in df.columns if c in ("m", "n", "batch", "precision", "space", "backend")]
    return pairs.groupby([*point, "variant"], dropna=False)["speedup"].median().reset_index()


def render_figures(df: pd.DataFrame, meta: dict, outdir: Path) -> list[Path]:
    written = []
    square = df[df["m"] == df["n"]]
    for setting, subset in _settings(square, meta):
        if subset["n"].nunique() < 2:
            continue
        fig = Figure(figsize=(7, 4.5))
        ax = fig.add_subplot()
        for i, (variant, rows) in enumerate(subset.groupby("variant")):
            stats = rows.groupby("n")["call_s"].agg(["median", "min", "max"])
            style = {"color": f"C{i}", "linewidth": 1.5 if variant == OURS else 1}
            ax.plot(stats.index, stats["median"], marker="o", markersize=3, label=variant, **style)
            ax.fill_between(stats.index, stats["min"], stats["max"], color=style["color"], alpha=0.2, linewidth=0)
        ax.set(xscale="log", yscale="log", xlabel="m = n", ylabel="seconds per call (one batch)")
        plain_log_labels(ax.xaxis, subset["n"].unique())
        ax.set_title(_title("Distribution of x + y: time per batch", setting), fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
        written += save(fig, outdir, setting_stem("sumrv-time-vs-n", setting),
                        caption(meta, subset) + "\nLines: median over repeats; bands: fastest to slowest repeat.")
        if OURS not in set(subset["variant"]):
            continue
        fig = Figure(figsize=(7, 4.5))
        ax = fig.add_subplot()
        for i, (variant, rows) in enumerate(speedups(subset).groupby("variant")):
            rows = rows.sort_values("n")
            ax.plot(rows["n"], rows["speedup"], marker="o", markersize=3, label=f"over {variant}", color=f"C{i}")
        ax.axhline(1, color="0.5", linewidth=0.8)
        ax.set(xscale="log", yscale="log", xlabel="m = n", ylabel=f"time of the variant / time of {OURS}")
        plain_log_labels(ax.xaxis, subset["n"].unique())
        ax.set_title(_title(f"Speed-up of {OURS} over each variant", setting), fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
        written += save(fig, outdir, setting_stem("sumrv-speedup", setting),
                        caption(meta, subset) + "\nEach point: the median over repeats of the ratio of the two "
                        "times measured in the same repeat; above 1, ours is faster.")

    # Linear space only: older runs gave log-space rows a fraction of an exp rate, which bounds nothing.
    ours = df[(df["variant"] == OURS) & df["peak_frac"].notna()] if "peak_frac" in df else df.iloc[:0]
    ours = ours[ours["space"] == "lin"] if "space" in ours else ours
    for setting, subset in _settings(ours, meta):
        if len(subset[["m", "n"]].drop_duplicates()) <= subset["m"].nunique():
            continue  # m = n only: the time and speed-up figures show it
        grid = subset.groupby(["m", "n"])["peak_frac"].median().unstack("n")
        fig = Figure(figsize=(6, 5))
        ax = fig.add_subplot()
        image = ax.imshow(grid.values, origin="lower", cmap="viridis", vmin=0, vmax=max(1.0, np.nanmax(grid.values)))
        ax.set_xticks(range(len(grid.columns)), [str(c) for c in grid.columns])
        ax.set_yticks(range(len(grid.index)), [str(i) for i in grid.index])
        for (row, col), value in np.ndenumerate(grid.values):
            if np.isfinite(value):
                ax.text(col, row, f"{value:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if value < 0.5 else "black")
        ax.set(xlabel="n", ylabel="m")
        ax.set_title(_title(f"{OURS}: fraction of the FMA peak", setting), fontsize=10)
        fig.colorbar(image, ax=ax, shrink=0.8)
        written += save(fig, outdir, setting_stem("sumrv-peak-fraction", setting),
                        caption(meta, subset) + "\nCells: median over repeats of achieved over the FMA peak of "
                        "the precision, measured by a peak kernel in the same process.")
    return written + auto_choice_table(df, meta, outdir)


def auto_choice_table(df: pd.DataFrame, meta: dict, outdir: Path) -> list[Path]:
    """sumrv-auto-choice.md: auto_points as a table, where auto's choice was recorded."""
    points = auto_points(df)
    if not points["auto ran"].notna().any():
        return []
    return [save_text(outdir, "sumrv-auto-choice.md", "What auto ran, by shape; "
                      + caption(meta, df[df["variant"] == "auto"]).replace("\n", "; ") + "\n\n"
                      + points.drop(columns="absent").fillna("").to_markdown(index=False, floatfmt=".4g")
                      + "\n\nAt each point the newest run that measured every variant measured there: median calls "
                      "over its repeats; auto over its fastest rival, the median over repeats of the ratio within a "
                      "repeat (the auto-fastest claim). Rivals: every other GPU variant; in log space only those "
                      "whose error is componentwise. auto's plans launch with less host work than the variants, so "
                      "where a call is its host's time auto may run a method that, as a variant, is not the "
                      "fastest.")]


AUTO_KEYS = ["space", "precision", "batch", "m", "n"]


def auto_points(df: pd.DataFrame) -> pd.DataFrame:
    """At every point where auto ran on the GPU, from the newest run that measured there every
    variant measured there at all (else the newest with auto; `absent` names the others): the
    method auto ran (where recorded), auto's median call, its fastest rival (the lowest median
    call) and that median, and auto over the fastest rival: per repeat where auto and every
    rival ran, auto over that repeat's fastest rival, the median of those ratios (a host that
    slows for a while slows a repeat's variants together). The rivals: every other GPU variant in
    linear space; in log space those whose error is componentwise (an FFT through a shift by each
    vector's maximum loses the small outputs): faster ones there are named apart (faster
    non-rivals)."""
    from impls.sumrv.suite import componentwise  # the suite imports this module through its recipes

    columns = [*AUTO_KEYS, "auto ran", "auto us", "fastest rival", "its us", "auto over rival",
               "faster non-rivals", "absent"]
    if df.empty or "auto" not in set(df["variant"]):
        return pd.DataFrame(columns=columns)
    gpu = df[df["device"] == "gpu"]
    rows = []
    for key, at in gpu.groupby(AUTO_KEYS):
        table = at.pivot_table(index=["run_id", "repeat"], columns="variant", values="call_s")
        if "auto" not in table:
            continue
        by_run = {run_id: run.dropna(axis=1, how="all")
                  for run_id, run in table.dropna(subset=["auto"]).groupby(level="run_id")}
        every = set().union(*map(set, by_run.values()))
        complete = [run_id for run_id, run in by_run.items() if set(run) == every]  # by run_id: the newest last
        run_id = complete[-1] if complete else max(by_run)
        times = by_run[run_id]
        log = key[0] == "log"
        others = [v for v in times if v != "auto"]
        rivals = [v for v in others if not log or componentwise(v, log)]
        faster = {v: ratio for v in others if v not in rivals
                  if (ratio := float((times["auto"] / times[v]).median())) > 1}
        chose = at.loc[(at["variant"] == "auto") & (at["run_id"] == run_id), "auto_choice"].dropna() \
            if "auto_choice" in at else pd.Series(dtype=object)  # results before it was recorded lack it
        row = {**dict(zip(AUTO_KEYS, key)), "auto ran": chose.mode().iloc[0] if len(chose) else None,
               "auto us": times["auto"].median() * 1e6,
               "faster non-rivals": ", ".join(f"{v} {r:.2f}x" for v, r in faster.items()) or None,
               "absent": None if complete else ", ".join(sorted(every - set(times)))}
        paired = times.dropna(subset=["auto", *rivals])  # a resumed run may lack a rival at a repeat
        if rivals and not paired.empty:
            fastest = paired[rivals].median().idxmin()  # the lowest median, the time shown beside it
            row.update({"fastest rival": fastest, "its us": times[fastest].median() * 1e6,
                        "auto over rival": float((paired["auto"] / paired[rivals].min(axis=1)).median())})
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def one_run_a_point(df: pd.DataFrame, point: list[str]) -> pd.DataFrame:
    """Each point's rows from the newest run that measured there every variant measured there at
    all, so that variants are compared within a run; where no run did, each variant's newest run."""
    if df.empty or "run_id" not in df:
        return df
    chosen = []
    for _, at in df.groupby(point, dropna=False):
        whole = newest_run(at, lambda run: run["variant"].nunique() == at["variant"].nunique())
        chosen.append(whole if whole is not None else each_variants_newest_run(at))
    return pd.concat(chosen)


def summary(df: pd.DataFrame, sizes=(32, 256, 1024, 4096)) -> pd.DataFrame:
    """At m = n in `sizes`, each point from one run (one_run_a_point): each variant's median time
    (us), GFLOP/s and (linear space) fraction of the FMA peak."""
    rows = df[(df["m"] == df["n"]) & df["n"].isin(sizes)]
    if "peak_frac" in rows and "space" in rows:  # older runs gave log space a fraction of an exp rate
        rows = rows.assign(peak_frac=rows["peak_frac"].where(rows["space"] == "lin"))
    rows = one_run_a_point(rows, [c for c in ("space", "precision", "batch", "m", "n") if c in rows])
    keys = [c for c in ("space", "precision", "batch", "n", "variant") if c in rows]
    table = rows.groupby(keys, dropna=False).agg(us=("call_s", "median"), gflops=("gflops", "median"),
                                                 peak_frac=("peak_frac", "median"),
                                                 max_rel_error=("max_rel_error", "max"))
    table["us"] *= 1e6
    return table.reset_index()
