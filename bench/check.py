"""Regression check: did a metric change between a baseline and a new results file?

Each gated metric is gated as its schema says:
- "ratio": the variant's value over the reference variant's, both from the same run,
  group and repeat (measured interleaved, so machine drift cancels); and, for the
  time (`seconds`), the reference's own time over the calibration measured in the
  same repeat, which catches a regression of the reference or of every variant at
  once, with a threshold of its own.
- "tolerance": the value itself (a quality metric, its worst over every run's repeats,
  in its own direction: a median would hide a repeat that failed now and then), worse
  by more than the metric's relative tolerance (no significance test: a quality
  metric is often deterministic), relative to the baseline's worst or to the metric's
  resolution where that is larger (an error of 0 against one of 1e-14: rounding).
Every run of a point measured with the latest code version counts (a run is one
process; on a shared machine a whole process can be slowed), and a side's ratio is
the median over the repeats of its least disturbed run. A time change is a
regression only when it is both beyond the threshold and significant (two-sided Mann-Whitney U,
asv's rule) on the runs' medians where each side has runs enough for the test to reach alpha
(4 a side at 0.05), else on the repeats of all runs: a process is what a shared machine
disturbs, and its repeats share its fortune (on the 2-core CI machines the emulated warps of
alg4/alg7 ran 1.6-1.8x apart by where a process had put their scratch), so they are not
samples of their own. Where the
samples are too few for the test ever to reach alpha (3 repeats a side: p >= 0.1), the
threshold alone decides (asv's fallback), and the p column says so. Points and variants in the
baseline that are missing from the new file are regressions too, unless allowed.
BASE's schema gates (a change cannot loosen its own check by declaring its metrics anew; what
an older baseline's schema lacks comes from the installed suite), each backend's rows over its
own reference. Where NEW has a variant beside its reference in one run and repeat, BASE must
have it so too (and each side a calibration where the other has one), else the gate would
silently vanish: bad input. NEW must be measured apart from BASE (no run of both), over the same
calibration job (its runs' fingerprints), and BASE not slowed on purpose (BENCH_SLOWDOWN); a
quality value of NEW that is not finite where BASE's are is WORSE, whatever the others.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from rich.table import Table
from scipy.stats import mannwhitneyu

from bench import slowdown
from bench.errors import BenchError
from bench.results import gated_metrics, key_columns, latest_code, load, read_sidecar, schema_for
from bench.suite import get_suite

CALIBRATION = "calibration"
REGRESSIONS = ("SLOWER", "WORSE", "MISSING")
VERDICT_STYLES = {"SLOWER": "bold red", "WORSE": "bold red", "MISSING": "bold red", "FASTER": "bold green",
                  "BETTER": "bold green", "SAME": "dim"}
STAT_COLUMNS = ("metric", "against", "base", "new", "base_ratio", "new_ratio", "change", "p_value", "verdict",
                "n_base", "n_new")


def _paired(df: pd.DataFrame, keys: list[str], metric: str, reference: str) -> pd.DataFrame:
    """Per-repeat ratios: every variant over the reference, and the reference over
    the calibration. Columns: keys..., variant, against, run_id, ratio."""
    pairing = [*keys, "run_id", "group", "repeat"]
    if df.duplicated([*pairing, "variant"]).any():
        raise BenchError("several rows share one (point, run_id, group, repeat, variant)")
    wide = df.set_index([*pairing, "variant"])[metric].unstack("variant")
    frames = []
    if reference in wide:
        over_reference = wide.drop(columns=reference).div(wide[reference], axis=0)
        frames.append(over_reference.stack().rename("ratio").reset_index().assign(against=reference))
        if metric == "seconds" and "calibration_s" in df and df["calibration_s"].notna().any():
            calibration = df[df["variant"] == reference].set_index(pairing)["calibration_s"]
            own = (wide[reference] / calibration.reindex(wide.index)).rename("ratio").reset_index()
            frames.append(own.assign(variant=reference, against=CALIBRATION))
    if not frames:
        return pd.DataFrame(columns=[*keys, "variant", "against", "run_id", "ratio"])
    long = pd.concat(frames, ignore_index=True).dropna(subset=["ratio"])
    return long.drop(columns=["group", "repeat"])


def _run_medians(values: pd.DataFrame) -> pd.Series:
    """Each run's median ratio; the smallest is the least disturbed run, the one that other
    load slowed least."""
    return values.groupby("run_id")["ratio"].median()


def _samples(base: pd.DataFrame, new: pd.DataFrame, base_runs: pd.Series, new_runs: pd.Series,
             alpha: float) -> tuple[pd.Series, pd.Series]:
    """What the test compares: the runs' medians where both sides have runs enough for the
    test to reach alpha, else every repeat's ratio (see the module doc)."""
    if _smallest_p(len(base_runs), len(new_runs)) < alpha:
        return base_runs, new_runs
    return base["ratio"], new["ratio"]


def _verdict(change: float, p_value: float, threshold: float, alpha: float, better: str, unit: str) -> str:
    worse_words = ("SLOWER", "FASTER") if unit == "s" else ("WORSE", "BETTER")
    grew, shrank = change > 1 + threshold, change < 1 / (1 + threshold)
    if p_value >= alpha or not (grew or shrank):
        return "SAME"
    worse = grew if better == "lower" else shrank
    return worse_words[0] if worse else worse_words[1]


def _prepare(df: pd.DataFrame, schema: dict, side: str, metric: str) -> pd.DataFrame:
    df = latest_code(df, schema)
    if metric not in df:
        raise BenchError(f"{side}: no column {metric!r}")
    df = df.assign(**{metric: pd.to_numeric(df[metric], errors="coerce")})
    if "calibration_s" in df:
        df = df.assign(calibration_s=pd.to_numeric(df["calibration_s"], errors="coerce"))
    return df


def compare(new: pd.DataFrame, base: pd.DataFrame, schema: dict, threshold: float = 0.10,
            calibration_threshold: float = 0.25, alpha: float = 0.05, metrics: list[str] | None = None,
            new_schema: dict | None = None) -> pd.DataFrame:
    """One row per (point, variant, gated metric, against) of the baseline, gated as BASE's
    `schema` says; see the module doc."""
    keys = key_columns(schema)
    if new_schema is not None and set(key_columns(new_schema)) != set(keys):
        raise BenchError(f"NEW and BASE have different axes: NEW {sorted(key_columns(new_schema))} vs BASE "
                         f"{sorted(keys)}")
    shared = sorted(set(new["run_id"]) & set(base["run_id"]))
    if shared:
        runs = ", ".join(shared[:2]) + (", ..." if len(shared) > 2 else "")
        raise BenchError(f"NEW and BASE share {len(shared)} run(s) ({runs}): NEW must be measured apart from BASE "
                         "(the same results given twice, or results appended to the baseline's folder, hold both)")
    # The rows of each backend over its own reference: a file may hold CPU and GPU sweeps.
    references = {b: reference_for(schema, b) for b in sorted({*new["backend"], *base["backend"]})}
    gated = gated_metrics(schema)
    if metrics:
        unknown = [m for m in metrics if m not in gated]
        if unknown:
            raise BenchError(f"no gated metric {unknown[0]!r}; gated: {', '.join(gated)}")
        gated = {m: gated[m] for m in metrics}
    by = [*keys, "variant"]
    group_by = [*by, "against"]
    if new[by].astype(str).drop_duplicates().merge(base[by].astype(str).drop_duplicates()).empty:
        raise _nothing_matches(new, base, keys)  # first: how the files differ, not one side's missing reference
    rows = []
    for metric, role in gated.items():
        sides = {side: _prepare(df, schema, side.upper(), metric) for side, df in (("base", base), ("new", new))}
        # A time's medians; a quality value's worst (in its own direction), which the gate compares:
        # a median would hide a repeat that failed now and then.
        summarize = "median" if role["gate"] == "ratio" else "max" if role["better"] == "lower" else "min"
        absolute = {side: df.groupby(by, dropna=False)[metric].agg(summarize) for side, df in sides.items()}
        if role["gate"] == "ratio":
            parts = {side: dict(iter(df.groupby("backend"))) for side, df in sides.items()}
            for side, by_backend in parts.items():
                for backend, part in by_backend.items():
                    if references[backend] not in set(part["variant"]):
                        raise BenchError(f"{side.upper()} has no {backend} rows of the reference variant "
                                         f"{references[backend]!r}, so {metric} cannot be compared as a ratio to it")
            compared = {side: pd.concat([_paired(part, keys, metric, references[backend])
                                         for backend, part in by_backend.items()], ignore_index=True)
                        for side, by_backend in parts.items()}
            for backend, part in parts["base"].items():
                _require_pairs({"base": part, "new": parts["new"].get(backend, part.iloc[:0])}, compared,
                               by, metric, references[backend])
        else:
            # An empty cell is no value: judged below.
            compared = {side: df.assign(against="", ratio=df[metric])[[*by, "against", "run_id", "ratio"]]
                        for side, df in sides.items()}
        groups = {side: dict(iter(frame.groupby(group_by, dropna=False))) for side, frame in compared.items()}
        for key, base_values in groups["base"].items():
            base_finite = bool(np.isfinite(base_values["ratio"]).all())
            base_values = base_values.dropna(subset=["ratio"])
            if base_values.empty:  # BASE holds no value here: nothing to gate
                continue
            point = dict(zip(group_by, key))
            row = {**point, "metric": metric, "base": absolute["base"].get(key[:-1], np.nan),
                   "new": absolute["new"].get(key[:-1], np.nan), "n_base": len(base_values)}
            new_values = groups["new"].get(key)
            # A quality value of NEW that is not finite where BASE's are: NaN or empty (in every
            # repeat too: the point and variant are there, their gate would vanish), an error of inf.
            failed = False
            if new_values is not None and role["gate"] == "tolerance":
                ratio = new_values["ratio"]
                failed = base_finite and bool((~np.isfinite(ratio)).any())
                new_values = new_values.dropna(subset=["ratio"])
                if failed and new_values.empty:
                    rows.append({**row, "verdict": "WORSE", "n_new": 0})
                    continue
            if new_values is None or new_values.empty:  # no row of the point and variant: missing
                rows.append({**row, "verdict": "MISSING", "n_new": 0})
                continue
            base_runs, new_runs = _run_medians(base_values), _run_medians(new_values)
            base_sample, new_sample = _samples(base_values, new_values, base_runs, new_runs, alpha)
            p_value = _p(base_sample, new_sample)
            if role["gate"] == "tolerance":
                # Quality: each side's worst, worse by more than the tolerance, relative to the
                # baseline's size.
                base_ratio, new_ratio = row["base"], row["new"]
                change = new_ratio / base_ratio if base_ratio else np.nan
                step = (new_ratio - base_ratio) * (1 if role["better"] == "higher" else -1)
                allowed = role["tolerance"] * max(abs(base_ratio), role.get("resolution", 0.0))
                verdict = "WORSE" if failed or step < -allowed else "BETTER" if step > allowed else "SAME"
                if failed:  # show what failed, not the median of the rest
                    new_ratio, change = float(ratio[~np.isfinite(ratio)].iloc[0]), np.nan
                p_value = np.nan  # the value itself against the tolerance: no test (see the module doc)
            else:
                base_ratio, new_ratio = base_runs.min(), new_runs.min()  # the least disturbed runs
                change = new_ratio / base_ratio
                calibrated = point["against"] == CALIBRATION
                if _smallest_p(len(base_sample), len(new_sample)) >= alpha:
                    p_value = np.nan  # too few repeats for the test to ever reach alpha: the threshold alone
                verdict = _verdict(change, 0.0 if np.isnan(p_value) else p_value,
                                   calibration_threshold if calibrated else threshold, alpha,
                                   "lower" if calibrated else role["better"], role.get("unit", ""))
            rows.append({**row, "base_ratio": base_ratio, "new_ratio": new_ratio, "change": change,
                         "p_value": p_value, "verdict": verdict, "n_base": len(base_sample), "n_new": len(new_sample)})
    if not rows:
        raise BenchError("BASE has nothing to compare: no gated metric with a reference variant in it")
    result = pd.DataFrame(rows)
    for column in STAT_COLUMNS:
        if column not in result:
            result[column] = np.nan
    result = result[[*by, *STAT_COLUMNS]]
    if (result["verdict"] == "MISSING").all():
        raise _nothing_matches(new, base, keys)
    result.attrs.update(suite=schema["suite"], reference=" / ".join(dict.fromkeys(references.values())),
                        threshold=threshold,
                        calibration_threshold=calibration_threshold, alpha=alpha)
    return result


def compare_files(new: Path, baseline: Path, suite: str | None = None, **settings) -> pd.DataFrame:
    """compare() of one suite's results in two files or results directories (the suite NEW's
    file names where None), each read with its sidecar's schema, else the registered suite's;
    BASE's gates."""
    def registry_schema(name: str) -> dict:
        return schema_for(get_suite(name))

    new_df, new_schema, new_sidecar = load(new, suite, registry_schema)
    base_df, schema, base_sidecar = load(baseline, new_schema["suite"], registry_schema)
    for df, path in ((new_df, new), (base_df, baseline)):
        if df.empty:
            raise BenchError(f"{path}: no {schema['suite']} rows")
    _completed_by_the_installed_suite(schema, registry_schema)
    current = {"NEW": latest_code(new_df, schema), "BASE": latest_code(base_df, schema)}  # the rows compared
    _require_one_machine_type(current["NEW"], current["BASE"], key_columns(schema))
    sidecars = {"NEW": new_sidecar, "BASE": base_sidecar}
    threads = {side: _recorded(current[side], sidecars[side], "numba_threads", "cpu") for side in sidecars}
    if threads["NEW"] and threads["BASE"] and threads["NEW"] != threads["BASE"]:
        raise BenchError(f"NEW's CPU rows ran with {sorted(threads['NEW'])} numba threads, BASE's with "
                         f"{sorted(threads['BASE'])}: a parallel variant's ratio depends on them; measure both "
                         "alike (NUMBA_NUM_THREADS)")
    for backend in sorted(set(current["NEW"]["backend"]) & set(current["BASE"]["backend"])):
        jobs = {side: _recorded(current[side], sidecars[side], "calibration", backend) for side in sidecars}
        if jobs["NEW"] and jobs["BASE"] and jobs["NEW"] != jobs["BASE"]:
            raise BenchError(f"NEW's {backend} runs timed the calibration job {sorted(jobs['NEW'])}, BASE's "
                             f"{sorted(jobs['BASE'])}: times over two different jobs do not compare; measure the "
                             "baseline again with this code")
    slowed = _recorded(current["BASE"], sidecars["BASE"], "slowdown")
    if slowed:
        raise BenchError(f"BASE was measured with {slowdown.ENV}={sorted(slowed)[0]}, variants slowed on purpose (a "
                         "test knob): it is no baseline")
    return compare(new_df, base_df, schema, new_schema=new_schema, **settings)


def suites_in(directory: Path, registered: list[str]) -> list[str]:
    """The suites whose results lie in a results directory: each <name>.csv beside a sidecar
    whose schema names that suite, installed here or not, and each registered suite's file
    (an older one has no sidecar). bench check gates them all: a suite that NEW's code no
    longer registers must not leave the check unnoticed."""
    declared = {path.stem for path in directory.glob("*.csv")
                if (read_sidecar(path.with_suffix(".json")).get("schema") or {}).get("suite") == path.stem}
    return sorted(declared | {name for name in registered if (directory / f"{name}.csv").exists()})


def _require_one_machine_type(new: pd.DataFrame, base: pd.DataFrame, keys: list[str]) -> None:
    """BenchError at the first point (and variant) that NEW and BASE both hold, measured on
    two machine types (their rows' `machine`): the calibration cancels a slower machine of a
    type, not another GPU or CPU. Rows written before rows named their machine pass."""
    by = [*keys, "variant"]
    if "machine" not in new or "machine" not in base:
        return
    sides = [df.loc[df["machine"].notna(), [*by, "machine"]].astype(str).drop_duplicates() for df in (new, base)]
    both = sides[0].merge(sides[1], on=by, suffixes=("_new", "_base"))
    other = both[both["machine_new"] != both["machine_base"]]
    if len(other):
        first = other.iloc[0]
        point = ", ".join(f"{k}={first[k]}" for k in by)
        raise BenchError(f"{point}: NEW was measured on {first['machine_new']}, BASE on {first['machine_base']}; "
                         "bench check compares times on one machine type only: measure both on one type")


def _completed_by_the_installed_suite(schema: dict, registry_schema) -> None:
    """What a baseline's schema lacks, written before the suites declared it, from the
    installed suite's (`registry_schema(name)`): its GPU reference (else GPU rows go over a CPU
    reference measured in other runs) and its metrics' resolutions (else float64 errors of 0
    fail against rounding)."""
    try:
        installed = registry_schema(schema["suite"])
    except BenchError:  # a suite not installed here: its baseline's schema as it is
        return
    schema.setdefault("gpu_reference", installed["gpu_reference"])
    for name, role in schema["columns"].items():
        if role.get("gate") == "tolerance" and "resolution" not in role and name in installed["columns"]:
            role["resolution"] = installed["columns"][name].get("resolution", 0.0)


def _recorded(df: pd.DataFrame, sidecar: dict, key: str, backend: str | None = None) -> set:
    """The values of `key` that the runs of the rows (of `backend`) record in the sidecar
    (empty where none does: files written before it was recorded)."""
    runs = set(df["run_id"] if backend is None else df.loc[df["backend"] == backend, "run_id"])
    return {info[key] for run, info in sidecar.get("runs", {}).items()
            if run in runs and isinstance(info, dict) and info.get(key) is not None}


def _require_pairs(sides: dict, compared: dict, by: list[str], metric: str, reference: str) -> None:
    """BenchError where a gate would silently vanish: BASE holds a variant's metric that NEW
    has beside the reference, in the same run and repeat, and BASE not (its reference missing
    there, measured apart or again with newer code), or, where NEW has a calibration, a
    reference without one. (Where neither side has the pair, a sweep's points beyond its
    reference, say, the variant is not gated.)"""
    base, new = sides["base"], sides["new"]

    def pairs(side):
        frame = compared[side]
        return frame.loc[frame["against"] == reference, by].astype(str).drop_duplicates()

    held = base.loc[(base["variant"] != reference) & base[metric].notna(), by].astype(str).drop_duplicates()
    ungated = held.merge(pairs("new")).merge(pairs("base"), how="left", indicator=True).query("_merge == 'left_only'")
    if len(ungated):
        point = ", ".join(f"{k}={v}" for k, v in ungated.iloc[0][by].items())
        raise BenchError(f"BASE cannot gate {metric} at {point}: NEW has {reference} (the reference) beside it, "
                         "BASE not in the same run and repeat; measure the reference beside every variant, with one "
                         "code version")
    if metric != "seconds":
        return
    for side, other, frame, other_frame in (("NEW", "BASE", new, base), ("BASE", "NEW", base, new)):
        own = other_frame.loc[other_frame["variant"] == reference]
        if "calibration_s" in frame and frame["calibration_s"].notna().any() and \
                ("calibration_s" not in own or own["calibration_s"].isna().any()):
            raise BenchError(f"{other} has {reference} rows without calibration_s where {side} has it, so the "
                             "reference's own time cannot be gated: measure both with the calibration")


def reference_for(schema: dict, backend: str) -> str:
    """The variant a backend's ratios are over: on a GPU the suite's GPU reference (an older
    sidecar names none: its reference)."""
    return schema.get("gpu_reference") or schema["reference"] if backend == "gpu" else schema["reference"]


def _smallest_p(n_base: int, n_new: int) -> float:
    """The smallest two-sided p-value a Mann-Whitney U test of samples this size can give:
    2 / C(n_base + n_new, n_base) (3 against 3: 0.1, so at alpha = 0.05 it can flag nothing)."""
    return 2 / math.comb(n_base + n_new, n_base) if n_base and n_new else 1.0


def _p(base: pd.Series, new: pd.Series) -> float:
    if len(base) == 0 or len(new) == 0:
        return 1.0
    return float(mannwhitneyu(base, new, alternative="two-sided").pvalue)


def _nothing_matches(new: pd.DataFrame, base: pd.DataFrame, keys: list[str]) -> BenchError:
    differing = [
        f"{k}: NEW {sorted(map(str, set(new[k])))[:8]} vs BASE {sorted(map(str, set(base[k])))[:8]}"
        for k in [*keys, "variant"] if k in new and k in base and set(new[k].astype(str)) != set(base[k].astype(str))
    ] or ["same values per column, but no combination in common"]
    return BenchError("NEW and BASE share no measured (point, variant): " + "; ".join(differing))


def exit_code(result: pd.DataFrame, allow_missing: bool = False) -> int:
    """1 when anything regressed (or is missing, unless allowed), else 0."""
    failing = set(REGRESSIONS) - ({"MISSING"} if allow_missing else set())
    return int(result["verdict"].isin(failing).any())


def _cells(result: pd.DataFrame) -> tuple[list[str], list[list[str]], str]:
    """Header, rows and caption of a result, showing only the key columns that vary."""
    keys = [k for k in result.columns if k not in (*STAT_COLUMNS, "variant")]
    varying = [k for k in keys if result[k].nunique(dropna=False) > 1]
    constant = ", ".join(f"{k}={result[k].iloc[0]}" for k in keys if k not in varying)
    header = [*varying, "variant", "metric", "over", "base", "new", "base ratio", "new ratio", "change", "p",
              "n base/new", "verdict"]

    def number(value, spec):
        return "" if pd.isna(value) else format(value, spec)

    def p_text(row, few):
        return "too few" if few else number(row["p_value"], ".3g")

    rows = [[*(str(row[k]) for k in varying), str(row["variant"]), str(row["metric"]), str(row["against"]),
             number(row["base"], ".4g"), number(row["new"], ".4g"),
             # a value gated by tolerance is over nothing: its ratio cells would repeat base and new
             *(("", "") if row["against"] == "" else (number(row["base_ratio"], ".3f"), number(row["new_ratio"], ".3f"))),
             "" if pd.isna(row["change"]) else f"{(row['change'] - 1) * 100:+.1f}%",
             p_text(row, few), f"{row['n_base']}/{row['n_new']}", row["verdict"]]
            for row, few in zip(result.to_dict("records"), _without_test(result))]
    return header, rows, constant


def render_table(result: pd.DataFrame) -> Table:
    header, rows, constant = _cells(result)
    attrs = result.attrs
    title = (f"{attrs['suite']}: ratios over {attrs['reference']} (threshold {attrs['threshold']:.0%}); "
             f"{attrs['reference']} over the calibration (threshold {attrs['calibration_threshold']:.0%})"
             if "reference" in attrs else None)
    table = Table(title=title, caption=constant or None)
    for name in header:
        table.add_column(name, justify="left" if name in ("verdict", "variant", "metric", "over") else "right")
    for cells in rows:
        table.add_row(*cells[:-1], f"[{VERDICT_STYLES[cells[-1]]}]{cells[-1]}[/]")
    return table


def render_markdown(result: pd.DataFrame) -> str:
    header, rows, constant = _cells(result)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines + ([f"\n{constant}"] if constant else []))


def detection_table(rows: pd.DataFrame) -> str:
    """benchmarks/detection.py's rows (a CI run each) as a markdown table: per pair of
    thresholds (ratio, calibration) and slowdown, the runs, how many bench check flagged,
    and each run's largest ratio change (median, smallest and largest over the runs: how
    near the threshold a null or a slowdown came)."""
    change = "largest_change_pct"
    table = (rows.groupby(["threshold", "calibration_threshold", "kind", "variant", "factor"], sort=False)
             .agg(runs=("run", "nunique"), flagged=("exit_code", "sum"), change_median_pct=(change, "median"),
                  change_min_pct=(change, "min"), change_max_pct=(change, "max")).reset_index())
    table["result"] = [f"{flagged} of {runs} " + ("false alarms" if kind == "unchanged" else "caught")
                       for kind, flagged, runs in zip(table["kind"], table["flagged"], table["runs"])]
    return table.to_markdown(index=False)


def render_json(results: list[pd.DataFrame], missing: list[str] = ()) -> str:
    """{"suites": [{"settings": ..., "rows": [...]}, ...], "missing": [suite, ...]}: a suite each,
    and BASE's suites of which NEW has no file."""
    return json.dumps({"suites": [{"settings": result.attrs, "rows": json.loads(result.to_json(orient="records"))}
                                  for result in results], "missing": list(missing)}, indent=1)


def _without_test(result: pd.DataFrame) -> pd.Series:
    """The rows whose ratio was judged by the threshold alone: too few repeats for the test
    ("too few" in the p column; a tolerance row, over nothing, runs no test at all)."""
    return result["p_value"].isna() & result["change"].notna() & (result["against"] != "")


def summary(result: pd.DataFrame, allow_missing: bool = False) -> str:
    counts = result["verdict"].value_counts().to_dict()
    code = exit_code(result, allow_missing)
    # Three repeats a side are too few for the test: a timing's noise alone can pass the threshold.
    untested = int((result["verdict"].isin(["SLOWER", "WORSE"]) & _without_test(result)).sum())
    hint = (f" ({untested} SLOWER or WORSE by the threshold alone, too few repeats for the test: measure more "
            "repeats, or raise --threshold to this machine's noise)") if untested else ""
    return ", ".join(f"{n} {v}" for v, n in sorted(counts.items())) + (" -> regression" if code else "") + hint
