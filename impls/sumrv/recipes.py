"""The sumrv suite's reproductions and claims, declared as data (bench.recipes).

The post has no timings, so the recipes measure what its readers would ask: the time of
a call against m = n for one pair and for a batch, every variant, both precisions and
spaces (the tables); the m x n grid at batch 1024 (strip against cuFFT, and strip's
fraction of the FMA peak); the batch at m = n = 256 (what a call costs whatever its work).
The claims hold the post's statements and our targets beside what the results show.
`bench verify sumrv` checks correctness and `bench profile sumrv` explains the peak
fractions: commands of their own, not recipes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench.recipes import Claim, Measured, Recipe, Sweep, gate, size
from impls.sumrv.figures import AUTO_KEYS, OURS, auto_points, one_run_a_point, summary

SUITE = "sumrv"
PROFILES = ("cpu", "quick", "paper")
TABLE_SIZES = (32, 256, 1024, 4096)  # m = n of the tables and their claims
HOST_BOUND_SIZES = (32, 256)  # of those, where a call at batch 4096 can be its host's time
TABLE_BATCHES = (1, 4096)
PEERS = ("numpy", "cupy-convolve", "fft", "torch-conv1d")
BIG = 256  # m = n from which a batched call has the work to fill the GPU


def _diagonal(sizes: dict[str, tuple[int, ...]], settings: dict[str, dict], **axes) -> tuple[Sweep, ...]:
    """One sweep per m = n (an axis spec cannot tie n to m), each under the profiles
    whose `sizes` list it, with that profile's `settings` (axis specs and measurement
    settings, bench.recipes.size)."""
    every = sorted(set().union(*sizes.values()))
    return tuple(Sweep(SUITE, axes={"m": str(s), "n": str(s), **axes},
                       **{profile: size(**settings.get(profile, {})) if s in sizes.get(profile, ()) else None
                          for profile in PROFILES})
                 for s in every)


# GPU: batch 1 from m = n = 1 to 2^14 (33 and 1000: sizes off the powers of two), batch
# 4096 at the table sizes, 5 repeats; 11 at m = n = 32 and 256, where a call can be its
# host's time, which swings by up to 2x for seconds (kernels/NOTES.md): the slow variants
# spend a point's 1 s budget in one repeat, so the stopping rule adds none, and a median of
# 5 turned auto-fastest. quick: the table sizes, 3 repeats without the stopping rule
# (max_noise 0). CPU (`make figures`): batch 1 and 16, numpy and the numba twins.
_QUICK = {"repeats": 3, "warmup": 1, "max_noise": 0}
TIME_VS_N = Recipe(
    "time-vs-n", "the post's kernel, ours and the peers: time per call against m = n (the post has no timings)",
    sweeps=(*_diagonal({"paper": (1, 32, 33, 256, 1000, 1024, 4096, 16384), "quick": (32, 256, 1024, 4096),
                        "cpu": (32, 256, 1000)},
                       {"paper": {"space": "lin,log"}, "quick": {"space": "lin,log", **_QUICK},
                        "cpu": {"batch": "1,16", "space": "lin,log"}}, batch="1"),
            *_diagonal({"paper": HOST_BOUND_SIZES, "quick": HOST_BOUND_SIZES},
                       {"paper": {"space": "lin,log", "repeats": 11, "warmup": 1},
                        "quick": {"space": "lin,log", **_QUICK}}, batch="4096"),
            *_diagonal({"paper": tuple(s for s in TABLE_SIZES if s not in HOST_BOUND_SIZES), "quick": (1024,)},
                       {"paper": {"space": "lin,log", "repeats": 5, "warmup": 1},
                        "quick": {"space": "lin,log", **_QUICK}}, batch="4096")),
    figures=("sumrv-time-vs-n-batch-1-", "sumrv-time-vs-n-batch-16-", "sumrv-time-vs-n-batch-4096-",
             "sumrv-speedup-batch-1-", "sumrv-speedup-batch-4096-", "sumrv-auto-choice"),
    note="Lines: the median time of a call (a GPU run makes 1 to 100 calls back to back, as a caller in a loop "
         "does); the speed-up figures divide each variant's time by strip's measured in the same repeat. numpy "
         "runs on the CPU in every profile; the CPU profile has numpy and the skew-diagonal kernels' numba twins "
         "only. sumrv-auto-choice lists, at every point where auto ran (this recipe's and the others'), the method "
         "it ran and its time against its fastest rival's: what to call at a shape.")

MN_GRID = Recipe(
    "mn-grid", "ours: strip against cuFFT over the m x n grid, and its fraction of the FMA peak",
    sweeps=(Sweep(SUITE, axes={"batch": "1024", "precision": "f32", "space": "lin"},
                  variants=("strip", "fft", "fftconv", "naive", "auto"),
                  quick=size(m="256,1024,4096", n="256,1024,4096", **_QUICK),
                  paper=size(m="32,256,1024,4096", n="32,256,1024,4096")),),
    figures=("sumrv-peak-fraction-batch-1024-", "sumrv-time-vs-n-batch-1024-", "sumrv-speedup-batch-1024-",
             "sumrv-profile-"),
    note="The profile figures (sumrv-profile-roofline, -stalls) come from `bench profile sumrv -a m=N -a n=N "
         "-a batch=1024 --precision f32,f64 --space lin --variant strip --kernels strip` at N = 256, 1024 and "
         "4096, and at N = 256 with batch 65536 (the systolic strip) (Nsight Compute, the kernel alone at the clocks "
         "the peaks were measured at), commands of their own: the causes of the FMA-peak claim come from them.")

BATCH_SCALING = Recipe(
    "batch-scaling", "ours: the cost of a call against the batch at m = n = 256",
    sweeps=(Sweep(SUITE, axes={"m": "256", "n": "256", "precision": "f32", "space": "lin"},
                  # every GPU variant that takes a batch in one call (cupy-convolve loops over the
                  # pairs in Python: seconds a call at 65536), so auto meets each rival in one run
                  variants=("strip", "fft", "fftconv", "naive", "skewdiag", "skewdiag-det", "torch-conv1d", "auto"),
                  quick=size(batch="1,1024,65536", **_QUICK),
                  paper=size(batch="1,16,256,1024,4096,65536")),),
    note="One m = n, so no figure: the claim on the cost of a call reads it.")

# The regression gate: on the CPU numpy and the numba twins; on a GPU every kernel of the
# suite over naive (the GPU reference), the peers left out (their libraries are not ours),
# at a shape where every kernel's call is GPU work (strip, the fastest: ~0.3 ms a call in
# linear space on an H100): at m = n = 256 a call is mostly its ~15-40 us of Python and
# launch, which moved strip's ratio by up to 64% between two H100s.
GATE = gate(Sweep(SUITE, {"m": "256", "n": "256", "batch": "16", "precision": "f32,f64", "space": "lin,log"},
                  variants=("numpy", "skewdiag", "skewdiag-det"), ci_cpu=size(repeats=3, warmup=1)),
            Sweep(SUITE, {"m": "1024", "n": "1024", "batch": "4096", "precision": "f32", "space": "lin,log"},
                  variants=("naive", "skewdiag", "skewdiag-det", "strip", "fftconv"), ci_gpu=size(**_QUICK)))

RECIPES = (TIME_VS_N, MN_GRID, BATCH_SCALING, GATE)


# Claims: helpers on results.frame("sumrv").
def _gpu(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of variants that ran on the GPU (numpy runs on the CPU in a GPU sweep too)."""
    return df[df["device"] == "gpu"] if not df.empty else df


def _square_times(df: pd.DataFrame, sizes=TABLE_SIZES, batches=None) -> pd.DataFrame:
    """Median µs per call at m = n (figures.summary), one column per variant, indexed by
    (space, precision, batch, n)."""
    if df.empty:
        return pd.DataFrame()
    if batches is not None:
        df = df[df["batch"].isin(batches)]
    table = summary(df, sizes)
    if table.empty:
        return pd.DataFrame()
    return table.pivot_table(index=["space", "precision", "batch", "n"], columns="variant", values="us")


def _point(key) -> str:
    space, precision, batch, n = key
    return f"{precision} {space}, batch {batch}, m = n = {n}"


def _us(value: float) -> str:
    return f"{value:,.3g} µs" if value < 1000 else f"{value / 1000:,.3g} ms"


def _strip_fastest(results) -> Measured | None:
    df = results.frame(SUITE)
    times = _square_times(_gpu(df), batches=TABLE_BATCHES)
    if OURS not in times or times.shape[1] < 2:
        return None
    times = times.dropna(subset=[OURS]).drop(columns="auto", errors="ignore")  # auto runs strip or another
    others = times.drop(columns=OURS)
    best, winner = others.min(axis=1), others.idxmin(axis=1)
    lost = times.index[best < times[OURS]]
    counts = []
    for space, rows in times.groupby(level="space"):
        won = int((best[rows.index] >= rows[OURS]).sum())
        counts.append(f"{won} of {len(rows)} points in {space} space")
    exceptions = [f"{_point(key)}: {winner[key]} {times.loc[key, OURS] / best[key]:.2f}x faster "
                  f"({_us(best[key])} against {_us(times.loc[key, OURS])})" for key in lost]
    sizes = ", ".join(str(n) for n in sorted(times.index.get_level_values("n").unique()))
    batches = " and ".join(str(b) for b in sorted(times.index.get_level_values("batch").unique()))
    text = (f"strip fastest of the GPU variants at {'; '.join(counts)} (m = n of {sizes}, batch {batches})"
            + (". Not at: " + "; ".join(exceptions) if exceptions else ""))
    numpy = _square_times(df[df["variant"] == "numpy"] if not df.empty else df, batches=TABLE_BATCHES)
    if "numpy" in numpy:
        numpy = numpy["numpy"].reindex(times.index)
        cpu_wins = numpy.index[numpy < times[OURS]]
        if len(cpu_wins):
            text += (". numpy on the CPU (not counted) is faster than strip at: "
                     + "; ".join(f"{_point(key)} ({_us(numpy[key])} against {_us(times.loc[key, OURS])})"
                                 for key in cpu_wins))
    return Measured((len(times) - len(lost), len(times)), text)


AUTO_SLACK = 1.05  # the most auto may lag the fastest variant by (issue: never worse than 1.05x)


def _auto_fastest(results) -> Measured | None:
    """auto's time per call over its fastest rival's at every point where auto ran
    (figures.auto_points: per repeat, auto over that repeat's fastest rival, the median of
    those ratios): the worst ratio, and the points beyond AUTO_SLACK."""
    points = auto_points(results.frame(SUITE)).set_index(AUTO_KEYS)
    ratio = points["auto over rival"].dropna()
    if ratio.empty:
        return None
    winners, choices = points["fastest rival"], points["auto ran"].dropna()
    peers = points["faster non-rivals"].dropna()
    unpaired = points.index[points["auto over rival"].isna()]
    absent = points["absent"].dropna()

    def point(key) -> str:
        space, precision, batch, m, n = key
        return f"{precision} {space}, batch {batch}, m = {m}, n = {n}"

    def against(key) -> str:
        return f"against {winners[key]}" + (f", auto ran {choices[key]}" if key in choices else "")

    worst = ratio.idxmax()
    behind = ratio[ratio > AUTO_SLACK].sort_values(ascending=False)
    text = (f"auto's time over the fastest rival's at {len(ratio)} points: median {ratio.median():.2f}x, "
            f"worst {ratio[worst]:.2f}x ({point(worst)}, {against(worst)})")
    if len(behind):
        text += (f"; beyond {AUTO_SLACK}x at {len(behind)}: "
                 + "; ".join(f"{point(key)}: {ratio[key]:.2f}x {against(key)}" for key in behind.index))
    if len(choices):
        # Not held against the fastest variant: auto's plans launch with less host work than the
        # variants, so where a call is its host's time the plans may rank otherwise.
        ran = choices.value_counts()
        text += ("; auto ran " + ", ".join(f"{name} at {count}" for name, count in ran.items())
                 + f" of the {len(choices)} points where its choice was recorded")
    if len(peers):
        text += "; in log space, variants faster than auto (not rivals: their error is normwise): " + "; ".join(
            f"{point(key)}: {by_peer}" for key, by_peer in peers.items())
    if len(unpaired):
        text += "; auto measured in no repeat beside a rival at " + "; ".join(map(point, unpaired))
    if len(absent):
        text += ("; no run measured auto beside every variant at " + "; ".join(
            f"{point(key)} (absent: {variants})" for key, variants in absent.items()))
    return Measured(float(ratio[worst]), text)


def _crossover(results) -> Measured | None:
    df = _gpu(results.frame(SUITE))
    if df.empty:
        return None
    grid = df[(df["batch"] == 1024) & (df["precision"] == "f32") & (df["space"] == "lin")]
    grid = one_run_a_point(grid, ["m", "n"])
    times = grid.groupby(["m", "n", "variant"])["call_s"].median().unstack("variant")
    if OURS not in times or "fft" not in times:
        return None
    times = times.dropna(subset=[OURS, "fft"])
    if times.empty:
        return None
    ratio = times[OURS] / times["fft"]  # above 1: FFT faster
    fft_wins = [(m, n) for (m, n), r in ratio.items() if r > 1]
    parts = [f"{m} x {n}: FFT {ratio[m, n]:.2f}x faster ({_us(times.loc[(m, n), 'fft'] * 1e6)} against "
             f"{_us(times.loc[(m, n), OURS] * 1e6)})" for m, n in fft_wins]
    strip_wins = ratio[ratio <= 1]
    if not strip_wins.empty:
        m, n = strip_wins.idxmax()
        parts.append(f"closest where strip is faster: {m} x {n} ({_us(times.loc[(m, n), OURS] * 1e6)} against "
                     f"{_us(times.loc[(m, n), 'fft'] * 1e6)})")
    peak = grid.loc[grid["variant"] == OURS, "fma_gflops"].median() if "fma_gflops" in grid else np.nan
    if fft_wins and np.isfinite(peak):
        m, n = max(fft_wins, key=lambda mn: mn[0] * mn[1])
        at_peak = 2 * m * n * 1024 / (peak * 1e9) * 1e6
        parts.append(f"at {m} x {n} even a kernel at the FMA peak would take {_us(at_peak)}")
    text = (f"FFT faster at {len(fft_wins)} of {len(times)} points of the grid (f32, batch 1024)"
            + (": " if parts else "") + "; ".join(parts))
    if "fftconv" in times:  # our FFT path, with fewer passes than the peer's, crosses over sooner
        ours = (times[OURS] / times["fftconv"]).dropna()
        ours = ours[ours > 1]
        text += (f"; our fftconv faster than strip at {len(ours)}" + (": " if len(ours) else "")
                 + ", ".join(f"{m} x {n} ({r:.2f}x)" for (m, n), r in ours.items()))
    return Measured(fft_wins, text)


def _profiled(results, precision: str = "f32") -> dict:
    """(m, batch) -> strip's kernel alone at m = n in linear space in the newest `bench profile`:
    batch, seconds, useful and issued fractions of the FMA peak (the profile run's), warps
    active % and issue slots busy %; {} without one."""
    from bench.figures import latest_profile
    from bench.profile import kernel_rates

    path = results.directory / f"{SUITE}-profile.csv"
    if not path.exists():
        return {}
    run = latest_profile(path)
    rows = run.rows[(run.rows["variant"] == OURS) & (run.rows["precision"] == precision)
                    & (run.rows["space"] == "lin") & (run.rows["m"] == run.rows["n"])]
    peak = (run.info.get("peaks") or {}).get(f"fma_gflops_{precision}")
    if rows.empty or not peak:
        return {}

    def counter(m, batch, metric):
        value = rows.loc[(rows["m"] == m) & (rows["batch"] == batch) & (rows["metric"] == metric), "value"]
        return float(value.iloc[0]) if len(value) else float("nan")

    out = {}
    for _, rate in kernel_rates(rows).dropna(subset=["seconds"]).iterrows():
        m, batch, seconds = int(rate["m"]), int(rate["batch"]), float(rate["seconds"])
        out[m, batch] = {"batch": batch, "seconds": seconds, "useful": 2 * m * m * batch / seconds / 1e9 / peak,
                         "issued": rate[f"flops_{precision}"] / seconds / 1e9 / peak,
                         "kernel": rate["kernel"],
                         "warps": counter(m, batch, "sm__warps_active.avg.pct_of_peak_sustained_active"),
                         "busy": 100 * rate["issue_frac"]}
    return out


FIXED_COST_MAX_M = 1024  # m = n up to which a call at batch 1 is its host's fixed cost (Python, allocation, launch)


def _fma_peak(results) -> Measured | None:
    """strip's least median fraction of the FMA peak (f32, linear space, m = n >= BIG) over
    the points whose work at the peak takes at least a call's fixed cost (strip's median call
    at batch 1, m = n <= FIXED_COST_MAX_M), where the kernel, not the host, can set the time;
    the points left out are named with their fractions. Without a call at batch 1 measured,
    every batch of at least 1024 is judged."""
    df = _gpu(results.frame(SUITE))
    if df.empty or "peak_frac" not in df:
        return None
    rows = df[(df["variant"] == OURS) & (df["precision"] == "f32") & (df["space"] == "lin") & (df["m"] == df["n"])]
    fixed = rows.loc[(rows["batch"] == 1) & (rows["m"] <= FIXED_COST_MAX_M), "call_s"].median()
    rows = rows[(rows["m"] >= BIG) & (rows["batch"] > 1)]
    stats = rows.groupby(["m", "batch"]).agg(frac=("peak_frac", "median"), peak=("fma_gflops", "median")).dropna()
    if stats.empty:
        return None
    size, batch = (stats.index.get_level_values(level) for level in ("m", "batch"))
    at_peak = 2.0 * size * size * batch / (stats["peak"] * 1e9)
    large = at_peak >= fixed if np.isfinite(fixed) else batch >= 1024
    judged, left = stats[large], stats[~large]
    if judged.empty:
        return None

    def listed(points) -> str:
        return "; ".join(f"{m}: " + ", ".join(f"{s.frac:.3f} (batch {b})" for (_, b), s in
                                             by_m.sort_index(ascending=False).iterrows())
                         for m, by_m in points.groupby(level="m"))
    if np.isfinite(fixed):
        text = (f"a call's fixed cost (strip at batch 1, m = n <= {FIXED_COST_MAX_M}): {_us(fixed * 1e6)}. Per call, "
                f"where the work at the peak takes at least that, m = n = {listed(judged)}")
        if len(left):
            text += f"; left out (work at the peak under the fixed cost), m = n = {listed(left)}"
    else:
        text = f"no call at batch 1 measured: per call at batch >= 1024, m = n = {listed(judged)}"
    profiled = _profiled(results)
    if profiled:
        text += (". The kernel alone (bench profile): "
                 + "; ".join(f"{m} at batch {b} ({k['kernel']}): {k['useful']:.3f} in useful FMAs, "
                             f"{k['issued']:.3f} in issued ones, {k['warps']:.0f}% of warps active, issue slots "
                             f"{k['busy']:.0f}% busy" for (m, b), k in sorted(profiled.items())))
    return Measured(float(judged["frac"].min()), text)


def _log_peers(results) -> Measured | None:
    df = results.frame(SUITE)
    times = _square_times(df[df["space"] == "log"] if not df.empty else df, batches=(4096,))
    peers = times[[c for c in PEERS if c in times]]
    if OURS not in times or peers.empty:
        return None
    ratio = (peers.min(axis=1) / times[OURS]).dropna()  # above 1: strip faster than the fastest peer
    best = peers.idxmin(axis=1)
    below = ratio[ratio.index.get_level_values("n") < max(TABLE_SIZES)]
    if below.empty:
        return None
    def factor(r: float) -> str:  # a near tie with its third digit: 1.00x would read as a clear win
        return f"{r:.3f}x" if abs(r - 1) < 0.01 else f"{r:.2f}x"

    parts = [f"{key[1]} m = n = {key[3]}: " + (f"{factor(r)} faster than {best[key]}" if r >= 1 else
                                               f"{best[key]} {factor(1 / r)} faster")
             for key, r in ratio.items()]
    return Measured(float(below.min()), "strip against the fastest peer (log space, batch 4096): " + "; ".join(parts))


def _log_cost(results) -> Measured | None:
    times = _square_times(_gpu(results.frame(SUITE)), batches=(4096,))
    if OURS not in times:
        return None
    strip = times[OURS].unstack("space") if "space" in times.index.names else pd.DataFrame()
    if not {"lin", "log"} <= set(strip.columns):
        return None
    ratio = (strip["log"] / strip["lin"]).dropna()
    ratio = ratio[ratio.index.get_level_values("n") >= BIG]
    if ratio.empty:
        return None
    parts = [f"{precision} m = n = {n}: {r:.2f}x" for (precision, _, n), r in ratio.items()]
    return Measured(float(ratio.max()), "strip's time in log space over its time in linear space, batch 4096: "
                    + "; ".join(parts))


def _skewdiag_speed(results) -> Measured | None:
    df = _gpu(results.frame(SUITE))
    times = _square_times(df, sizes=[s for s in TABLE_SIZES if s >= BIG], batches=(4096,))
    if not {"skewdiag", "naive"} <= set(times.columns):
        return None
    ratio = (times["naive"] / times["skewdiag"]).dropna()  # above 1: skewdiag faster
    if ratio.empty:
        return None
    text = (f"naive (one thread per output) {1 / ratio.max():.1f}x to {1 / ratio.min():.1f}x faster than skewdiag "
            f"(batch 4096, m = n >= {BIG}, both spaces and precisions)")
    lin = df[(df["variant"].isin(["skewdiag", "skewdiag-det"])) & (df["space"] == "lin") & (df["batch"] == 4096)
             & (df["m"] == df["n"]) & (df["m"] >= BIG)]
    fractions = lin.groupby(["variant", "precision", "m"])["peak_frac"].median().dropna()
    if not fractions.empty:
        text += (f"; skewdiag and skewdiag-det at {fractions.min():.1%} to {fractions.max():.1%} of the FMA peak "
                 "(linear space)")
    if OURS in times:
        strip = (times["skewdiag"] / times[OURS]).dropna()
        text += f"; strip {strip.min():.0f}x to {strip.max():.0f}x faster than skewdiag"
    return Measured(float(ratio.max()), text)


def _atomic_free(results) -> Measured | None:
    times = _square_times(_gpu(results.frame(SUITE)), batches=TABLE_BATCHES)
    if not {"skewdiag", "skewdiag-det"} <= set(times.columns):
        return None
    ratio = (times["skewdiag-det"] / times["skewdiag"]).dropna()  # above 1: the atomic-free one slower
    batched = ratio[(ratio.index.get_level_values("batch") > 1) & (ratio.index.get_level_values("n") >= BIG)]
    if batched.empty:
        return None
    parts = []
    for (batch, space), r in ratio.groupby([ratio.index.get_level_values("batch"),
                                            ratio.index.get_level_values("space")]):
        parts.append(f"batch {batch}, {space} space: {r.min():.2f}x to {r.max():.2f}x")
    return Measured(float(batched.max()), "skewdiag-det's time over skewdiag's (m = n of "
                    + ", ".join(str(n) for n in sorted(set(ratio.index.get_level_values("n")))) + "): "
                    + "; ".join(parts))


def _error_over_bound(results, variants) -> pd.DataFrame:
    """The largest max_rel_error of each variant and precision in linear space over its
    componentwise bound (suite.tolerance: (k + 1) u, k = min(m, n)); columns variant,
    precision, error, ratio."""
    from impls.sumrv.suite import tolerance

    df = results.frame(SUITE)
    if df.empty:
        return pd.DataFrame()
    rows = df[df["variant"].isin(variants) & (df["space"] == "lin")].dropna(subset=["max_rel_error"])
    if rows.empty:
        return pd.DataFrame()
    worst = rows.groupby(["variant", "precision", "m", "n"])["max_rel_error"].max().reset_index()
    bound = [tolerance(p, m, n, np.zeros(1), False, True) for p, m, n in worst[["precision", "m", "n"]].values]
    worst = worst.assign(ratio=worst["max_rel_error"] / np.asarray(bound, float))
    top = worst.loc[worst.groupby(["variant", "precision"])["ratio"].idxmax()]
    return top.rename(columns={"max_rel_error": "error"})[["variant", "precision", "m", "n", "error", "ratio"]]


def _describe_errors(top: pd.DataFrame) -> str:
    return "; ".join(f"{r.variant} {r.precision} {r.error:.2g} ({r.ratio:.3g} of the bound, at {r.m} x {r.n})"
                     for r in top.itertuples())


def _kernel_correct(results) -> Measured | None:
    top = _error_over_bound(results, ("skewdiag", "skewdiag-det"))
    if top.empty:
        return None
    return Measured(float(top["ratio"].max()), "largest relative error of an output probability on random inputs, "
                    "linear space, every measured point: " + _describe_errors(top))


def _fft_accuracy(results) -> Measured | None:
    top = _error_over_bound(results, (OURS, "fft"))
    if top.empty or not {OURS, "fft"} <= set(top["variant"]):
        return None
    ours, fft = top[top["variant"] == OURS], top[top["variant"] == "fft"]
    return Measured((float(ours["ratio"].max()), float(fft["ratio"].min())),
                    "largest relative error of an output probability over the componentwise bound (k + 1) u, "
                    "linear space: " + _describe_errors(top))


def _call_cost(results) -> Measured | None:
    df = _gpu(results.frame(SUITE))
    at_big = [k for (m, _), k in sorted(_profiled(results).items()) if m == BIG]
    kernel = at_big[0] if at_big else None  # the smallest batch profiled
    if df.empty or kernel is None:
        return None
    rows = df[(df["variant"] == OURS) & (df["m"] == BIG) & (df["n"] == BIG) & (df["precision"] == "f32")
              & (df["space"] == "lin")]
    stats = rows.groupby("batch").agg(us=("call_s", "median"), frac=("peak_frac", "median"),
                                      peak=("fma_gflops", "median"))
    if not {1, kernel["batch"]} <= set(stats.index):
        return None
    stats["us"] *= 1e6
    batch, fixed = kernel["batch"], stats.loc[1, "us"]
    half_peak = 2 * BIG * BIG * batch / (0.5 * stats.loc[batch, "peak"] * 1e9) * 1e6
    text = (f"strip at m = n = {BIG} (f32): a call at batch 1 takes {_us(fixed)}; at batch {batch} the kernel alone "
            f"(bench profile) takes {_us(kernel['seconds'] * 1e6)}, a whole call {_us(stats.loc[batch, 'us'])} "
            f"(half the FMA peak would need the call in {_us(half_peak)}). Time per call against the batch: "
            + "; ".join(f"{b}: {_us(s.us)} ({s.frac:.3f} of the FMA peak)" for b, s in stats.iterrows()))
    return Measured(kernel["seconds"] * 1e6 / fixed, text)


CLAIMS = (
    Claim("skewdiag-speed",
          "Summing each skew diagonal of a 32 x 32 tile of p q^T inside one warp with shuffles, the tile in shared "
          "memory and one atomicAdd a diagonal, is the way to make the sum fast on a GPU (the post's design; "
          "it gives no timings)",
          _skewdiag_speed, lambda v: v >= 1,
          "holds if skewdiag (the post's kernel, its bugs fixed) is at least as fast as naive, one thread per output, "
          f"at batch 4096, m = n >= {BIG}",
          why="Each term costs skewdiag a store to and a load from the shared tile, each 32 terms of a diagonal two "
              "full-warp butterflies of five shuffles (the lanes of the two diagonals a warp holds masked apart), "
              "and each tile a block barrier and 63 atomics: many instructions per multiply-add where naive's "
              "loop issues one FMA a term on cached inputs and strip's register tiles fewer still. Not profiled.",
          recipe="time-vs-n"),
    Claim("atomic-free",
          "atomicAdd reduces the diagonals across blocks; other reduction approaches might be used (the post)",
          _atomic_free, lambda v: v <= 1.1,
          f"holds if skewdiag-det (no atomics: diagonals to a buffer summed in a fixed order, bit-reproducible) "
          f"takes at most 1.1x skewdiag's time at batch 4096, m = n >= {BIG}",
          why="skewdiag-det writes every tile's 63 diagonal sums to a buffer and a second kernel adds them in a fixed "
              "order: at batch 1 the second launch costs more than the atomics saved; with a batch, the atomics' "
              "contention (and in log space their compare-and-swap loops) costs more than the buffer.",
          recipe="time-vs-n"),
    Claim("kernel-correct",
          "The post's kernel is an untested sketch; with its bugs fixed (eleven, among them a shared tile without "
          "an element type, no barrier, tile indices out of bounds, and a butterfly that mixes two diagonals) "
          "it computes the distribution of x + y",
          _kernel_correct, lambda v: v <= 1,
          "holds if skewdiag and skewdiag-det (GPU kernels, or their numba twins on a CPU) stay within the "
          "componentwise bound (k + 1) u relative of every output in linear space (k = min(m, n), u the unit "
          "roundoff); `bench verify sumrv` also checks exactness on dyadic inputs",
          why="An output beyond the bound is a bug in the kernel or in its bound (suite.tolerance): "
              "`bench verify sumrv --backend gpu` finds which.",
          recipe="time-vs-n"),
    Claim("log-cost",
          "It may be beneficial to work with log-probabilities rather than probabilities (the post)",
          _log_cost, lambda v: v <= 2,
          f"holds if strip in log space takes at most twice its linear-space time at batch 4096, m = n >= {BIG}; "
          "log space keeps probabilities far below 1e-300 that linear space flushes to zero (verified by "
          "`bench verify sumrv --inputs tiny`)",
          why="Per output log-sum-exp costs an exp a term: f32's __expf is one MUFU instruction, f64's exp dozens, "
              "so log space is bound by exp; where the spreads of a pair's two rows allow, strip shifts each row by "
              "its largest value once and runs the linear kernel (an exp a value, not a term), and the pairs left "
              "take the per-output kernel.",
          recipe="time-vs-n"),
    Claim("auto-fastest",
          "Ours (target): auto, which times the plans of strip, naive, skewdiag-det and (linear space) fftconv on "
          "the first call with a shape and keeps the fastest, is within 1.05x of the fastest variant of any kind at "
          "every measured point, log space included",
          _auto_fastest, lambda v: v <= AUTO_SLACK,
          f"holds if auto's time per call is at most {AUTO_SLACK}x its fastest rival's at every point where it was "
          "measured (the median over repeats of auto's time over the fastest rival's of that repeat; rivals: every "
          "other GPU variant, ours and the peers, in linear space, those whose error is componentwise in log space)",
          why="auto keeps, for each shape, strides, dtype and space, a plan of its choice: the kernels' launches "
              "worked out at the first call, so a later call costs its allocation and launches, not the checks and "
              "choices that the variants, taking any arrays, make at every call. Where a call is its host's Python "
              "and launch (batch 1, and small m = n at batch 1024-4096) that made auto 0.67-0.89x the fastest "
              "variant's call (loops of 100 calls alternated 16 times, one process, H200; kernels/NOTES.md). "
              "fftconv, the fft peer's transforms with fewer passes, took 0.52-0.78x the peer's call where an FFT "
              "won. auto decides from timed loops of 4 to 8 calls of each candidate, in turn for three rounds, "
              "those 1.5x behind after a round timed no more: a single call shows the host's time between "
              "fftconv's launches, which a loop hides, and chose fftconv where strip was 1.28x faster (f32, batch "
              "1024, m = n = 1024). Every timed run follows an untimed call of its own: the first call after "
              "another variant's kernels took up to 1.3x as long, noise beyond the slack where a run is one call "
              "(kernels/NOTES.md). In log space no FFT is among auto's candidates (through a shift by each vector's "
              "maximum its error is normwise: the small outputs lose their digits, the fft-accuracy claim), so it "
              "is no rival there, and where one is faster the text names it. At f32 log, batch 4096, m = n = 256 "
              "strip's shift per pair (four launches) is its host's time (46.8 us a call on the GPU, 46-90 us on "
              "the host; kernels/NOTES.md), whose speed swings for seconds: auto's ratio there spread from 0.87x "
              "to 1.43x over a run's repeats (H200), so the points at m = n <= 256 take 11 repeats, not 5.",
          recipe="time-vs-n"),
    Claim("strip-fastest",
          "Ours (target): strip is the fastest GPU variant at every point of the tables (m = n of 32 to 4096, "
          "batch 1 and 4096, f32 and f64, linear and log space)",
          _strip_fastest, lambda v: v[0] == v[1],
          "holds if strip's median time per call is the least of the GPU variants at every such point measured",
          why="FFT does O(L log L) work a pair (L = m + n - 1 rounded up to a fast length) where strip does m n "
              "multiply-adds: at the largest sizes with a full batch even a kernel at the FMA peak would be slower "
              "than cuFFT (the fft-crossover claim computes it), and where FFT wins by little strip runs below "
              "the peak (the fma-peak claim). Where naive wins at a small size, strip splits j across warps when "
              "a pair cannot fill the GPU (a second launch and a buffer) or has too few warps to hide latency "
              "(not profiled). FFT is no alternative for tail "
              "probabilities: its error is normwise (the fft-accuracy claim). Where numpy on the CPU (not counted) "
              "is faster at the smallest sizes, a GPU call's Python and launch time through CuPy exceeds the "
              "whole convolution on the CPU.",
          recipe="time-vs-n"),
    Claim("log-beats-peers",
          "Ours: in log space strip, with a shift per pair where no term can underflow, is faster than every peer "
          "below m = n = 4096 (batch 4096)",
          _log_peers, lambda v: v >= 1,
          "holds if strip's median time per call is below every peer's (numpy, cupy.convolve, cuFFT, cuDNN, each "
          "through a per-vector max shift) at batch 4096 and every m = n below 4096, both precisions",
          why="The peers shift each vector once and run a linear-space library (an exp a value, O(L log L) for "
              "FFT); strip's shifted path costs the same exps plus m n multiply-adds, so at the largest sizes FFT's "
              "fewer operations win, as in linear space. The peers also lose every probability the shift leaves "
              "below the smallest normal number.",
          recipe="time-vs-n"),
    Claim("fft-accuracy",
          "Ours: strip's error is componentwise, within (k + 1) u of every output probability; FFT's is normwise, "
          "relative to the largest output, so tail probabilities lose their digits",
          _fft_accuracy, lambda v: v[0] <= 1 < v[1],
          "holds if strip is within the componentwise bound (k + 1) u everywhere in linear space and FFT exceeds "
          "it",
          why="strip adds positive terms (any order is within gamma_{k+1}); FFT's rounding errors are spread over "
              "every output at the size of the largest one, which a small probability cannot absorb.",
          recipe="time-vs-n"),
    Claim("fft-crossover",
          "Ours: strip (m n multiply-adds a pair) is faster than batched cuFFT wherever min(m, n) <= 1024 on the "
          "grid m, n of 32 to 4096 (f32, batch 1024); FFT wins only at 4096 x 4096",
          _crossover, lambda v: all(min(m, n) > 1024 for m, n in v),
          "holds if FFT is faster only at points where both m and n exceed 1024",
          why="FFT does O(L log L) work a pair, strip O(m n): past the crossover no direct kernel can win, not "
              "even one at the whole FMA peak (ours computes that time). The claim is the peer's FFT against strip; "
              "our fftconv makes the same transforms with fewer passes over memory and crosses over sooner, and "
              "auto takes it where it measures faster (the auto-fastest claim).",
          recipe="mn-grid"),
    Claim("fma-peak",
          "Ours (target): 50% of the FP32 FMA peak per call at m = n >= 256 wherever a call's work is large enough "
          "for its fixed cost not to dominate: its multiply-adds at the peak take at least a call at batch 1",
          _fma_peak, lambda v: v >= 0.5,
          f"holds if strip's median fraction of the FMA peak (f32, linear space) is at least 0.5 at every m = n >= "
          f"{BIG} measured whose work at the peak takes at least strip's median call at batch 1 (m = n <= "
          f"{FIXED_COST_MAX_M}: the host's Python, allocation and launch)",
          why="At m = n = 256 (from the profile, `bench profile` on the mn-grid recipe's points and at batch "
              "65536): (1) a call costs CuPy's Python allocation and launch on the CPU, more than the kernel, so at "
              "batch 1024 the call is bound by the CPU (the call-cost claim); (2) there a warp's strip of 256 "
              "outputs meets twice the values of j that each output needs, so about half the FMAs issued fall on "
              "the zero padding (the profile's useful against issued FMAs), and the grid is too small to fill the "
              "SMs (sm__warps_active, sm__issue_active); (3) at batch 4096 a warp takes a whole pair (staged "
              "once) in strips of 128, a third of the FMAs on the padding, and its issue slots are mostly busy: "
              "the shared-memory loads and the padding's FMAs, not the grid, bind it (a scratch comparison of 64 "
              "outputs a strip, R = 8 or R = 16 in 8 groups, and blocks of 64 or 256 threads found none faster); "
              "(4) from batch 16384 the systolic strip issues FMAs on the padding only at the edges of the "
              "parallelogram of terms (the profile's useful against issued FMAs at batch 65536); in blocks of 8 "
              "outputs a lane, a warp a pair (55 registers, half its warps resident), instruction issue binds it, "
              "its issue slots mostly busy, a third of its instructions not FMAs (the shared-memory loads and "
              "stores of its register tiles, twice as many a multiply-add as blocks of 16 outputs need, which had "
              "a quarter of the warps resident and waited on the FFMAs' dispatch; one barrier a round, not two, "
              "took 7% of its instructions away, and q staged 16 bytes a copy with the write-back by a pointer "
              "step another 5%); at batch 16384 the grid's last wave is part full: kernels/NOTES.md.",
          recipe="mn-grid"),
    Claim("call-cost",
          "Ours: at m = n = 256 a GPU call's fixed cost (CuPy's Python, allocation and launch: about 15 µs) "
          "exceeds its kernel's time at batch 1024, so the call, not the kernel, sets the time there",
          _call_cost, lambda v: v < 1,
          "holds if strip's kernel alone at the profiled batch (bench profile) takes less time than a whole call "
          "at batch 1 (the call's fixed cost), at m = n = 256, f32",
          why="When the kernel takes longer than the fixed cost of a call, the kernel's own limits (the fma-peak "
              "claim's causes) set the time at that batch, not the host.",
          recipe="batch-scaling"),
)
