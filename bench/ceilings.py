"""A GPU kernel's floor: the least time the GPU's ceilings, measured in the same run, allow
for the work it must do, and which ceiling binds (the roofline model's counts).

A suite states per GPU run (Suite.work) what each call of it touches and does: its
footprint (each input read and each output written once), its multiply-adds and its
launches. Each over its ceiling is a time no correct kernel of that variant can beat:
- dram: the footprint beyond what the L2 can hold, every call (all of it where the sweep
  flushes the L2 before each run), over the DRAM read bandwidth (a read-only stream, faster
  than a copy, so that no kernel outruns it);
- l2: the whole footprint, every call, over the L2 read bandwidth (a launch starts with an
  empty L1, so everything it reads or writes passes through L2 at least once);
- fma: the multiply-adds over the FMA peak of the precision;
- launch: the launches times the spacing of empty kernels queued back to back.
The largest is the floor, and `floor_frac` = floor / measured time is at most 1 unless a
count or a ceiling is wrong (REPORT.md lists such points)."""

from __future__ import annotations

from dataclasses import dataclass

from bench.suite import Metric

CEILINGS = ("dram", "l2", "fma", "launch")


@dataclass(frozen=True)
class Work:
    """What each call of a timed run must touch and do at least."""

    footprint_bytes: float  # each input read and each output written once
    fma: float = 0.0  # multiply-adds (or an operation a term that an FMA would bound)
    precision: str = "f32"  # whose FMA rate bounds `fma`
    launches: int = 1
    calls: int = 1  # calls of the run, back to back on the same arrays


# The numeric columns of a GPU row of a suite that states its work (the binding ceiling's
# name, `bound`, is text: results.schema_for keeps it apart), and the limits measured in the
# run that the floor came from (bench.peaks.limits).
METRICS = (
    *(Metric(f"{name}_floor_s", "s", help=f"GPU: the least time the {name} ceiling allows the run's work")
      for name in CEILINGS),
    Metric("floor_s", "s", help="GPU: the largest of the ceilings' times, the run's floor"),
    Metric("floor_frac", "", better="higher", help="GPU: floor_s / seconds; at most 1 unless a count or a "
           "ceiling is wrong"),
    Metric("dram_gbps", "GB/s", better="higher", help="GPU: the DRAM read bandwidth measured in the run"),
    Metric("l2_gbps", "GB/s", better="higher", help="GPU: the L2 read bandwidth measured in the run"),
    Metric("fma_gflops", "GFLOP/s", better="higher", help="GPU: the FMA peak of the work's precision, measured "
           "in the run"),
    Metric("launch_s", "s", help="GPU: the spacing of empty kernels launched back to back, measured in the run"),
)
BOUND = "bound"  # the text column: dram, l2, fma or launch


def floors(work: Work, limits: dict, seconds: float, l2_flushed: bool = False) -> dict:
    """The time each ceiling allows the work, the floor (the largest), the binding
    ceiling's name, the fraction of the floor the measured `seconds` reach, and the limits.

    limits (bench.peaks.limits): dram_gbps, l2_gbps, l2_size (bytes), fma_gflops_f32 and
    fma_gflops_f64 (an FMA counted as 2 flops), launch_s."""
    beyond_l2 = work.footprint_bytes if l2_flushed else max(0.0, work.footprint_bytes - limits["l2_size"])
    fma_gflops = limits[f"fma_gflops_{work.precision}"]
    allowed = {"dram": work.calls * beyond_l2 / (limits["dram_gbps"] * 1e9),
               "l2": work.calls * work.footprint_bytes / (limits["l2_gbps"] * 1e9),
               "fma": work.calls * 2 * work.fma / (fma_gflops * 1e9),
               "launch": work.calls * work.launches * limits["launch_s"]}
    bound = max(allowed, key=allowed.get)
    return {**{f"{name}_floor_s": allowed[name] for name in CEILINGS}, "floor_s": allowed[bound], BOUND: bound,
            "floor_frac": allowed[bound] / seconds, "dram_gbps": limits["dram_gbps"], "l2_gbps": limits["l2_gbps"],
            "fma_gflops": fma_gflops, "launch_s": limits["launch_s"]}


def above_ceiling(rows, slack: float = 0.02):
    """Rows (a DataFrame) whose measured time beats their floor by more than `slack`: a
    count or a ceiling is wrong there."""
    if "floor_frac" not in rows:
        return rows.iloc[:0]
    return rows[rows["floor_frac"] > 1 + slack]


def summary(rows, keys: list[str]) -> tuple[str, str]:
    """Markdown of GPU rows' fractions of their floors (rows: a suite's results, newest code):
    per variant, precision and binding ceiling, the points and the median, smallest and
    largest floor_frac; and a second table of every point above its floor (keys name the
    point), "" where there is none. ("", "") for rows without floors."""
    if "floor_frac" not in rows:
        return "", ""
    rows = rows.dropna(subset=["floor_frac"])
    if rows.empty:
        return "", ""
    by = ["variant", *(["precision"] if "precision" in rows else []), BOUND]
    medians = (rows.groupby([*(k for k in keys if k not in by), *by], dropna=False)["floor_frac"].median()
               .reset_index())
    table = (medians.groupby(by, dropna=False)["floor_frac"]
             .agg(points="size", median="median", smallest="min", largest="max").reset_index())
    above = above_ceiling(medians)
    return (table.to_markdown(index=False, floatfmt=".3f"),
            above.to_markdown(index=False, floatfmt=".3f") if not above.empty else "")
