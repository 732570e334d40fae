"""The admodel figures and tables, named after the thesis's: the speed-up of every GPU
variant over the CPU references (its Figures 2-4: objective, gradient, both; log scale),
its Tables 4, 8, 9 and 13-16 re-measured (layout x L1 x precision x kernel) as markdown,
and the convergence of the fit (the objective's distance to the best optimum found,
against time) with its table."""

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from bench.figures import caption, per_setting, plain_log_labels, save, save_text, setting_stem

CPU = ("cpu-serial", "cpu-parallel")
CONFIG = ["layout", "precision", "l1", "block"]
THESIS = {"objective": "Tables 8-9 (objective)", "gradient": "Tables 13-16 (naive and improved gradient)",
          "both": "objective and gradient together"}
FIGURE = {"objective": "fig2-objective", "gradient": "fig3-gradient", "both": "fig4-combined"}


def medians(df: pd.DataFrame) -> pd.DataFrame:
    """Median seconds per run, point and variant, with the CPU references' medians of the
    same run, dataset, scale, layout and op beside (they are measured at f64, ldg only)."""
    point = ["run_id", "dataset", "scale", *CONFIG, "op", "variant"]
    table = df.groupby(point, dropna=False)["seconds"].median().reset_index()
    same = ["run_id", "dataset", "scale", "layout", "op"]
    for name in CPU:
        cpu = table[table["variant"] == name][[*same, "seconds"]].rename(columns={"seconds": name})
        table = table.merge(cpu, on=same, how="left")
    return table


def newest_runs(table: pd.DataFrame, with_references: bool = False) -> pd.DataFrame:
    """medians' rows of each point and variant from its newest run alone (with_references: the
    newest that measured the CPU references too, where one did): a ratio to the CPU references
    is its run's own, never a blend of runs."""
    point = [c for c in table.columns if c in ("dataset", "scale", *CONFIG, "op", "variant")]
    order = table.assign(referenced=table[CPU[0]].notna() if with_references else True)
    return order.sort_values(["referenced", "run_id"]).drop_duplicates(point, keep="last").drop(columns="referenced")


def render_evaluations(df: pd.DataFrame, meta: dict, outdir: Path) -> list[Path]:
    written = []
    table = medians(df)
    gpu = table[~table["variant"].isin(CPU)]
    for setting, rows in per_setting(gpu, ["dataset", "scale", "op"], always=("dataset", "op")):
        rows = newest_runs(rows.dropna(subset=["cpu-serial"]))  # of the runs with the references
        if rows.empty:
            continue
        dataset, op = setting.pop("dataset"), setting.pop("op")
        configs = rows[CONFIG].drop_duplicates().sort_values(CONFIG)
        labels = [" ".join(str(v) for v in c) for c in configs.itertuples(index=False)]
        variants = sorted(rows["variant"].unique())
        fig = Figure(figsize=(max(6, 0.6 * len(labels) * len(variants)), 4.5))
        ax = fig.add_subplot()
        width = 0.8 / len(variants)
        for i, variant in enumerate(variants):
            mine = rows[rows["variant"] == variant].merge(configs, on=CONFIG, how="right")
            ax.bar(np.arange(len(labels)) + i * width, mine["cpu-serial"] / mine["seconds"], width, label=variant,
                   color=f"C{i}")
        ax.set_xticks(np.arange(len(labels)) + 0.4 - width / 2, labels, rotation=30, ha="right", fontsize=7)
        ax.set(yscale="log", ylabel="time of cpu-serial / time of the variant")
        ax.set_title(f"GPU over the one-thread CPU reference: {op} ({dataset}"
                     + "".join(f", {k} {v:g}" for k, v in setting.items()) + ")", fontsize=10)
        ax.grid(alpha=0.3, axis="y", which="both")
        ax.legend(fontsize=8)
        subset = df[(df["dataset"] == dataset) & (df["op"] == op) & df["run_id"].isin(rows["run_id"])]
        subset = subset[(subset[list(setting)] == pd.Series(setting)).all(axis=1)] if setting else subset
        written += save(fig, outdir, setting_stem(FIGURE[op], {"dataset": dataset, **setting}),
                        caption(meta, subset) + "\nBars: median time of cpu-serial (float64, measured in the same run "
                        "on the same data and layout) over the variant's median time; the thesis's Figures 2-4.")
    return [*written, save_text(outdir, "admodel-tables.md", markdown_tables(df))]


def _cell(row) -> str:
    """Median ms, and the speed-ups over the CPU references of the same run."""
    speedups = " / ".join(f"{row[c] / row['seconds']:,.0f}x" for c in CPU if not pd.isna(row[c]))
    return f"{row['seconds'] * 1e3:,.2f}" + (f" ({speedups})" if speedups else "")


def markdown_tables(df: pd.DataFrame) -> str:
    """Per op, the thesis's tables re-measured: median ms per configuration and variant,
    and the speed-ups over the CPU references of the same run (each point's newest run)."""
    table = newest_runs(medians(df), with_references=True)  # a run resumed past its references has none
    cpu = table[table["variant"].isin(CPU)]
    cpu = cpu.assign(ms=cpu["seconds"] * 1e3).pivot_table("ms", ["dataset", "scale", "layout", "op"], "variant")
    cpu = cpu.reset_index()
    cpu["scale"] = cpu["scale"].map("{:g}".format)
    for name in CPU:
        if name in cpu:
            cpu[name] = cpu[name].map("{:,.2f}".format)
    out = ["CPU references (the thesis's Table 4), float64, ms per call:\n",
           cpu.to_markdown(index=False, disable_numparse=True)]
    gpu = table[~table["variant"].isin(CPU)]
    for op, rows in gpu.groupby("op", sort=False):
        cells = rows.assign(cell=rows.apply(_cell, axis=1)).pivot_table("cell", ["dataset", "scale", *CONFIG], "variant",
                                                                         aggfunc="first")
        out += [f"\n{THESIS[op]}: GPU ms per call (speed-up over cpu-serial / cpu-parallel):\n",
                cells.fillna("").reset_index().to_markdown(index=False)]
    return "\n".join(out)


def fit_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per run, dataset, layout, precision and variant: median seconds, iterations,
    evaluations, final objective and its relative difference to scipy-cpu's, speed-up."""
    keys = ["run_id", "dataset", "scale", "layout", "precision"]
    recovery = {c: (c, "median") for c in ("theta_rmse", "effects_rmse", "factors_rmse") if c in df}  # by code version
    table = df.groupby([*keys, "variant"]).agg(seconds=("seconds", "median"), iterations=("iterations", "median"),
                                               evaluations=("evaluations", "median"),
                                               objective=("final_objective", "median"), **recovery,
                                               converged=("converged", "min")).reset_index()
    reference = df[df["variant"] == "scipy-cpu"].groupby(["run_id", "dataset", "scale", "layout"]).agg(
        reference_s=("seconds", "median"), reference_f=("final_objective", "median")).reset_index()
    table = table.merge(reference, on=["run_id", "dataset", "scale", "layout"], how="left")
    table["speedup"] = table["reference_s"] / table["seconds"]
    table["objective_vs_scipy_cpu"] = (table["objective"] - table["reference_f"]) / table["reference_f"].abs()
    return table.drop(columns=["reference_s", "reference_f"])


def fit_markdown(df: pd.DataFrame) -> str:
    table = fit_table(df).drop(columns=["run_id"])
    for column in table.select_dtypes("number"):
        # objective: the digits a comparison to 1e-8 needs
        table[column] = table[column].map(("{:.12g}" if column == "objective" else "{:.4g}").format)
    return table.to_markdown(index=False, disable_numparse=True)


def render_fit(df: pd.DataFrame, series: pd.DataFrame, meta: dict, outdir: Path) -> list[Path]:
    written = []
    keys = ["dataset", "scale", "layout", "precision"]
    for setting, subset in per_setting(series, keys, always=("dataset",)):
        best = subset["objective"].min()
        fig = Figure(figsize=(7, 4.5))
        ax = fig.add_subplot()
        for i, (variant, lines) in enumerate(subset.groupby("variant")):
            for j, (_, curve) in enumerate(lines.groupby(["run_id", "group", "repeat"])):
                curve = curve.sort_values("wall_s")
                gap = (curve["objective"] - best) / abs(best)
                ax.plot(curve["wall_s"], gap.clip(lower=1e-16), color=f"C{i}", alpha=0.8,
                        label=variant if j == 0 else None)
        ax.set(xscale="log", yscale="log", xlabel="seconds since the start of the fit",
               ylabel="(f - best f found) / |best f|")
        plain_log_labels(ax.xaxis)
        ax.set_title("L-BFGS to the MAP: " + ", ".join(f"{k}={v}" for k, v in setting.items()), fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
        rows = df.merge(pd.DataFrame([setting]), on=list(setting)) if setting else df
        written += save(fig, outdir, setting_stem("admodel-fit-convergence", setting),
                        caption(meta, rows) + "\nOne line per repeat; best f: the lowest objective of any variant "
                        "in the figure (clipped at 1e-16).")
    return [*written, save_text(outdir, "admodel-fit-table.md", fit_markdown(df))]
