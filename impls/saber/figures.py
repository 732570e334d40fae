"""The saber figures: the paper's Figure 9 (time per phase of each stage, stacked, with
the paper's stage-to-stage changes beside ours) and throughput against K."""

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from bench.figures import caption, per_setting, save, setting_stem
from bench.results import key_columns

PHASES = ("sample", "rebuild", "preprocess", "transfer", "overlapped")  # G4 overlaps its chunks' phases
# The paper's Sec. 4.1 (NYTimes, K = 1000, GTX 1080): (what, stage, over stage, phase or None for the total, change)
CLAIMS = (("SL1 PDOW: sampling", "G1", "G0", "sample", -0.40),
          ("SL2 tree: pre-processing", "G2", "G1", "preprocess", -0.98),
          ("SL3 SSC: rebuilding A", "G3", "G2", "rebuild", -0.89),
          ("SL4 workers: total", "G4", "G3", None, -0.123),
          ("SL5 G4 over G0: total", "G4", "G0", None, 1 / 2.9 - 1))


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
    return written
