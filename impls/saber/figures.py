"""The saber figures: the paper's Figure 9 (time per phase of each stage, stacked, with
the paper's stage-to-stage changes beside ours), Figure 10 (throughput against chunks,
workers and threads per block), Table 2 (the bytes of each array against K, the
paper's PubMed numbers beside ours) and the scaling over several GPUs."""

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from bench.figures import (caption, each_variants_newest_run, newest_run, per_setting, plain_log_labels, save,
                           save_text, setting_stem)
from bench.results import key_columns

# G4 overlaps its chunks' phases; a replayed graph holds an iteration's phases (after its capture)
PHASES = ("sample", "rebuild", "preprocess", "transfer", "overlapped", "reduce", "graph", "capture")
# The paper's Sec. 4.1 (NYTimes, K = 1000, GTX 1080): (what, stage, over stage, phase or None for the total, change)
CLAIMS = (("SL1 PDOW: sampling", "G1", "G0", "sample", -0.40),
          ("SL2 tree: pre-processing", "G2", "G1", "preprocess", -0.98),
          ("SL3 SSC: rebuilding A", "G3", "G2", "rebuild", -0.89),
          ("SL4 workers: total", "G4", "G3", None, -0.123),
          ("SL5 G4 over G0: total", "G4", "G0", None, 1 / 2.9 - 1))


# Table 2 (PubMed, V = 141k, T = 738M, D = 8.2M), GB by K; L and A sparse do not depend on K.
MEMORY = (("bytes_b", "B + B^"), ("bytes_structures", "trees / alias tables"), ("bytes_l", "L (tokens)"),
          ("bytes_a", "A sparse"), ("bytes_a_dense", "A dense (computed)"), ("bytes_device", "device held"))
PAPER_TABLE2 = {"bytes_b": {100: 0.108, 1000: 1.08, 10_000: 10.8}, "bytes_l": {100: 8.65, 1000: 8.65, 10_000: 8.65},
                "bytes_a": {100: 5.8, 1000: 5.8, 10_000: 5.8}, "bytes_a_dense": {100: 3.2, 1000: 32, 10_000: 320}}


def stage_changes(rows: pd.DataFrame) -> list[tuple[str, float, float]]:
    """(claim, paper's change, ours) for the claims whose two stages were measured: the
    median over repeats of the ratio of the two stages' times in the same repeat, minus 1."""
    changes = []
    for what, stage, base, phase, paper in CLAIMS:
        column = f"{phase}_s" if phase else "seconds"
        times = rows.pivot_table(column, ["run_id", "group", "repeat"], "variant")
        if stage in times and base in times:
            changes.append((what, paper, float((times[stage] / times[base]).median() - 1)))
    return changes


def render_figures(df: pd.DataFrame, meta: dict, outdir: Path) -> list[Path]:
    written = []
    keys = [k for k in key_columns(meta["schema"]) if k in df]
    for setting, rows in per_setting(df, keys, always=("dataset", "K")):
        stages = sorted(rows["variant"].unique())
        if len(stages) < 2:  # a stage alone: its phases are in the CSV, Figure 9 compares stages
            continue
        phases = [p for p in PHASES if f"{p}_s" in rows and rows[f"{p}_s"].any()]
        per_iteration = rows.groupby("variant")[[f"{p}_s" for p in phases]].median() / rows["iterations"].iloc[0]
        fig = Figure(figsize=(8, 4.5))
        ax = fig.add_subplot()
        bottom = np.zeros(len(stages))
        for phase in phases:
            values = per_iteration.loc[stages, f"{phase}_s"].to_numpy()
            ax.bar(stages, values, bottom=bottom, label=phase, color=f"C{PHASES.index(phase)}")
            bottom += values
        ax.set(ylabel="seconds per iteration (median over repeats)")
        ax.set_title("Figure 9: time per phase by stage (" + ", ".join(f"{k}={v}" for k, v in setting.items()) + ")",
                     fontsize=10)
        ax.legend(fontsize=8, loc="lower right")
        ax.grid(alpha=0.3, axis="y")
        changes = "; ".join(f"{what} paper {paper:+.0%}, ours {ours:+.0%}" for what, paper, ours in stage_changes(rows))
        written += save(fig, outdir, setting_stem("fig9-phases-by-stage", setting),
                        caption(meta, rows) + f"\n{changes}\n(each ours: the median over repeats of the ratio of the "
                        "two stages' times measured in the same repeat, minus 1)")
    keys_but_k = [k for k in keys if k != "K"]
    for setting, rows in per_setting(df, keys_but_k, always=("dataset",)):
        if rows["K"].nunique() > 1:
            written += _memory_figure(rows, setting, meta, outdir)
    return written + _tuning_figure(df, keys, meta, outdir) + _gpus_figure(df, keys, meta, outdir)


def corpus_label(setting) -> str:
    """A setting's corpus in words: its name, and its scale where not the full size."""
    scale = setting.get("scale", 1.0)
    return setting["dataset"] + ("" if scale == 1 else f" at {scale:g}")


def _gpus_figure(df: pd.DataFrame, keys: list, meta: dict, outdir: Path) -> list[Path]:
    """Tokens/s against the number of GPUs, a line per setting and stage where gpus took
    several values, beside perfect scaling from one GPU; and the table of speed-ups
    (medians over repeats, the GPU counts measured in the same run)."""
    df = df[df["backend"] == "gpu"]  # the CPU twins ignore gpus
    if "gpus" not in df or df["gpus"].nunique() < 2:
        return []
    fixed = [k for k in keys if k != "gpus"]
    lines = []
    for name, line in df.groupby([*fixed, "variant"], dropna=False):
        line = newest_run(line, lambda run: run["gpus"].nunique() > 1)  # its speed-ups are one run's
        if line is not None:
            lines.append((dict(zip([*fixed, "variant"], name)), line))
    if not lines:
        return []
    fig = Figure(figsize=(6, 4.5))
    ax = fig.add_subplot()
    table = []
    for i, (setting, line) in enumerate(lines):
        stats = line.groupby("gpus")["tokens_per_s"].agg(["median", "min", "max"]) / 1e9
        label = f"{setting['variant']}, {corpus_label(setting)}, K = {setting['K']:,}"
        ax.errorbar(stats.index, stats["median"], [stats["median"] - stats["min"], stats["max"] - stats["median"]],
                    marker="o", capsize=2, color=f"C{i}", label=label)
        if 1 in stats.index:
            ax.plot(stats.index, stats.loc[1, "median"] * stats.index, linestyle=":", color=f"C{i}")
            for gpus, median in stats["median"].items():
                reduce = line.loc[line["gpus"] == gpus, "reduce_s"].median() / line["iterations"].iloc[0] \
                    if "reduce_s" in line else np.nan
                table.append({"setting": label, "GPUs": gpus, "G tokens/s": f"{median:.3f}",
                              "speed-up": f"{median / stats.loc[1, 'median']:.2f}x",
                              "efficiency": f"{median / stats.loc[1, 'median'] / gpus:.0%}",
                              "all-reduce ms/iteration": "" if np.isnan(reduce) else f"{reduce * 1e3:.2f}"})
    ax.set(xlabel="GPUs", ylabel="G tokens/s (median, min-max)", xticks=sorted(df["gpus"].unique()))
    ax.set_title("Data parallel over GPUs, B summed through NCCL (dotted: perfect scaling)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    shown = pd.concat([line for _, line in lines])
    written = save(fig, outdir, "saber-gpus-scaling", caption(meta, shown))
    if table:
        written.append(save_text(outdir, "saber-gpus-scaling.md", pd.DataFrame(table).to_markdown(index=False)))
    return written


# Figure 10's panels: the axis swept, and what the paper found (NYTimes, GTX 1080).
TUNING = (("chunks", "(a) chunks", "paper, one worker: more chunks, slower"),
          ("workers", "(b) workers", "paper, 10 chunks: 1 -> 4 workers 10-15% faster"),
          ("threads", "(c) threads per block", "paper: 256 best at every K"))


def tuning_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Figure 10's rows (and its claims'): G4 streamed, within a memory budget."""
    return df[(df["variant"] == "G4") & (df["memory"] > 0)]


def _tuning_figure(df: pd.DataFrame, keys: list, meta: dict, outdir: Path) -> list[Path]:
    """Figure 10: G4's tokens/s against each tuning axis, a line per (K, memory budget)
    wherever the axis took several values with the others fixed; threads 0 (the suite's
    choice) is drawn as "auto". Streamed runs only (a memory budget), as the paper's: the
    real-corpora recipe's resident chunks 0 and 4 are no tuning."""
    rows = tuning_rows(df)
    panels = []
    for axis, title, paper in TUNING:
        fixed = [k for k in keys if k not in (axis, "K", "memory")]
        lines = [(name, line) for name, line in rows.groupby([*fixed, "K", "memory"], dropna=False)
                 if line[axis].nunique() > 1]
        if lines:
            panels.append((axis, title, paper, lines))
    if not panels:
        return []
    fig = Figure(figsize=(4 * len(panels), 4))
    for i, (axis, title, paper, lines) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        values = sorted(set().union(*(line[axis].unique() for _, line in lines)))
        position = {v: j for j, v in enumerate(values)}
        for name, line in lines:
            stats = line.groupby(axis)["tokens_per_s"].agg(["median", "min", "max"]) / 1e9
            x = [position[v] for v in stats.index]
            ax.errorbar(x, stats["median"], [stats["median"] - stats["min"], stats["max"] - stats["median"]],
                        marker="o", markersize=3, capsize=2, label=f"K = {name[-2]:,}, {name[-1]:g} GiB")
        ax.set(xticks=range(len(values)), xticklabels=["auto" if v == 0 else str(v) for v in values], xlabel=axis,
               ylabel="G tokens/s (median, min-max)" if i == 0 else None)
        ax.set_title(f"{title}\n{paper}", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Figure 10: G4 tuned, streamed through a memory budget", fontsize=10, y=1.04)
    shown = pd.concat([line for *_, lines in panels for _, line in lines]).drop_duplicates()
    return save(fig, outdir, "fig10-tuning", caption(meta, shown) + "\nthe other axes as in each line's sweep "
                "(results CSV): (a) one worker, (b) 10 chunks, (c) 10 chunks and 4 workers")


def _memory_figure(rows: pd.DataFrame, setting: dict, meta: dict, outdir: Path) -> list[Path]:
    """Table 2's analogue: each array's bytes against K, for the last stage measured."""
    stage = max(rows["variant"])
    rows = rows[rows["variant"] == stage]
    measured = [(column, label) for column, label in MEMORY if column in rows and rows[column].notna().any()]
    topics = sorted(rows["K"].unique())
    gigabytes = rows.groupby("K")[[column for column, _ in measured]].median() / 1e9
    fig = Figure(figsize=(8, 4.5))
    ax = fig.add_subplot()
    width = 0.8 / len(measured)
    paper = setting.get("dataset") == "pubmed-synth"
    for i, (column, label) in enumerate(measured):
        x = np.arange(len(topics)) + (i - (len(measured) - 1) / 2) * width
        ax.bar(x, gigabytes.loc[topics, column], width, label=label, color=f"C{i}",
               hatch="//" if column == "bytes_a_dense" else None)
        if paper and column in PAPER_TABLE2:
            ax.scatter(x, [PAPER_TABLE2[column].get(k, np.nan) for k in topics], marker="_", s=200, color="black",
                       zorder=3, label="paper (PubMed)" if column == "bytes_b" else None)
    ax.set(xticks=np.arange(len(topics)), xticklabels=[f"K = {k:,}" for k in topics], yscale="log",
           ylabel="GB (10^9 bytes)")
    ax.set_title(f"Table 2: memory by array, {stage} (" + ", ".join(f"{k}={v}" for k, v in setting.items()) + ")",
                 fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)  # beside: no bar hidden
    ax.grid(alpha=0.3, axis="y")
    return save(fig, outdir, setting_stem("table2-memory-by-k", setting),
                caption(meta, rows) + "\nbytes of the arrays the run allocated (median over repeats); A dense is "
                "D x K x 4 bytes, computed: no stage allocates it")


# Figure 11: the time for each system to reach a target held-out log-likelihood. On a
# synthetic corpus the target lies TARGET_FRACTION of the way from the systems' median
# initial value (iteration 0) to what the evaluator gives the generating phi (the ceiling
# under the generating theta is out of any system's reach: theta is folded in from half a
# document); on a real corpus it is the best value any system reaches, less TARGET_MARGIN
# nats per token.
TARGET_FRACTION = 0.9
TARGET_MARGIN = 0.01
# The paper's Figure 11 (NYTimes, K = 1000): SaberLDA's time to quality over each peer's.
PAPER_SPEEDUPS = {"BIDMach (GPU)": 5.6, "ESCA (CPU)": 4.0, "DMLC (CPU)": 5.4}
FIT_KEYS = ("dataset", "scale", "K", "iterations", "eval_every", "chunks", "workers", "memory")


def start_of(series: pd.DataFrame) -> float:
    """The median held-out value at iteration 0, the random start (nan: none evaluated)."""
    return float(series.loc[series["iteration"] == 0, "loglik"].median())


def target_of(series: pd.DataFrame, reference: float) -> tuple[float, str]:
    """The target from the curves and what the generating phi scores (nan: not known;
    then, or without the initial values, the best value reached less the margin), and
    the rule that gave it."""
    values = series.dropna(subset=["loglik"])
    initial = start_of(values)
    if np.isfinite(reference) and np.isfinite(initial):
        return (float(initial + TARGET_FRACTION * (reference - initial)),
                f"{TARGET_FRACTION:.0%} of the way from the median initial value to the generating phi's")
    return float(values["loglik"].max() - TARGET_MARGIN), f"the best value reached less {TARGET_MARGIN} nats per token"


def time_to_target(series: pd.DataFrame, target: float) -> pd.Series:
    """Per variant, the training seconds at the first evaluation after training began
    (iteration 0, the random start, does not count) at or above the target (nan: never)."""
    reached = series[(series["loglik"] >= target) & (series["iteration"] > 0)]
    return reached.groupby("variant")["wall_s"].min().reindex(series["variant"].unique())


def one_run(series: pd.DataFrame, systems, any_of=()) -> pd.DataFrame | None:
    """The curves of the newest run that measured each of `systems` and, given `any_of`, one of
    those at least: two systems' times are compared within a run. None where no run did."""
    def measured(run: pd.DataFrame) -> bool:
        variants = set(run["variant"])
        return set(systems) <= variants and (not any_of or bool(variants & set(any_of)))

    return newest_run(series, measured)


# Figure 12 is Figure 11's plot on a corpus beyond one GPU's memory.
FIGURE_OF_DATASET = {"clueweb-synth": ("Figure 12", "fig12")}


def _systems(frame: pd.DataFrame) -> pd.DataFrame:
    """The variant column naming a system: a variant on several GPUs is a system of its own."""
    if "gpus" not in frame:
        return frame
    gpus = frame["gpus"].fillna(1).astype(int)
    return frame.assign(variant=np.where(gpus > 1, frame["variant"] + " (" + gpus.astype(str) + " GPUs)",
                                         frame["variant"]))


def render_fit(df: pd.DataFrame, series: pd.DataFrame, meta: dict, outdir: Path) -> list[Path]:
    written, tables = [], []
    if "loglik" not in series:  # no curves (yet) to draw
        return written
    df, series = _systems(df), _systems(series.dropna(subset=["loglik"]))
    keys = [k for k in FIT_KEYS if k in series]
    figures = [figure for _, corpus in series.groupby("dataset")  # a corpus's own settings name its figures
               for figure in per_setting(corpus, keys, always=("dataset", "K"))]
    for setting, curves in figures:
        rows = df.merge(pd.DataFrame([setting]), on=list(setting))
        ceiling, true_phi = (float(rows[column].median()) if column in rows else float("nan")
                             for column in ("ceiling", "true_phi_loglik"))
        target, rule = target_of(curves, true_phi)
        fig = Figure(figsize=(7, 4.5))
        ax = fig.add_subplot()
        for i, (variant, lines) in enumerate(curves.groupby("variant")):
            for j, (_, curve) in enumerate(lines.groupby(["run_id", "group", "repeat"])):
                curve = curve[curve["iteration"] > 0].sort_values("wall_s")  # iteration 0 has no time to draw
                ax.plot(curve["wall_s"], curve["loglik"], marker="o", markersize=2, color=f"C{i}",
                        label=variant if j == 0 else None)
        if np.isfinite(ceiling):
            ax.axhline(ceiling, color="black", linestyle="--", linewidth=1, label="ceiling (generating theta, phi)")
            ax.axhline(true_phi, color="black", linestyle="-.", linewidth=1, label="generating phi, theta folded in")
        ax.axhline(target, color="0.5", linestyle=":", linewidth=1, label="target")
        start = start_of(curves)  # drawn as a line: the log time axis has no place for t = 0
        if np.isfinite(start):
            ax.axhline(start, color="0.5", linestyle="-", linewidth=0.8, label="start (iteration 0)")
        ax.set(xscale="log", xlabel="training seconds (evaluation excluded)",
               ylabel="held-out log-likelihood per token")
        plain_log_labels(ax.xaxis)
        figure, stem = FIGURE_OF_DATASET.get(setting["dataset"], ("Figure 11", "fig11"))
        ax.set_title(f"{figure}: held-out log-likelihood against time (" +
                     ", ".join(f"{k}={v}" for k, v in setting.items()) + ")", fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
        written += save(fig, outdir, setting_stem(f"{stem}-loglik-vs-time", setting),
                        caption(meta, rows) + f"\nOne evaluator for every system (impls/saber/heldout.py); target: "
                        f"{rule}.")
        tables.append(_fit_table(setting, curves, rows, target))
    if not tables:
        return written
    paper = ", ".join(f"{name} {speedup}x" for name, speedup in PAPER_SPEEDUPS.items())
    return [*written, save_text(outdir, "saber-fit-table.md", "\n\n".join(tables) +
                                "\n\nSeconds to a value: the training time at the first evaluation at or above it "
                                "(a curve that later falls below it, as ESCA's can, keeps that time; its final value "
                                f"is beside). The paper's SaberLDA over its peers in time to quality: {paper}.")]


OUR_GPU_SYSTEMS = ("G4", "delayed-gibbs")  # the table's speed-ups are theirs over every system


def _speedup_in_one_run(curves: pd.DataFrame, level: float, system: str, ours: str) -> float:
    """`system`'s seconds to `level` over `ours`'s, in the newest run that measured both (nan:
    none did, or one of them never reaches it)."""
    run = one_run(curves, (system, ours))
    if run is None:
        return float("nan")
    seconds = time_to_target(run, level)
    return float(seconds[system] / seconds[ours])


def _fit_table(setting: dict, curves: pd.DataFrame, rows: pd.DataFrame, target: float) -> str:
    """Per system: its final value, its time to the target, to the worst final value of any
    system (a quality every system reaches) and to the final values of G4 and delayed-gibbs
    (where above the worst), each system's newest run's, and the speed-ups of G4 and delayed-gibbs
    on each, within a run that measured both."""
    final = rows.groupby("variant")["final_loglik"].median()
    worst = float(final.min())
    table = pd.DataFrame({"system": final.index, "final log-likelihood": final.map("{:.4f}".format).values,
                          "tokens/s": rows.groupby("variant")["tokens_per_s"].median().reindex(final.index).map(
                              lambda r: f"{r / 1e6:,.1f} M").values})
    levels = [("target", target), ("worst final", worst)]  # and the quality each of ours ends at, where better
    levels += [(f"{ours}'s final", float(final[ours])) for ours in OUR_GPU_SYSTEMS
               if ours in final and final[ours] > worst]
    for label, level in levels:
        seconds = time_to_target(each_variants_newest_run(curves), level).reindex(final.index)
        table[f"seconds to {label}"] = seconds.map(lambda s: "not reached" if np.isnan(s) else f"{s:.3g}").values
        for ours in OUR_GPU_SYSTEMS:
            speedups = pd.Series({system: _speedup_in_one_run(curves, level, system, ours) for system in final.index})
            if speedups.notna().any():
                table[f"{ours}'s speed-up to {label}"] = speedups.map(
                    lambda r: "" if np.isnan(r) else f"{r:.3g}x").values
    title = ", ".join(f"{k}={v}" for k, v in setting.items())
    return (f"**{title}**: target {target:.4f}, worst final {worst:.4f} nats/token\n\n" +
            table.to_markdown(index=False, disable_numparse=True))
