"""REPORT.md of a machine's results: written from the CSVs and sidecars alone.

Per suite: the paper, the recipes with their figures (linked) and tables (the markdown
files `bench figures` writes beside them), every claim with ours computed from the
results and its verdict, the cause of each difference (the suite's text as the code that
writes the report has it), and the runs the numbers come from. Nothing in it is typed by
hand and nothing depends on when it is written: the same results and code give the same
bytes.
"""

from __future__ import annotations

import os
import re
import traceback
import warnings
from functools import cache
from pathlib import Path

import pandas as pd

from bench import ceilings
from bench.check import detection_table
from bench.corpus.entries import catalogue
from bench.envinfo import code_version
from bench.errors import BenchError
from bench.recipes import FOLDERS, PROFILES
from bench.results import key_columns, latest_code, load, read_csv, schema_for

REPORT = "REPORT.md"


class Results:
    """One machine's results directory, each suite's file read once: the rows of the newest
    code of each point and variant (results.latest_code), as figures see them."""

    def __init__(self, directory: Path, suites: dict):
        self.directory = Path(directory)
        self.suites = suites  # name -> Suite

    @cache
    def _load(self, suite: str):
        path = self.directory / f"{suite}.csv"
        if not path.exists() or suite not in self.suites:
            return pd.DataFrame(), {}, {"runs": {}}
        df, schema, sidecar = load(path, suite, lambda name: schema_for(self.suites[name]))
        return latest_code(df, schema), schema, sidecar

    def frame(self, suite: str) -> pd.DataFrame:
        """The suite's rows (empty where there are none)."""
        return self._load(suite)[0]

    def runs(self, suite: str) -> dict:
        """The suite's sidecar runs: run_id -> what was recorded."""
        return self._load(suite)[2].get("runs", {})

    @cache
    def series(self, suite: str) -> pd.DataFrame:
        path = self.directory / f"{suite}-series.csv"
        if not path.exists():
            return pd.DataFrame()
        return latest_code(read_csv(path), self._load(suite)[1])

    @cache
    def _profile(self, suite: str):
        from bench.figures import latest_profile

        path = self.directory / f"{suite}-profile.csv"
        return latest_profile(path) if path.exists() else None

    def profile(self, suite: str) -> pd.DataFrame:
        """The newest code's `bench profile` rows (bench.figures.latest_profile), or empty."""
        run = self._profile(suite)
        return run.rows if run else pd.DataFrame()

    def profile_peaks(self, suite: str) -> dict:
        """The peaks (bench.peaks) measured in the newest `bench profile` run, or {}."""
        run = self._profile(suite)
        return run.info.get("peaks", {}) if run else {}


def _distinct(values) -> str:
    return " / ".join(sorted({str(v) for v in values if v not in (None, "")})) or "-"


def _machine_section(results: Results, names: list[str]) -> list[str]:
    runs = []
    for name in names:
        try:
            runs += results.runs(name).values()
        except BenchError:  # reported in the suite's section
            pass
    if not runs:
        return []
    versions = sorted({k for run in runs for k, v in (run.get("versions") or {}).items() if v})
    rows = [("CPU", _distinct(f"{r.get('cpu_model')}, {r.get('cpu_count')} CPUs" for r in runs)),
            ("GPU", _distinct(f"{r.get('gpu_name')} x {r.get('gpu_count')}" for r in runs if r.get("gpu_name"))),
            ("NVIDIA driver", _distinct(r.get("driver_version") for r in runs)),
            ("CUDA runtime", _distinct(r.get("cuda_runtime") for r in runs)),
            ("OS", _distinct(r.get("os") for r in runs)),
            ("Python", _distinct(r.get("python") for r in runs)),
            *((name, _distinct((r.get("versions") or {}).get(name) for r in runs)) for name in versions)]
    return ["## Machine and software", "", "Every value seen in the runs below (several where runs differ).", "",
            "| | |", "| --- | --- |", *(f"| {k} | {v} |" for k, v in rows), ""]


def _files(figures_dir: Path, stems: tuple[str, ...], datasets: set[str] | None = None) -> list[Path]:
    """The figures and tables under figures_dir whose names start with a stem; of those drawn
    per dataset, only datasets' (None: any)."""
    if not figures_dir.is_dir():
        return []
    files = [p for p in figures_dir.iterdir()
             if p.suffix in (".png", ".md") and any(p.name.startswith(stem) for stem in stems)]
    if datasets is not None:
        names = list(catalogue())  # (read once: catalogue() parses the file on every call)
        files = [p for p in files if _dataset_of(p.stem, names) in (None, *datasets)]
    return sorted(files)


def _dataset_of(stem: str, names: list[str]) -> str | None:
    """The corpus a figure was drawn for (setting_stem's ...-dataset-<name>-...): the longest
    of the catalogue's names there, so that kos-synth is not taken for kos."""
    found = [name for name in names if re.search(f"-dataset-{re.escape(name)}(-|$)", stem)]
    return max(found, key=len) if found else None


def _datasets(recipe) -> set[str] | None:
    """Every corpus a recipe's sweeps name, in any profile whose results are drawn; None where
    one takes its suite's default."""
    named = set()
    for sweep in recipe.sweeps:
        for specs in filter(None, (sweep.specs(profile) for profile in PROFILES if profile not in FOLDERS)):
            if "dataset" not in specs:
                return None
            named.update(specs["dataset"].split(","))
    return named


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _claims(suite, results: Results) -> tuple[list[str], list[str]]:
    """The claims table and the causes of the differences."""
    rows, causes = [], []
    frame = results.frame(suite.name)
    # Most claims are about GPU runs: where none are here, the reader is told so.
    missing = "not measured here" if frame.empty or (frame["backend"] == "gpu").any() else \
        "not measured here: no GPU runs in these results"
    for claim in suite.claims:
        try:
            measured = claim.ours(results)
        except Exception as error:  # a claim's function failing must not lose the rest of the report
            detail = traceback.format_exception_only(error)[-1].strip()
            rows.append(f"| {claim.id} | {_cell(claim.paper)} | cannot compute ({_cell(detail)}) | error |")
            continue
        if measured is None:
            ours, verdict = missing, "not measured here"
        else:
            ours, verdict = measured.text, "holds" if claim.holds(measured.value) else "**differs**"
            if verdict != "holds" and claim.why:
                causes.append(f"- **{claim.id}**: {' '.join(claim.why.split())}")
        rows.append(f"| {claim.id} | {_cell(claim.paper)} | {_cell(ours)} | {verdict} ({_cell(claim.rule)}) |")
    if not rows:
        return [], []
    table = ["| claim | paper | ours | verdict (rule) |", "| --- | --- | --- | --- |", *rows]
    return table, causes


def _written_for(suite, results: Results) -> list[str]:
    """The causes are the suite's text as it is now: where no result here was taken by that
    code, the reader is told (a cause may name kernels that the runs' code did not have)."""
    now = code_version(suite.sources)
    rows = results.frame(suite.name)  # none where the suite's claims read another's file alone
    taken = set(rows["code_version"].dropna().astype(str)) if "code_version" in rows else set()
    if now in taken:
        return []
    return [f"(Written for the code as it is now, {now}; no result here was taken by it: see the runs' "
            "code below.)", ""]


def _runs(results: Results, name: str) -> list[str]:
    df = results.frame(name)
    if df.empty:
        return []
    counts = df.groupby("run_id").size()
    runs = results.runs(name)
    lines = ["| run | measured | code | rows | status | command |", "| --- | --- | --- | ---: | --- | --- |"]
    for run_id, n in counts.sort_index().items():
        info = runs.get(run_id, {})
        rows = df[df["run_id"] == run_id]
        lines.append(f"| {run_id} | {str(rows['timestamp'].min())[:10]} | {_distinct(rows['code_version'])} | {n} "
                     f"| {info.get('status', '?')} | `{_cell(info.get('command', '?'))}` |")
    return lines


def _ceilings(results: Results, suite, figures_dir: Path, link_root: Path) -> list[str]:
    """Each GPU kernel's fraction of its floor (bench.ceilings), the figure of every point
    against its floor (bench.figures.floor_figure) where drawn, and the points where a kernel
    beat its floor (a count or a ceiling is wrong there)."""
    df = results.frame(suite.name) if suite.states_work else pd.DataFrame()
    if df.empty:
        return []
    varying = [k for k in key_columns(schema_for(suite)) if k in df and df[k].nunique() > 1]
    table, above = ceilings.summary(df, varying)
    if not table:
        return []
    lines = ["### Against the ceilings", "", "Every GPU row's floor is the largest of: its footprint beyond the L2 "
             "over the DRAM read bandwidth, its whole footprint over the L2 read bandwidth, its multiply-adds over "
             "the FMA peak and its launches times the launch spacing, every call, each ceiling measured in the same "
             "process (bench.ceilings). floor_frac is the floor over the time measured, median over the repeats of "
             "each point:", "", table, ""]
    figure = [p for p in _files(figures_dir, (f"{suite.name}-floors",)) if p.suffix == ".png"]
    lines += [f"![{p.stem}]({(link_root / p.name).as_posix()})" for p in figure] + ([""] if figure else [])
    if above:
        lines += ["Above the floor, so a count or a ceiling is wrong at these points:", "", above, ""]
    return lines


def render(results_dir: Path, figures_dir: Path, suites: list) -> str:
    """The report of one machine's results directory, as text."""
    results = Results(results_dir, {s.name: s for s in suites})
    link_root = Path(os.path.relpath(figures_dir, results_dir))
    lines = [f"# Results on {Path(results_dir).name}", "",
             "Written by `bench report` from the results in this folder (do not edit: it is written again "
             "at the end of `bench reproduce` and `bench figures`). Timings are compared only within one run "
             "on one machine.", ""]
    lines += _machine_section(results, [s.name for s in suites])
    for suite in suites:
        try:
            present = not results.frame(suite.name).empty
        except BenchError as error:  # one unreadable file must not lose the rest of the report
            lines += [f"## {suite.name}", "", f"Its results cannot be read: {error}", ""]
            warnings.warn(f"{suite.name}'s results cannot be read ({error}); the report says so")
            continue
        if not (present or suite.claims or suite.recipes):
            continue
        lines += [f"## {suite.name}", "", suite.description + ".", ""]
        if suite.paper:
            lines += [f"Paper: {suite.paper}.", ""]
        if not present:
            lines += ["No results of this suite here.", ""]
        for recipe in (r for r in suite.recipes if r.reproduces_paper):
            files = _files(figures_dir, recipe.figures, _datasets(recipe))
            lines += [f"### {recipe.name}: {recipe.reproduces}", ""]
            if recipe.note:
                lines += [" ".join(recipe.note.split()), ""]
            images = [p for p in files if p.suffix == ".png"]
            lines += [f"![{p.stem}]({(link_root / p.name).as_posix()})" for p in images]
            lines += [""] if images else []
            for table in (p for p in files if p.suffix == ".md"):
                lines += [f"`{table.name}`:", "", table.read_text().strip(), ""]
            if recipe.figures and not files:
                lines += ["No figures here (`bench reproduce " + f"{suite.name}:{recipe.name}` draws them).", ""]
        lines += _ceilings(results, suite, figures_dir, link_root)
        table, causes = _claims(suite, results)
        if table:
            lines += ["### The paper's claims beside ours", "", *table, ""]
        if causes:
            lines += ["Why they differ:", "", *_written_for(suite, results), *causes, ""]
        runs = _runs(results, suite.name)
        if runs:
            lines += ["### Runs", "", *runs, ""]
    lines += _gate(Path(results_dir) / FOLDERS["ci"], [s.name for s in suites])
    return "\n".join(lines).rstrip() + "\n"


def _gate(directory: Path, names: list[str]) -> list[str]:
    """The regression gate's baseline here (ci/), and what bench check caught with it
    (benchmarks/detection.py's files), where there are any."""
    gated = [name for name in names if (directory / f"{name}.csv").exists()]
    if not gated:
        return []
    processes = {name: read_csv(directory / f"{name}.csv")["run_id"].nunique() for name in gated}
    lines = ["## Regression gate", "", f"`bench check` baselines in `{FOLDERS['ci']}/` (`bench reproduce --profile "
             "ci`, processes a suite): " + ", ".join(f"{name} ({count})" for name, count in processes.items()) + ".",
             ""]
    for path in sorted(directory.glob("detection-*.csv")):
        lines += [f"`{path.name}` (benchmarks/detection.py: a row per CI run; the change columns are each run's "
                  "largest change of a time ratio, in percent, over the runs):", "", detection_table(read_csv(path)),
                  ""]
    return lines


def write(results_dir: Path, figures_dir: Path, suites: list) -> Path:
    """results_dir/REPORT.md, written whole (a reader never sees half a report)."""
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise BenchError(f"{results_dir}: no such results directory")
    text = render(results_dir, Path(figures_dir), suites)
    path = results_dir / REPORT
    tmp = path.with_name(f".{REPORT}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path
