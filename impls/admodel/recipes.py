"""The admodel suites' reproductions and claims, as data (bench.recipes).

Recipes: the thesis's speed-up figures (the objective, the gradient, both; figures.py
names them fig2-objective, fig3-gradient and fig4-combined) and its tables re-measured,
our fused kernel against the copy bandwidth, and the fit by L-BFGS (admodel-fit).
Claims: the thesis's statements and our targets, computed from a machine's results.
Timings are compared within one run only (the CPU references are measured in the same
run, on the same data, as the kernels); the CPU references are float64.
"""

import math

import pandas as pd

from bench.recipes import Claim, Measured, Recipe, Sweep, gate, size
from impls.admodel.data import PSI, SHAPES
from impls.admodel.figures import fit_table, medians

PAPER = ("Efficient GPU implementation of parameter estimation of a statistical model for online advertisement "
         "optimization, Albin Lindbäck, Master's thesis, Chalmers University of Technology, 2012")
THESIS_KERNELS = ("grad-atomic", "grad-block")  # the thesis's naive and improved gradients
GRADIENT_VARIANTS = ("grad-atomic", "grad-block", "grad-warp")
FUSED = ("fused-bucketed", "fused")

# ---------------------------------------------------------------------------- sizes
# cpu: `make figures` on 2 cores (the CPU references only: float64, l1 = ldg, blocks of
# 256); quick: one GPU in about 2 minutes with the fit (an eighth of the thesis's
# observations, still more bytes than an H100's or H200's L2 holds; the fit a sixteenth:
# the CPU references, the sorting of each sorted point and scipy's fit on the CPU take
# most of the time);
# paper: the thesis's sizes (its Table 3), both L1 policies, both precisions.
EVAL = {"cpu": dict(scale="0.015625", layout="shuffled,sorted", precision="f64", l1="ldg", block=256),
        "quick": dict(scale="0.125", layout="shuffled,sorted", precision="f64,f32", l1="ldg,ldcg", block=256),
        "paper": dict(scale="1", layout="shuffled,sorted", precision="f64,f32", l1="ldg,ldcg", block=256)}


def _evaluation(op: str, dataset: str = "sim,real-like", profiles=("cpu", "quick", "paper"), **quick) -> Sweep:
    """A sweep of one op; `quick` overrides the quick profile's axes."""
    return Sweep(suite="admodel", axes={"op": op},
                 **{profile: size(dataset=dataset, **{**EVAL[profile], **(quick if profile == "quick" else {})})
                    for profile in profiles})


# quick: both L1 policies for the objective only (the thesis's L1 claim is the objective's).
OBJECTIVE, GRADIENT, BOTH = _evaluation("objective"), _evaluation("gradient", l1="ldg"), _evaluation("both", l1="ldg")


NOTE_EVAL = ("Bars: the median time of cpu-serial (numba, one thread, float64), measured in the same run on the "
             "same data and layout, over each GPU variant's. The thesis's figures set the GTX 570 against its "
             "sequential CPU code; its timings are in the claims below.")
RECIPES = (
    Recipe("objective", "Figures 2 and 3 (real and simulated data), the objective's bars, and Tables 8-9: the "
           "objective on the GPU against the CPU, by layout, L1 policy and precision",
           (OBJECTIVE,), figures=("fig2-objective",), note=NOTE_EVAL),
    Recipe("gradient", "Figures 2 and 3, the gradient's bars, and Tables 13-16: the thesis's naive (grad-atomic) "
           "and improved (grad-block) gradients and ours (grad-warp) against the CPU",
           (GRADIENT,), figures=("fig3-gradient",), note=NOTE_EVAL),
    Recipe("combined", "Figure 4: the objective and the gradient together, the thesis's two passes (two-pass) "
           "against ours in one (fused, fused-bucketed)", (BOTH,), figures=("fig4-combined",),
           note=NOTE_EVAL),
    Recipe("tables", "Table 4 (the CPU references) and Tables 8, 9 and 13-16 re-measured: ms per call and the "
           "speed-ups over the CPU references, every layout, precision and L1 policy (in the quick profile the "
           "gradients' at l1 = ldg only)",
           (OBJECTIVE, GRADIENT, BOTH), figures=("admodel-tables",),
           note="Every kernel is checked against numpy in float64 on fresh data by `bench verify admodel --backend "
           "gpu` (also at --scale 0.02 --block 256 --l1 ldg), and under compute-sanitizer by `bench verify admodel "
           "--backend gpu --sanitizer memcheck` (and racecheck) at --scale 0.0002 --l1 ldg --block 32,96; `bench "
           "list admodel --kernels` gives each kernel's registers, spills and shared memory."),
    Recipe("fused-copy", "ours: the fused objective and gradient against the copy bandwidth (the target of 0.6 on "
           "sim and real-like, shuffled, float64)",
           (_evaluation("both", profiles=("quick", "paper"), l1="ldg"),),
           figures=("fig4-combined", "admodel-profile-"),
           note="The copy bandwidth is measured in every repeat beside the kernels (copy_gbps; gbps counts 23 "
           "bytes of each observation and its 26 parameter values gathered). What limits the fused kernel comes "
           "from Nsight Compute (the profile figures): `bench profile admodel -a dataset=real-like,sim -a scale=1 "
           "-a layout=shuffled -a precision=f32,f64 -a op=both -a l1=ldg -a block=256 --variant "
           "fused,fused-bucketed --kernels admodel_`, a command of its own. Registers per "
           "thread are capped per kernel in kernels/admodel.cu at the fastest caps of `python3 "
           "impls/admodel/profile_kernels.py` (a scan of caps and block sizes; with --profile it runs the kernels "
           "for ncu)."),
    Recipe("fit", "ours (the thesis times f and its gradient only): the whole MAP fit by L-BFGS from zero, "
           "scipy's on the CPU reference and on the GPU, ours on the GPU and torch's; the objective against time",
           (Sweep(suite="admodel-fit", axes={"dataset": "sim", "layout": "shuffled", "precision": "f64"},
                  cpu=size(scale="0.00390625", repeats=2), quick=size(scale="0.0625", repeats=1),
                  paper=size(scale="1", repeats=2)),
            # real-like: scipy's L-BFGS-B works on the host on all 1.48M parameter slots, minutes at full size.
            Sweep(suite="admodel-fit", axes={"dataset": "real-like", "layout": "shuffled", "precision": "f64"},
                  cpu=size(scale="0.00390625", repeats=1), paper=size(scale="1", repeats=1))),
           figures=("admodel-fit-convergence", "admodel-fit-table")),
    # On a GPU the thesis's two passes are the reference: every kernel but the lone gradients runs.
    gate(Sweep("admodel", {"op": "both", "dataset": "sim", "layout": "shuffled,sorted", "l1": "ldg", "block": "256"},
               variants=("cpu-serial", "cpu-parallel"), ci_cpu=size(scale="0.015625", precision="f64", repeats=3,
                                                                    warmup=1)),
         Sweep("admodel", {"op": "both", "dataset": "sim", "layout": "shuffled,sorted", "l1": "ldg", "block": "256"},
               variants=("two-pass", *FUSED), ci_gpu=size(scale="0.125", precision="f64,f32", repeats=5, warmup=1,
                                                          max_noise=0)),
         Sweep("admodel-fit", {"dataset": "sim", "layout": "shuffled", "precision": "f64"}, variants=("scipy-cpu",),
               ci_cpu=size(scale="0.0009765625", repeats=3, warmup=1)),
         # On a GPU ours alone, at the thesis's size, where a step's kernels outweigh its
         # launches from Python; scipy-gpu is driven by the host (its time moved by 11-18%
         # between two H100s at 1/16 of the size).
         Sweep("admodel-fit", {"dataset": "sim", "layout": "shuffled", "precision": "f64"},
               variants=("lbfgs-gpu",), ci_gpu=size(scale="1", repeats=3, warmup=1))),
)


# ---------------------------------------------------------------------------- helpers
def _largest_scale(df: pd.DataFrame) -> pd.DataFrame:
    """Per dataset, the rows of the largest scale measured (the nearest to the thesis's)."""
    if df.empty:
        return df
    return df[df["scale"] == df.groupby("dataset")["scale"].transform("max")]


def _timings(results) -> pd.DataFrame:
    """Median seconds per run, point and variant with cpu-serial's of the same run beside
    (figures.medians), at the largest scale of each dataset, GPU variants only; with the
    speed-up over cpu-serial and the median copy_frac."""
    df = _largest_scale(results.frame("admodel"))
    if df.empty or "seconds" not in df:
        return pd.DataFrame()
    table = medians(df)
    table = table[~table["variant"].isin(("cpu-serial", "cpu-parallel"))]
    if table.empty:
        return table
    table = table.assign(speedup=table["cpu-serial"] / table["seconds"])
    point = ["run_id", "dataset", "scale", "layout", "precision", "l1", "block", "op", "variant"]
    for column in ("copy_frac", "gbps", "copy_gbps", "setup_s"):
        if column in df:
            table = table.merge(df.groupby(point, dropna=False)[column].median().reset_index(), on=point, how="left")
    return table


def _range(values, fmt: str = "{:,.0f}", suffix: str = "x", dash: str = "-") -> str:
    values = [v for v in values if v is not None and not pd.isna(v)]
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    text = fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f"{fmt.format(lo)}{dash}{fmt.format(hi)}"
    return text + suffix


def _scales(rows: pd.DataFrame) -> str:
    """The scale the rows were measured at: the claims read each dataset's largest (_largest_scale),
    which a table of a smaller scale beside them in the report may contradict."""
    scales = sorted({float(s) for s in rows["scale"]})
    return " (at the thesis's size)" if scales == [1.0] else \
        f" (at scale {', '.join(f'{s:g}' for s in scales)} of the thesis's size)"


def _ratio(table: pd.DataFrame, axis: str, numerator, denominator) -> pd.DataFrame:
    """Per run, point (without `axis`) and variant: the median time at axis = numerator over
    the median time at axis = denominator (rows where both were measured)."""
    keys = [c for c in ("run_id", "dataset", "scale", "layout", "precision", "l1", "block", "op", "variant")
            if c != axis]
    top = table[table[axis] == numerator][[*keys, "seconds"]]
    bottom = table[table[axis] == denominator][[*keys, "seconds"]]
    both = top.merge(bottom, on=keys, suffixes=("_num", "_den"))
    return both.assign(ratio=both["seconds_num"] / both["seconds_den"])


def _per_dataset(rows: pd.DataFrame, column: str, fmt: str = "{:.2f}", suffix: str = "x") -> str:
    return ", ".join(f"{dataset} {_range(part[column], fmt, suffix)}" for dataset, part in
                     rows.groupby("dataset", sort=False))


# ---------------------------------------------------------------------------- claims
def objective_speedup(results):
    table = _timings(results)
    rows = table[(table["variant"] == "objective") & (table["l1"] == "ldg")] if not table.empty else table
    rows = rows.dropna(subset=["speedup"]) if not rows.empty else rows
    if rows.empty:
        return None
    text = f"{_range(rows['speedup'])} (the objective kernel, l1 = ldg){_scales(rows)}"
    if "copy_frac" in rows and rows["copy_frac"].notna().any():
        best = rows.loc[rows["copy_frac"].idxmax()]
        df = _largest_scale(results.frame("admodel"))
        copy = df[df["device"] == "gpu"]["copy_gbps"]
        text += (f"; copy bandwidth {copy.median() / 1e3:.2f} TB/s (median of the repeats); the {best['dataset']} "
                 f"{best['layout']} {best['precision']} objective at {best['copy_frac']:.1f}x of it in effective "
                 "bytes (L1 and L2 hits on the gathered parameters)")
    return Measured(float(rows["speedup"].min()), text)


def gradient_speedup(results):
    table = _timings(results)
    rows = table[table["variant"].isin(GRADIENT_VARIANTS) & (table["l1"] == "ldg")] if not table.empty else table
    rows = rows.dropna(subset=["speedup"]) if not rows.empty else rows
    thesis = rows[rows["variant"].isin(THESIS_KERNELS)] if not rows.empty else rows
    if thesis.empty:
        return None
    best = thesis.groupby(["run_id", "dataset", "scale", "layout", "precision", "l1", "block"])["speedup"].max()
    parts = [f"{name} {_range(rows[rows['variant'] == name]['speedup'])}"
             for name in ("grad-block", "grad-atomic", "grad-warp") if (rows["variant"] == name).any()]
    return Measured(float(best.max()), f"the thesis's improved kernel (grad-block), naive (grad-atomic) and ours "
                    f"(grad-warp): {'; '.join(parts)} (l1 = ldg){_scales(rows)}")


def improved_against_naive(results):
    table = _timings(results)
    rows = table[table["variant"].isin(THESIS_KERNELS) & (table["l1"] == "ldg")] if not table.empty else table
    if rows.empty:
        return None
    ratio = _ratio(rows, "variant", "grad-atomic", "grad-block")  # > 1: the improved kernel is faster
    if ratio.empty:
        return None
    faster = int((ratio["ratio"] > 1).sum())
    return Measured(float(ratio["ratio"].min()),
                    f"time of grad-atomic over grad-block: {_per_dataset(ratio, 'ratio')}; grad-block faster at "
                    f"{faster} of {len(ratio)} points (l1 = ldg){_scales(ratio)}")


def _precision_ratio(results, variants):
    table = _timings(results)
    rows = table[table["variant"].isin(variants) & (table["l1"] == "ldg")] if not table.empty else table
    return _ratio(rows, "precision", "f64", "f32") if not rows.empty else rows


def single_objective(results):
    ratio = _precision_ratio(results, ("objective",))
    if ratio.empty:
        return None
    return Measured(float(ratio["ratio"].min()), f"time of f64 over f32, the objective kernel: "
                    f"{_per_dataset(ratio, 'ratio')} (l1 = ldg){_scales(ratio)}")


def single_gradient(results):
    ratio = _precision_ratio(results, GRADIENT_VARIANTS)
    thesis = ratio[ratio["variant"].isin(THESIS_KERNELS)] if not ratio.empty else ratio
    if thesis.empty:
        return None
    parts = [f"{name} {_range(ratio[ratio['variant'] == name]['ratio'], '{:.2f}')}"
             for name in GRADIENT_VARIANTS if (ratio["variant"] == name).any()]
    return Measured(float(thesis["ratio"].min()), f"time of f64 over f32: {'; '.join(parts)} "
                    f"(l1 = ldg){_scales(ratio)}")


def _layout_ratio(results, variant, numerator, denominator):
    table = _timings(results)
    rows = table[(table["variant"] == variant) & (table["l1"] == "ldg")] if not table.empty else table
    return _ratio(rows, "layout", numerator, denominator) if not rows.empty else rows


def sorted_objective(results):
    ratio = _layout_ratio(results, "objective", "shuffled", "sorted")  # > 1: sorted is faster
    if ratio.empty:
        return None
    parts = ", ".join(f"{r.dataset} {r.precision} {r.ratio:.2f}x" for r in
                      ratio.sort_values(["dataset", "precision"], ascending=[False, False]).itertuples())
    return Measured(float(ratio["ratio"].min()), f"time shuffled over sorted, the objective kernel: {parts} "
                    f"(l1 = ldg){_scales(ratio)}")


def sorted_gradient(results):
    ratio = _layout_ratio(results, "grad-atomic", "sorted", "shuffled")  # > 1: sorted is slower
    if ratio.empty:
        return None
    parts = ", ".join(f"{r.dataset} {r.precision} {r.ratio:.2f}x" for r in
                      ratio.sort_values(["dataset", "precision"], ascending=[False, False]).itertuples())
    return Measured(float(ratio["ratio"].min()), f"time sorted over shuffled, the naive gradient (grad-atomic): "
                    f"{parts} (l1 = ldg){_scales(ratio)}")


def l1_objective(results):
    table = _timings(results)
    if table.empty:
        return None
    ratio = _ratio(table, "l1", "ldg", "ldcg")  # > 1: L1 (ldg) slower
    sim = ratio[(ratio["variant"] == "objective") & (ratio["dataset"] == "sim") & (ratio["layout"] == "shuffled")]
    if sim.empty:
        return None
    parts = ", ".join(f"{r.precision} {r.seconds_num * 1e3:,.2f} ms with L1 (ldg) against {r.seconds_den * 1e3:,.2f} "
                      f"ms without (ldcg), {r.ratio:.2f}x" for r in sim.sort_values("precision", ascending=False)
                      .itertuples())
    slower = ratio[ratio["ratio"] > 1]
    text = (f"the sim shuffled objective: {parts}{_scales(sim)}; L1 slower at {len(slower)} of {len(ratio)} GPU "
            f"points{_scales(ratio)}")
    if not slower.empty:
        worst = slower.loc[slower["ratio"].idxmax()]
        text += (f", at most {worst['ratio']:.2f}x ({worst['variant']}, {worst['dataset']} {worst['layout']} "
                 f"{worst['precision']})")
    f64 = sim[sim["precision"] == "f64"]
    return Measured(float((f64 if not f64.empty else sim)["ratio"].min()), text)


def gradient_target(results):
    table = _timings(results)
    rows = table[table["variant"].isin(("grad-warp", "grad-atomic")) & (table["dataset"] == "sim")
                 & (table["precision"] == "f64")] if not table.empty else table
    rows = rows.dropna(subset=["speedup"]) if not rows.empty else rows
    ours = rows[rows["variant"] == "grad-warp"] if not rows.empty else rows
    if ours.empty:
        return None
    parts = "; ".join(
        f"{variant} " + ", ".join(f"{layout} {_range(part['speedup'])}" for layout, part in lines.groupby("layout"))
        for variant, lines in sorted(rows.groupby("variant"), key=lambda item: item[0] != "grad-warp"))
    policies = ", ".join(sorted(rows["l1"].unique()))
    return Measured(float(ours["speedup"].min()), f"sim f64: {parts} (l1 = {policies}){_scales(rows)}")


PROFILE_UNITS = {"l1tex__throughput.avg.pct_of_peak_sustained_active": "L1/shared",
                 "lts__throughput.avg.pct_of_peak_sustained_elapsed": "L2",
                 "sm__throughput.avg.pct_of_peak_sustained_elapsed": "SM",
                 "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": "DRAM",
                 "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy"}


def _profile_text(results) -> str:
    """The fused kernels' busiest units in the newest `bench profile admodel`, where there is one."""
    rows = results.profile("admodel")
    if rows.empty or not {"variant", "metric", "value"} <= set(rows.columns):
        return ""
    rows = rows[rows["variant"].isin(FUSED) & rows["metric"].isin(PROFILE_UNITS)
                & rows["kernel"].astype(str).str.contains("fused")]
    parts = []
    keys = ["variant", *(k for k in ("dataset", "layout", "precision") if k in rows and rows[k].nunique() > 1)]
    for key, part in rows.groupby(keys):
        values = part.groupby("metric")["value"].median()
        units = ", ".join(f"{PROFILE_UNITS[m]} {values[m]:.0f}%" for m in PROFILE_UNITS if m in values)
        parts.append(f"{' '.join(map(str, key if isinstance(key, tuple) else (key,)))}: {units} of peak")
    return f"; Nsight Compute (bench profile): {'; '.join(parts)}" if parts else ""


def fused_copy(results):
    """The better fused variant's median copy_frac per dataset (shuffled as given, float64,
    l1 = ldg): the claim's value is the lower of the datasets', and needs both."""
    table = _timings(results)
    if table.empty or "copy_frac" not in table:
        return None
    rows = table[table["variant"].isin(FUSED) & (table["layout"] == "shuffled")
                 & (table["l1"] == "ldg")].dropna(subset=["copy_frac"])
    f64 = rows[rows["precision"] == "f64"]
    if set(f64["dataset"]) != set(SHAPES):
        return None
    df = _largest_scale(results.frame("admodel"))
    parts, value, bests = [], None, []
    for dataset, part in f64.groupby("dataset", sort=False):
        best = part.loc[part["copy_frac"].idxmax()]
        bests.append((dataset, best["variant"]))
        repeats = df[(df["run_id"] == best["run_id"]) & (df["variant"] == best["variant"]) & (df["dataset"] == dataset)
                     & (df["layout"] == "shuffled") & (df["precision"] == "f64") & (df["l1"] == "ldg")
                     & (df["op"] == "both") & (df["scale"] == best["scale"])]["copy_frac"]
        parts.append(f"{dataset}: {best['variant']} {best['copy_frac']:.2f} ({_range(repeats, '{:.2f}', '')} over its "
                     f"repeats), {best['gbps'] / 1e3:.2f} TB/s effective in {best['seconds'] * 1e3:.2f} ms")
        value = best["copy_frac"] if value is None else min(value, best["copy_frac"])
    text = "; ".join(parts)
    others = [f"{r.dataset} {r.variant} {r.precision} {r.copy_frac:.2f}" for r in
              rows.sort_values(["dataset", "precision", "variant"], ascending=False).itertuples()
              if not (r.precision == "f64" and (r.dataset, r.variant) in bests)]
    if others:
        text += "; " + ", ".join(others)
    setup = table[(table["variant"] == "fused-bucketed") & (table["layout"] == "shuffled")].dropna(subset=["setup_s"])
    if not setup.empty:  # the least over points: a process's first sort also compiles it
        text += "; fused-bucketed's one sort (setup_s, shuffled, the least over points): " + ", ".join(
            f"{dataset} {part['setup_s'].min() * 1e3:,.0f} ms, the time of "
            f"{part['setup_s'].min() / part['seconds'].median():,.0f} calls"
            for dataset, part in setup.groupby("dataset", sort=False))
    return Measured(float(value), text + _scales(rows) + _profile_text(results))


def _fits(results) -> pd.DataFrame:
    df = results.frame("admodel-fit")
    if df.empty or "final_objective" not in df:
        return pd.DataFrame()
    return fit_table(df)


def fit_speed(results):
    table = _fits(results)
    if table.empty:
        return None
    ours = table[(table["variant"] == "lbfgs-gpu") & table["speedup"].notna()]
    parts = []
    for (dataset, scale), rows in table.groupby(["dataset", "scale"], sort=False):
        reference = rows[rows["variant"] == "scipy-cpu"]
        timed = rows[rows["speedup"].notna() & (rows["variant"] != "scipy-cpu")]
        where = dataset + ("" if float(scale) == 1 else f" (scale {float(scale):g})")
        if not timed.empty:
            parts.append(f"{where}: " + ", ".join(f"{r.variant} {r.speedup:,.0f}x" for r in
                                                  timed.sort_values("speedup", ascending=False).itertuples())
                         + f" (scipy-cpu {reference['seconds'].median():,.1f} s)")
        elif not reference.empty and len(rows) > len(reference):
            gpu = rows[rows["variant"] != "scipy-cpu"]
            parts.append(f"{where}: scipy-cpu in another run ({reference['seconds'].median():,.0f} s; "
                         + ", ".join(f"{r.variant} {r.seconds:,.2f} s" for r in gpu.itertuples())
                         + "), not compared")
    if ours.empty:
        return None if not parts else Measured(None, "; ".join(parts))
    return Measured(float(ours["speedup"].min()), "; ".join(parts))


def _agreement(results) -> pd.DataFrame:
    """Every fit's final objective relative to scipy-cpu's for the same data (any run: not
    a timing), per row (repeat)."""
    df = results.frame("admodel-fit")
    if df.empty or "final_objective" not in df:
        return pd.DataFrame()
    same = ["dataset", "scale", "layout"]
    reference = df[df["variant"] == "scipy-cpu"].groupby(same)["final_objective"].median().rename("reference")
    rows = df[df["variant"] != "scipy-cpu"].merge(reference.reset_index(), on=same)
    return rows.assign(difference=(rows["final_objective"] - rows["reference"]) / rows["reference"].abs())


def fit_agreement(results):
    rows = _agreement(results)
    if rows.empty:
        return None
    parts = []
    for variant, lines in sorted(rows.groupby("variant"), key=lambda item: ("scipy-gpu", "lbfgs-gpu",
                                                                          "torch-lbfgs").index(item[0])
                                 if item[0] in ("scipy-gpu", "lbfgs-gpu", "torch-lbfgs") else 9):
        per = ", ".join(f"{dataset} {_range(part['difference'], '{:+.1e}', '', ' to ')}" for dataset, part in
                        lines.groupby("dataset", sort=False))
        parts.append(f"{variant} {per}")
    judged = rows[rows["variant"].isin(("scipy-gpu", "lbfgs-gpu"))]
    value = float(judged["difference"].abs().max()) if not judged.empty else None
    return Measured(value, "final f relative to scipy-cpu's: " + "; ".join(parts))


def fit_recovery(results):
    df = results.frame("admodel-fit")
    if df.empty or "effects_rmse" not in df:
        return None
    full = df[df["scale"] == 1].dropna(subset=["effects_rmse"])
    if full.empty:
        return None
    by = full.groupby("dataset", sort=False)
    effects = by["effects_rmse"].median()
    factors = by["factors_rmse"].median() if "factors_rmse" in full else pd.Series(dtype=float)
    text = ("effects_rmse " + ", ".join(f"{d} {v:.3f}" for d, v in effects.items())
            + f" against a prior standard deviation of {math.sqrt(PSI):.3f}")
    if not factors.empty:
        text += ("; the factor products not recovered: factors_rmse " + ", ".join(f"{d} {v:.3f}" for d, v in
                                                                                  factors.items())
                 + f", the generating products' own spread sqrt(10) x {PSI:g} = {math.sqrt(10) * PSI:.3f}")
    return Measured(float(effects.max()), text)


ATOMICS = ("Hopper adds float64 atomically in L2 natively; Fermi had no float64 atomicAdd and the thesis emulated it "
           "by a compare-and-swap loop that retries every conflicting lane (its own explanation of its float32 "
           "gains, Sec. 4.4.3).")
CLAIMS = (
    Claim("objective-speedup", "The objective on the GPU is 20-50x the sequential CPU code (GTX 570 against an "
          "i7-3930K; abstract and Sec. 4.6; Tables 4, 8 and 9)", objective_speedup, lambda v: v >= 20,
          "holds if the objective kernel is at least 20x cpu-serial at every point",
          why="A GTX 570 has 0.15 TB/s of DRAM bandwidth, a Hopper GPU tens of times more (the copy bandwidth "
          "measured beside the kernels is in ours), and the gathered parameters hit in L1 and L2, so that the "
          "effective bytes can exceed the copy bandwidth: a speed-up above 50x is the claim holding far beyond.",
          recipe="objective"),
    Claim("gradient-speedup", "The gradient gains only about 4x over the CPU, the atomic updates bound it "
          "(Sec. 4.6: at most 2x in double precision, 4x in single)", gradient_speedup, lambda v: v < 10,
          "holds if neither of the thesis's gradient kernels reaches 10x cpu-serial (the thesis's aim) at any point",
          why=ATOMICS + " So the naive kernel's 5 + 2N atomics per observation are bound by L2 throughput, not "
          "by retries (Nsight Compute found it L2-bound in an earlier version of the code). The improved kernel's "
          "search of shared memory for equal indices costs O(B^2) per block and makes it the slowest GPU variant; "
          "ours (grad-warp) combines equal indices within a warp (__match_any_sync and shuffles), one atomic per "
          "distinct index.", recipe="gradient"),
    Claim("improved-gradient", "The improved gradient (equal indices summed per block in shared memory, one atomic "
          "each) is faster than the naive one: 519 against 23,908 ms on real data, 1,716 against 2,196 ms on "
          "simulated (double, each at its best configuration; Tables 13 and 14)", improved_against_naive,
          lambda v: v > 1, "holds if grad-block is faster than grad-atomic at every point",
          why=ATOMICS + " The naive kernel's atomics are therefore cheap, while the improved kernel compares every "
          "thread's indices with every other's in its block (O(B^2) reads of shared memory per effect); it gains "
          "only where sorted observations make equal indices frequent.", recipe="gradient"),
    Claim("single-objective", "Single precision cuts the objective's time by up to about 2x (Table 9: 1.15-1.8x)",
          single_objective, lambda v: v > 1, "holds if float32 is faster than float64 at every point",
          why="float32 halves the bytes of every gathered parameter; where it does not help, the kernel is bound "
          "by something other than those bytes (not profiled).", recipe="objective"),
    Claim("single-gradient", "Single precision cuts the time of both of the thesis's gradients: the naive one by "
          "1.5-162x (Table 15), the improved one by 1.8-5.3x (Table 16); \"in all cases, using single precision "
          "reduces the execution time\" (Sec. 4.5)", single_gradient, lambda v: v > 1,
          "holds if float32 is faster than float64 for grad-atomic and grad-block at every point",
          why=ATOMICS + " The thesis's large float32 gains of the naive kernel came from that emulation; here both "
          "precisions issue one native atomic per update, the naive kernel is bound by its atomics, not by bytes, "
          "and the improved one by its search of shared memory. Why the naive kernel is slower in float32 on "
          "real-like was not profiled.", recipe="gradient"),
    Claim("sorted-objective", "Sorting the observations by material, then placement, speeds the objective up: "
          "4.4x on real data and 3.5x on simulated (Table 8, L1 disabled)", sorted_objective, lambda v: v > 1,
          "holds if sorted is faster than shuffled at every point",
          why="On real-like only a few tens of thousands of parameters are active and the covariates are "
          "Zipf-skewed, so the gathered parameters hit in L1 and L2 in the shuffled order too and sorting has "
          "little to gain; why the float64 objective is slower sorted there was not profiled.",
          recipe="objective"),
    Claim("sorted-gradient", "Sorting slows the naive gradient down, its atomics to one address serialise: 6.7x "
          "on real data and 48x on simulated (Table 13, L1 disabled)", sorted_gradient, lambda v: v >= 2,
          "holds if sorted is at least 2x slower than shuffled at every point (the thesis's order)",
          why=ATOMICS + " Atomics of a warp to one address are combined in L2 rather than retried, so the equal "
          "indices that sorting brings together cost little; the thesis's own float32 runs, with native "
          "atomics, show the same (Table 15: sorted 0.76-1.4x the time of shuffled).", recipe="gradient"),
    Claim("l1-objective", "Enabling L1 slows the simulated objective by 50% (289 to 430 ms, shuffled; Table 8): L1 "
          "should be disabled where its hit rate is low", l1_objective, lambda v: v > 1,
          "holds if the sim shuffled float64 objective is slower with L1 (ldg) than without (ldcg)",
          why="On Fermi an L1-cached load fetched a whole 128-byte line, so scattered gathers over-fetched (the "
          "thesis's reason, Appendix A.3.2); Hopper's L1 fills 32-byte sectors, so caching costs no extra bytes "
          "and every hit on a gathered parameter saves a trip to L2 (by our reading; not profiled).",
          recipe="objective"),
    Claim("gradient-target", "Target (ours; the thesis reaches about 4x): the gradient at least 50x the "
          "single-threaded CPU on sim in float64", gradient_target, lambda v: v >= 50,
          "holds if grad-warp is at least 50x cpu-serial at every sim float64 point",
          why="grad-warp's atomics and gathers bound it (see fused-copy).", recipe="gradient"),
    Claim("fused-copy", "Target (ours): the fused objective and gradient at least 0.6 of the copy bandwidth on sim "
          "and on real-like, float64, as given shuffled (effective bytes: 23 per observation and its 26 parameter "
          "values gathered)", fused_copy,
          lambda v: v >= 0.6, "holds if on each dataset the better fused variant's median copy_frac is at least 0.6 "
          "(l1 = ldg)",
          why="fused-bucketed goes by (material, placement) pairs: bucketed, a pair's observations are consecutive, "
          "and the kernel (fused_pairs) adds each pair's sum of residuals once a warp where it added the material's "
          "and placement's effects and both factor rows an observation's group; a small kernel (pair_rows, warps "
          "a material or placement) then turns the pairs' sums into those effects and rows. Through L1 (l1 = ldg) "
          "each lane reads its two factor rows itself (a warp's lanes share one or two materials and read nearby "
          "placements), leaving to L1 the shared memory that stages of the rows took. The three classes d, f and "
          "r stay random in either order: per observation three scalar gathers and three atomics that share no "
          "sector within a warp; on real-like, whose Zipf-skewed levels put a few gradient entries in every warp, "
          "they go through a block's cache in shared memory. Nsight Compute (the recipe's note: "
          "admodel-profile.csv and its figures): on real-like both precisions are bound by instruction issue, the "
          "warps waiting mostly on shared memory (the short scoreboard: the cache's atomics), DRAM and L2 far "
          "from their limits; float32 gains by its 32 registers (twice float64's resident warps); on sim, a pair "
          "for about two observations, the warps wait mostly on the gathers of the random classes' parameters "
          "and the rows (the long scoreboard; L2 at 60% of its peak in float64, about 9 sectors a load request), "
          "in float32 with nearly every warp resident also on the load queue (lg and mio throttle), so float32 is "
          "no faster; pair_rows' gathers of scattered pairs add to it (impls/admodel/kernels/NOTES.md).",
          recipe="fused-copy"),
    Claim("fit-speed", "Target (ours; the thesis never runs L-BFGS): the whole fit on the GPU (lbfgs-gpu) at least "
          "20x faster than scipy's L-BFGS-B on the CPU reference (cpu-parallel), in the same run",
          fit_speed, lambda v: v is not None and v >= 20,
          "holds if lbfgs-gpu is at least 20x scipy-cpu wherever both ran in one run",
          why="scipy's L-BFGS-B works on the host on every parameter slot (1.48M on real-like), with a copy of "
          "theta and of the gradient per evaluation; ours keeps the whole iteration on the GPU, four scalars to "
          "the host per trial step.", recipe="fit"),
    Claim("fit-agreement", "Target (ours): every route reaches the same optimum: the final objective of scipy-gpu "
          "and lbfgs-gpu within 1e-8 of scipy-cpu's (relative; torch-lbfgs stops by its own rule and is shown "
          "beside)", fit_agreement, lambda v: v is not None and v <= 1e-8,
          "holds if scipy-gpu's and lbfgs-gpu's final f are within 1e-8 of scipy-cpu's",
          why="The routes share the stopping rule (a relative reduction of f below 1e-12 or max |g| below 1e-5) "
          "but not their line searches nor the order of the GPU's atomic sums, so they stop at different points "
          "of a flat optimum; a difference beyond the tolerance means a route stopped early.", recipe="fit"),
    Claim("fit-recovery", "Target (ours): at the thesis's size the MAP estimate recovers the generating intercept "
          "and effects, their RMS error below half the prior's standard deviation", fit_recovery,
          lambda v: v < 0.5 * math.sqrt(PSI), f"holds if effects_rmse < {0.5 * math.sqrt(PSI):.3f} on every dataset "
          "(scale 1)",
          why="Few observations per level leave the posterior mode near the prior mean: the rare levels of "
          "real-like's Zipf-skewed classes, and the factor products, with about one observation of mean mu "
          "near 0.26 per (material, placement) pair, shrunk to about 0 (by our reading).", recipe="fit"),
)
