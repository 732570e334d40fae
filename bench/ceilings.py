"""A GPU kernel's floor: the least time the GPU's ceilings, measured in the same run, allow
for the work it must do, and which ceiling binds (nvbench and the roofline model count
the same things).

A suite states per kernel (Suite.work) its compulsory DRAM bytes (each input read and each
output written once), the bytes that must pass through L2 (reads that no on-chip reuse of
the kernel can serve), its multiply-adds and its launches. Each over its ceiling is a time
the kernel cannot beat; the largest is its floor, and `floor_frac` = floor / measured time
is at most 1 unless a count or a ceiling is wrong (bench report flags such rows)."""

from __future__ import annotations

from dataclasses import dataclass

from bench.suite import Metric

CEILINGS = ("dram", "l2", "fma", "launch")


@dataclass(frozen=True)
class Work:
    """What one timed run must do at least (every call of it, where it makes several)."""

    dram_bytes: float  # compulsory: each input read and each output written once
    l2_bytes: float = 0.0  # through L2: reads that no on-chip reuse of the kernel serves
    fma: float = 0.0  # multiply-adds (or an operation per term that an FMA would bound)
    precision: str = "f32"  # whose FMA rate bounds `fma`
    launches: int = 1


# The columns of a GPU row of a suite that states its work: the floor, and the limits it
# was computed from (bench.peaks.limits; copy_gbps comes from the repeat's calibration).
METRICS = (
    *(Metric(f"{name}_floor_s", "s", help=f"GPU: the least time the {name} ceiling allows the run's work")
      for name in CEILINGS),
    Metric("floor_s", "s", help="GPU: the largest of the ceilings' times, the run's floor"),
    Metric("bound", "", help="GPU: the ceiling whose time is the floor: dram, l2, fma or launch"),
    Metric("floor_frac", "", better="higher", help="GPU: floor_s / seconds; at most 1 unless a count or a "
           "ceiling is wrong"),
    Metric("l2_gbps", "GB/s", better="higher", help="GPU: the L2 read bandwidth measured in the run"),
    Metric("fma_gflops", "GFLOP/s", better="higher", help="GPU: the FMA peak of the work's precision, measured "
           "in the run"),
    Metric("launch_s", "s", help="GPU: the empty-launch latency measured in the run"),
)


def floors(work: Work, limits: dict, seconds: float) -> dict:
    """The time each ceiling allows the work, the floor (the largest), the binding
    ceiling's name, and the fraction of the floor the measured `seconds` reach.

    limits: copy_gbps (bytes read plus written a second, as the copy counts them), l2_gbps,
    fma_gflops_f32 / fma_gflops_f64 (an FMA counted as 2 flops), launch_s."""
    fma_gflops = limits[f"fma_gflops_{work.precision}"]
    allowed = {"dram": work.dram_bytes / (limits["copy_gbps"] * 1e9),
               "l2": work.l2_bytes / (limits["l2_gbps"] * 1e9),
               "fma": 2 * work.fma / (fma_gflops * 1e9),
               "launch": work.launches * limits["launch_s"]}
    bound = max(allowed, key=allowed.get)
    return {**{f"{name}_floor_s": allowed[name] for name in CEILINGS}, "floor_s": allowed[bound], "bound": bound,
            "floor_frac": allowed[bound] / seconds, "l2_gbps": limits["l2_gbps"], "fma_gflops": fma_gflops,
            "launch_s": limits["launch_s"]}


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
    by = ["variant", *(["precision"] if "precision" in rows else []), "bound"]
    medians = (rows.groupby([*(k for k in keys if k not in by), *by], dropna=False)["floor_frac"].median()
               .reset_index())
    table = (medians.groupby(by, dropna=False)["floor_frac"]
             .agg(points="size", median="median", smallest="min", largest="max").reset_index())
    above = above_ceiling(medians)
    return (table.to_markdown(index=False, floatfmt=".3f"),
            above.to_markdown(index=False, floatfmt=".3f") if not above.empty else "")
