"""What `bench check` catches: its false alarms and detection rates on one suite's gate.

Each CI run measures the suite's gate as CI does (`bench reproduce --profile ci SUITE:ci
--fresh`, `--processes` times, into a folder of its own) and checks it against BASELINE
with `bench check`. First `--nulls` runs without change: any regression is a false alarm.
Then `--runs` runs for each slowdown, set by the test-only knob BENCH_SLOWDOWN
(bench/slowdown.py): of one kernel (`--kernel`), of the suite's reference variant, of
every variant at once, by each of `--factors`; caught when `bench check` of the suites
the run measured would exit 1. One row
per CI run goes to OUT (csv, appended, so that an interrupted measurement keeps what it
has; rerun to add runs), with the change of every row bench check flagged; the summary
table is printed as markdown.

    python benchmarks/detection.py lda --baseline results/<machine>/ci --kernel alg7 \\
        --nulls 20 --runs 10 --factors 1.05,1.1,1.2,2 --thresholds 0.05,0.10 --out detection.csv

With --measured, nothing is measured: the CI runs without change in results folders made
elsewhere (`bench reproduce --profile ci` on another machine of the same GPU model, where
a machine's own runs would miss what moves between machines) are checked instead.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from bench import results
from bench.check import REGRESSIONS, compare_files, detection_table, exit_code, reference_for
from bench.suite import get_suite, suite_names


def ci_run(suite: str, slowdown: str, processes: int, work: Path) -> Path:
    """The suite's gate measured `processes` times as CI measures it; its results folder."""
    shutil.rmtree(work, ignore_errors=True)
    env = {**os.environ, "BENCH_SLOWDOWN": slowdown, "NUMBA_NUM_THREADS": "1"}
    for _ in range(processes):
        subprocess.run([sys.executable, "-m", "bench", "reproduce", "--profile", "ci", f"{suite}:ci", "--fresh",
                        "--results", str(work)], env=env, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    (machine,) = [p for p in work.iterdir() if p.is_dir()]
    return machine / "ci"


def measured_runs(folders: list[Path], suite: str, work: Path) -> list[Path]:
    """The CI runs in results folders measured elsewhere (another machine of the same GPU
    model), one process each: in a folder, the i-th run_id (in time order) of each of the
    gate's suites is the i-th process; each becomes a results folder of its own."""
    (gate,) = [recipe for recipe in get_suite(suite).recipes if recipe.name == "ci"]
    names = dict.fromkeys(sweep.suite for sweep in gate.sweeps)
    runs = []
    for folder in folders:
        frames = {name: pd.read_csv(folder / f"{name}.csv", dtype=str, keep_default_na=False)
                  for name in names if (folder / f"{name}.csv").exists()}
        ids = {name: sorted(frame["run_id"].unique()) for name, frame in frames.items()}
        for i in range(max(map(len, ids.values()), default=0)):
            target = work / f"{len(runs)}"
            target.mkdir(parents=True)
            for name, frame in frames.items():
                if i < len(ids[name]):  # a process cut short measured the first suites alone
                    run_id = ids[name][i]
                    frame[frame["run_id"] == run_id].to_csv(target / f"{name}.csv", index=False)
                    shutil.copy(folder / f"{name}.json", target)
                    series = folder / f"{name}-series.csv"
                    if series.exists():
                        rows = pd.read_csv(series, dtype=str, keep_default_na=False)
                        rows[rows["run_id"] == run_id].to_csv(target / series.name, index=False)
            runs.append(target)
    return runs


def check(new: Path, baseline: Path, threshold: float, calibration_threshold: float) -> tuple[int, list[str], float]:
    """bench check of every suite the run measured: its exit code, the rows it flagged, and
    the largest change of a time ratio in percent (signed), flagged or not."""
    code, flagged, largest = 0, [], 0.0
    for name in suite_names():
        if not (new / f"{name}.csv").exists():
            continue
        result = compare_files(new, baseline, name, threshold=threshold, calibration_threshold=calibration_threshold)
        code = max(code, exit_code(result))
        changes = (result.loc[result["metric"] == "seconds", "change"].dropna() - 1) * 100
        if len(changes) and abs(changes).max() > abs(largest):
            largest = float(changes[abs(changes).idxmax()])
        flagged += [f"{name} {row.variant}/{row.against or row.metric} {row.verdict} {(row.change - 1) * 100:+.1f}%"
                    for row in result.itertuples() if row.verdict in REGRESSIONS]
    return code, flagged, largest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suite", help="the suite whose gate recipe (ci) is measured")
    parser.add_argument("--baseline", type=Path, required=True, help="results/<machine>/ci of the same gate")
    parser.add_argument("--kernel", help="the one variant slowed alone (needed unless --measured)")
    parser.add_argument("--nulls", type=int, default=20, help="CI runs without change")
    parser.add_argument("--runs", type=int, default=10, help="CI runs per slowdown")
    parser.add_argument("--factors", default="1.05,1.1,1.2,2", help="slowdown factors")
    parser.add_argument("--processes", type=int, default=1, help="processes a CI run (make regression: 6 a side)")
    parser.add_argument("--thresholds", default="0.10", help="bench check's --threshold and "
                        "--calibration-threshold, each value a row of its own (comma list)")
    parser.add_argument("--calibration-threshold", type=float, default=None, help="bench check's "
                        "--calibration-threshold (default: each of --thresholds)")
    parser.add_argument("--measured", type=Path, nargs="+", default=None, help="no measuring: check the CI runs "
                        "without change in these results/<machine>/ci folders, measured elsewhere (measured_runs)")
    parser.add_argument("--out", type=Path, required=True, help="csv of one row per CI run")
    args = parser.parse_args()
    if not (args.measured or args.kernel):
        parser.error("--kernel is needed to measure the slowdowns")
    if not any(recipe.name == "ci" for recipe in get_suite(args.suite).recipes):
        parser.error(f"suite {args.suite} declares no gate (a ci recipe): name the suite whose gate measures it")
    thresholds = [(float(t), args.calibration_threshold or float(t)) for t in args.thresholds.split(",")]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-detection-"))
    if args.measured:
        for run, new in enumerate(measured_runs(args.measured, args.suite, work)):
            for threshold, calibration in thresholds:
                record(args, "unchanged", "", 1.0, run, new, threshold, calibration, "")
        shutil.rmtree(work, ignore_errors=True)
        print(detection_table(pd.read_csv(args.out)))
        return

    base, schema, _ = results.load(args.baseline, args.suite, lambda name: results.schema_for(get_suite(name)))
    reference = reference_for(schema, base["backend"].iloc[0])  # the GPU reference where the baseline ran on a GPU
    plan = [("unchanged", "", 1.0, args.nulls)]
    for factor in (float(f) for f in args.factors.split(",")):
        plan += [("one kernel", args.kernel, factor, args.runs), ("reference", reference, factor, args.runs),
                 ("every variant", "*", factor, args.runs)]
    done = pd.read_csv(args.out).groupby(["kind", "factor"])["run"].nunique() if args.out.exists() else pd.Series()
    for kind, variant, factor, runs in plan:
        for run in range(done.get((kind, factor), 0), runs):  # a rerun adds what is missing
            started = time.monotonic()
            slowdown = f"{variant}={factor}" if variant else ""
            new = ci_run(args.suite, slowdown, args.processes, work / "run")
            seconds = round(time.monotonic() - started, 1)
            for threshold, calibration in thresholds:
                record(args, kind, slowdown, factor, run, new, threshold, calibration, seconds)
    shutil.rmtree(work, ignore_errors=True)
    print(detection_table(pd.read_csv(args.out)))


def record(args, kind: str, slowdown: str, factor: float, run: int, new: Path, threshold: float,
           calibration: float, seconds) -> None:
    """bench check of one CI run, appended to args.out as a row."""
    code, flagged, largest = check(new, args.baseline, threshold, calibration)
    row = pd.DataFrame([{"suite": args.suite, "kind": kind, "variant": slowdown.split("=")[0] or "-",
                         "factor": factor, "run": run, "processes": 1 if args.measured else args.processes,
                         "threshold": threshold, "calibration_threshold": calibration, "exit_code": code,
                         "largest_change_pct": round(largest, 2), "flagged": "; ".join(flagged), "seconds": seconds}])
    row.to_csv(args.out, mode="a", header=not args.out.exists(), index=False)
    print(f"{kind} {slowdown or '-'} run {run} at {threshold:g}/{calibration:g}: exit {code} {'; '.join(flagged)}",
          flush=True)


if __name__ == "__main__":
    main()
