"""Figure plumbing shared by the suites; knows no suite's columns.

Suites draw on matplotlib.figure.Figure objects (no pyplot: no global state, no GUI
backend; PNG goes through Agg) and hand them to save().
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Protocol

import pandas as pd
from matplotlib.figure import Figure

from bench.results import key_columns, latest_code, read_results, read_sidecar

CAPTION_FONTSIZE = 6


class Suite(Protocol):
    name: str

    def render_figures(self, df: pd.DataFrame, meta: dict, outdir: Path) -> list[Path]: ...


def render_all(results_root: Path, figures_root: Path, suites: list[Suite]) -> list[Path]:
    """Render every suite's figures for every results_root/<machine>/<suite>.csv.

    Each suite sees, for each point and variant, the runs of the latest code version
    (results.latest_code), so figures never pool new code with old measurements.
    """
    written = []
    for machine_dir in sorted(p for p in Path(results_root).iterdir() if p.is_dir()):
        for suite in suites:
            csv_path = machine_dir / f"{suite.name}.csv"
            if not csv_path.exists():
                continue
            df = latest_code(read_results(csv_path))
            meta = {**read_sidecar(csv_path.with_suffix(".json")), "machine": machine_dir.name}
            written += suite.render_figures(df, meta, Path(figures_root) / machine_dir.name)
    return written


def _distinct(values) -> str:
    return " / ".join(dict.fromkeys(str(v) for v in values if v is not None)) or "?"


def caption(meta: dict, df: pd.DataFrame) -> str:
    """Where and how the data in df were measured, one topic per line."""
    runs = meta.get("runs", {})
    envs = [runs[r] for r in df["run_id"].unique() if r in runs]
    keys = key_columns(df.columns)
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
    repeats = df.groupby([*keys, "variant"], dropna=False).size()
    n_repeats = str(repeats.min()) if repeats.min() == repeats.max() else f"{repeats.min()}-{repeats.max()}"
    dates = pd.to_datetime(df["timestamp"], utc=True, format="ISO8601").dt.strftime("%Y-%m-%d")
    date_range = dates.min() if dates.min() == dates.max() else f"{dates.min()} to {dates.max()}"
    codes = _distinct(sorted(df["code_version"].astype(str).unique()))
    return "\n".join([
        machine,
        f"Settings: {settings or 'none constant'}; {n_repeats} repeats per point",
        f"Measured {date_range}; code version {codes}",
    ])


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
