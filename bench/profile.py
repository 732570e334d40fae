"""`bench profile`: Nsight Compute's counters of a suite's kernels at chosen points.

Each (point, variant) runs as `bench run` (a warm-up run, then one measured run) under
ncu, which profiles one launch of every kernel: its `invocation`-th (by default the 2nd,
after the warm-up's first). The counters come in named sets (METRIC_SETS) and are written
as tidy rows (point, variant, kernel, metric, unit, value) to <suite>-profile.csv, beside
the sidecar <suite>-profile.json: the machine, ncu's version, the commands of each run and
the GPU's peaks measured before it (bench.peaks: copy bandwidth, FMA per precision), which
the roofline figure draws the kernels against.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from bench import envinfo, harness, peaks, results
from bench.errors import BenchError

STALL_REASONS = ("long_scoreboard", "short_scoreboard", "wait", "barrier", "not_selected", "selected",
                 "mio_throttle", "lg_throttle", "math_pipe_throttle", "tex_throttle", "dispatch_stall",
                 "no_instruction", "branch_resolving", "drain", "membar", "imc_miss", "sleeping", "misc")
STALL_PREFIX, STALL_SUFFIX = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
FLOP_OPS = ("ffma", "fadd", "fmul", "dfma", "dadd", "dmul")
METRIC_SETS = {
    "time": ("gpu__time_duration.sum",),
    "occupancy": ("sm__warps_active.avg.pct_of_peak_sustained_active", "sm__maximum_warps_per_active_cycle_pct",
                  "launch__registers_per_thread", "launch__block_size", "launch__grid_size",
                  "launch__occupancy_limit_registers", "launch__occupancy_limit_shared_mem",
                  "launch__occupancy_limit_warps"),
    "memory": ("dram__bytes_read.sum", "dram__bytes_write.sum", "dram__bytes.sum.per_second",
               "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
               "lts__throughput.avg.pct_of_peak_sustained_elapsed", "lts__t_sector_hit_rate.pct",
               "l1tex__throughput.avg.pct_of_peak_sustained_active", "l1tex__t_sector_hit_rate.pct",
               "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed",
               "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
               "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"),
    "local": ("l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum"),
    # Coalescing: sectors per request of the global loads (1 to 4 for 4 to 16 contiguous bytes
    # a lane, up to 32 when every lane reads a sector of its own), and the instructions issued.
    "global": ("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
               "smsp__inst_executed.sum"),
    "issue": ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "sm__issue_active.avg.pct_of_peak_sustained_elapsed",
              "smsp__average_warp_latency_per_inst_issued.ratio",
              "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed"),
    "flops": tuple(f"sm__sass_thread_inst_executed_op_{op}_pred_on.sum" for op in FLOP_OPS),
    "stalls": tuple(f"{STALL_PREFIX}{reason}{STALL_SUFFIX}" for reason in STALL_REASONS),
}
COLUMNS = ("variant", "launch", "kernel", "metric", "unit", "value")
BOOKKEEPING = ("code_version", "run_id", "timestamp", "machine")


def metrics_of(sets: list[str]) -> list[str]:
    unknown = [s for s in sets if s not in METRIC_SETS]
    if unknown:
        raise BenchError(f"unknown metric set(s) {', '.join(unknown)}; known: {', '.join(METRIC_SETS)}")
    return list(dict.fromkeys(m for s in sets for m in METRIC_SETS[s]))


def ncu_executable() -> str:
    ncu = shutil.which("ncu")
    if ncu is None:
        raise BenchError("ncu (Nsight Compute) is not on PATH: bench profile runs the suite under it")
    return ncu


def run_command(suite: str, point: dict, variant: str) -> list[str]:
    """`bench run` of one point and variant, in this Python."""
    axes = [f"--{key}={value}" for key, value in point.items() if key not in ("suite", "backend")]
    return [sys.executable, "-m", "bench", "run", suite, "--backend", "gpu", "--variant", variant, *axes]


def ncu_command(ncu: str, metrics: list[str], kernels: str, invocation: int, report: Path,
                command: list[str]) -> list[str]:
    # --clock-control none: the kernels run at the clocks the peaks were measured at (ncu's
    # default locks the SMs to their base clock, 1.5 of the H200's 1.98 GHz).
    return [ncu, "--metrics", ",".join(metrics), "--kernel-id", f"::regex:{kernels}:{invocation}",
            "--clock-control", "none", "--target-processes", "all", "--force-overwrite", "--export", str(report),
            *command]


def tidy(raw_csv: str) -> pd.DataFrame:
    """ncu's raw page (a header row, a units row, a row per profiled launch) as rows of
    (launch, kernel, metric, unit, value); counters that are not numbers are left out."""
    table = pd.read_csv(io.StringIO(raw_csv), dtype=str, keep_default_na=False)
    if table.empty or "Kernel Name" not in table:
        return pd.DataFrame(columns=COLUMNS[1:])
    units, launches = table.iloc[0], table.iloc[1:]
    metrics = [c for c in table.columns if "__" in c]
    long = launches.melt(id_vars=["ID", "Kernel Name"], value_vars=metrics, var_name="metric", value_name="text")
    long["value"] = pd.to_numeric(long["text"].str.replace(",", ""), errors="coerce")
    long["unit"] = long["metric"].map(units)
    long = long.dropna(subset=["value"]).rename(columns={"ID": "launch", "Kernel Name": "kernel"})
    return long[["launch", "kernel", "metric", "unit", "value"]].reset_index(drop=True)


def profiled_pairs(csv_path: Path, sidecar: Path, axes: list[str], asked: dict) -> set[tuple]:
    """The (point, variant) pairs the CSV holds from a run of this code on this machine
    that profiled the same kernels and launch with every metric asked for now: an
    interrupted profile resumes after them."""
    if not csv_path.exists():
        return set()
    covering = {run_id for run_id, run in results.read_sidecar(sidecar)["runs"].items()
                if set(asked["metrics"]) <= set(run.get("metrics", ()))
                and all(run.get(key) == asked[key] for key in ("code_version", "machine", "kernels", "invocation"))}
    rows = results.read_csv(csv_path, dtype=str, keep_default_na=False)
    if rows.empty:
        return set()
    rows = rows[rows["run_id"].isin(covering)]
    return set(rows.groupby([*axes, "variant"]).groups)


def profile(plan, ncu: str, metrics: list[str], kernels: str, invocation: int, out_dir: Path, echo=print) -> Path:
    """Profile every point and variant of a plan under `ncu`, the kernels whose names match
    the regular expression `kernels`; the path of the profile CSV. Pairs profiled with this
    code already are skipped; the sidecar is written first and after every pair, so an
    interrupted run keeps what it measured and says on what."""
    suite = plan.suite
    csv_path, sidecar = out_dir / f"{suite.name}-profile.csv", out_dir / f"{suite.name}-profile.json"
    axes = [key for key in plan.points[0] if key != "suite"]
    columns = ["suite", *axes, *COLUMNS, *BOOKKEEPING]
    results.check_header(csv_path, ["suite", *axes, "code_version", "run_id"])
    env = envinfo.collect_env(sys.argv)
    version = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    run_id = harness.new_run_id()
    stamp = {"code_version": envinfo.code_version(suite.sources), "run_id": run_id, "timestamp": harness.now(),
             "machine": envinfo.machine_slug(env, "gpu")}
    done_before = profiled_pairs(csv_path, sidecar, axes, {**stamp, "metrics": metrics, "kernels": kernels,
                                                           "invocation": invocation})
    limits = peaks.measure_apart()  # the roofline's, on this GPU, nothing of it held while ncu runs
    commands, skipped = [], 0
    info = {**env, "suite": suite.name, **stamp, "peaks": limits, "ncu_version": version[-1] if version else None,
            "metrics": metrics, "kernels": kernels, "invocation": invocation, "commands": commands}
    results.update_sidecar(sidecar, run_id, info)
    with tempfile.TemporaryDirectory() as tmp:
        for point in plan.points:
            for variant, _ in plan.variants_at(point):
                where = " ".join(f"{k}={point[k]}" for k in axes if k != "backend")
                if (*(results.as_text(point[k]) for k in axes), variant) in done_before:
                    echo(f"already profiled with this code: {variant} at {where}")
                    skipped += 1
                    continue
                report = Path(tmp) / f"{len(commands)}.ncu-rep"
                command = ncu_command(ncu, metrics, kernels, invocation, report,
                                      run_command(suite.name, point, variant))
                commands.append(" ".join(command))
                echo(f"profiling {variant} at {where}")
                done = subprocess.run(command, capture_output=True, text=True,
                                      env={**os.environ, harness.PROFILED: "1"})
                if done.returncode != 0 or not report.exists():
                    tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
                    raise BenchError(f"ncu failed on {variant} (exit {done.returncode}): {' | '.join(tail)}")
                raw = subprocess.run([ncu, "--import", str(report), "--csv", "--page", "raw"],
                                     capture_output=True, text=True, check=True).stdout
                rows = tidy(raw)
                rows = rows[rows["metric"].isin(metrics)]  # not the device attributes ncu adds
                rows = rows.assign(variant=variant, **{k: point[k] for k in ["suite", *axes]}, **stamp)
                results.append_rows(csv_path, rows.to_dict("records"), columns)
                results.update_sidecar(sidecar, run_id, {"commands": commands})
    echo(f"{len(commands)} (point, variant) pair(s) profiled, {skipped} profiled before with this code")
    return csv_path


# ncu prints counters in scaled units ("auto": ms, Gbyte, ...): their factors to seconds and bytes.
UNIT_SCALE = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3, "s": 1.0,
              "second": 1.0, **{f"{prefix}byte": 1000.0 ** i for i, prefix in enumerate(("", "K", "M", "G", "T"))}}
TIME, DRAM_BYTES = "gpu__time_duration.sum", ("dram__bytes_read.sum", "dram__bytes_write.sum")
ISSUE = "sm__issue_active.avg.pct_of_peak_sustained_elapsed"  # the issue slots' ceiling, reached as a share
FLOPS = {"f32": ("ffma", "fadd", "fmul"), "f64": ("dfma", "dadd", "dmul")}  # a multiply-add counts 2


def kernel_rates(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per profiled launch (its point, variant and kernel): seconds, DRAM bytes, the
    flops of each precision and the share of the issue slots busy, from the time, memory,
    flops and issue sets; NaN where the run did not collect them. A unit ncu prints that is
    not in UNIT_SCALE is a BenchError."""
    scaled = rows["metric"].isin([TIME, *DRAM_BYTES])
    unknown = set(rows.loc[scaled & ~rows["unit"].isin([*UNIT_SCALE]), "unit"].astype(str))
    if unknown:
        raise BenchError(f"ncu printed time or bytes in unit(s) {', '.join(sorted(unknown))}, unknown to bench")
    values = rows["value"] * rows["unit"].map(UNIT_SCALE).where(scaled, 1.0)
    key = [c for c in rows.columns if c not in ("metric", "unit", "value", *BOOKKEEPING)]
    wide = rows.assign(value=values).groupby([*key, "metric"], dropna=False)["value"].first().unstack("metric")

    def column(metric):
        return wide[metric] if metric in wide else pd.Series(float("nan"), index=wide.index)

    out = pd.DataFrame({"seconds": column(TIME), "bytes": column(DRAM_BYTES[0]) + column(DRAM_BYTES[1]),
                        "issue_frac": column(ISSUE) / 100})
    for precision, (fma, add, mul) in FLOPS.items():
        ops = [column(f"sm__sass_thread_inst_executed_op_{op}_pred_on.sum") for op in (fma, add, mul)]
        out[f"flops_{precision}"] = 2 * ops[0] + ops[1] + ops[2]
    return out.reset_index()
