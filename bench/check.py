"""Regression check: did a variant's time relative to a reference variant change?

Ratios are taken within one file between rows measured in the same run, group and
repeat (interleaved, so machine drift cancels), which makes files from different
machines or days comparable. Every run of a point measured with the latest code version
counts (results.latest_code): a run is one process, and on a shared machine a whole process can be
slowed (by up to 1.6x on the 2-core CI machines), so a point's ratio is the median over
its repeats in the least disturbed run (the smallest run median). The verdict follows
asv's rule: a change counts only when it is both larger than the threshold and
significant (two-sided Mann-Whitney U on the per-repeat ratios of all those runs).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from rich.table import Table
from scipy.stats import mannwhitneyu

from bench.results import key_columns, latest_code

VERDICT_STYLES = {"SLOWER": "bold red", "FASTER": "bold green", "SAME": "dim"}
STAT_COLUMNS = ("base_ratio", "new_ratio", "change", "p_value", "verdict", "n_base", "n_new")


def _ratios(df: pd.DataFrame, reference: str, column: str, side: str) -> pd.DataFrame:
    """Per-repeat ratios variant/reference: columns keys..., variant, ratio."""
    if reference not in set(df["variant"]):
        raise ValueError(
            f"{side}: reference variant {reference!r} not found (variants: {sorted(set(df['variant']))})"
        )
    df = latest_code(df)
    pairing = [*key_columns(df.columns), "run_id", "group", "repeat"]
    if df.duplicated([*pairing, "variant"]).any():
        raise ValueError(f"{side}: several rows share one (point, run_id, group, repeat, variant)")
    wide = df.set_index([*pairing, "variant"])[column].unstack("variant")
    ratios = wide.drop(columns=reference).div(wide[reference], axis=0)
    # A row whose partner is missing gives NaN and is dropped here.
    long = ratios.stack().dropna().rename("ratio").reset_index()
    return long.drop(columns=["group", "repeat"])


def _least_disturbed(ratios: pd.DataFrame) -> float:
    """The smallest per-run median ratio: the run that other load slowed least."""
    return ratios.groupby("run_id")["ratio"].median().min()


def _describe(values: pd.DataFrame, keys: list[str]) -> dict[str, set[str]]:
    return {k: set(values[k].astype(str)) for k in [*keys, "variant"]}


def _nothing_matches(new: pd.DataFrame, base: pd.DataFrame, keys: list[str]) -> ValueError:
    new_values, base_values = _describe(new, keys), _describe(base, keys)
    differing = [
        f"{k}: NEW {sorted(new_values[k])} vs BASE {sorted(base_values[k])}"
        for k in new_values if new_values[k] != base_values[k]
    ] or ["same values per column, but no combination in common"]
    return ValueError("NEW and BASE share no measured (point, variant): " + "; ".join(differing))


def compare(
    new: pd.DataFrame,
    base: pd.DataFrame,
    reference: str,
    threshold: float = 0.10,
    alpha: float = 0.05,
    column: str = "seconds",
) -> pd.DataFrame:
    """One row per (key values, variant != reference) present in both files.

    Columns: the keys, variant, base_ratio and new_ratio (the smallest per-run median
    of the per-repeat ratios), change (new_ratio / base_ratio), p_value, verdict
    (FASTER/SLOWER/SAME), n_base, n_new (ratios pooled over the runs of the point's
    latest code version).
    """
    keys = key_columns(new.columns)
    if set(keys) != set(key_columns(base.columns)):
        raise ValueError(
            f"NEW and BASE have different key columns: NEW {sorted(keys)} vs BASE {sorted(key_columns(base.columns))}"
        )
    by = [*keys, "variant"]
    grouped = {
        side: dict(iter(_ratios(df, reference, column, side.upper()).groupby(by, dropna=False)))
        for side, df in (("base", base), ("new", new))
    }
    common = [key for key in grouped["new"] if key in grouped["base"]]
    if not common:
        raise _nothing_matches(*(pd.DataFrame(list(grouped[side]), columns=by) for side in ("new", "base")), keys)

    rows = []
    for key in common:
        base_r, new_r = grouped["base"][key], grouped["new"][key]
        base_ratio, new_ratio = _least_disturbed(base_r), _least_disturbed(new_r)
        change = new_ratio / base_ratio
        p_value = mannwhitneyu(base_r["ratio"], new_r["ratio"], alternative="two-sided").pvalue
        if change > 1 + threshold and p_value < alpha:
            verdict = "SLOWER"
        elif change < 1 / (1 + threshold) and p_value < alpha:
            verdict = "FASTER"
        else:
            verdict = "SAME"
        rows.append({
            **dict(zip(by, key)), "base_ratio": base_ratio, "new_ratio": new_ratio, "change": change,
            "p_value": p_value, "verdict": verdict, "n_base": len(base_r), "n_new": len(new_r),
        })
    result = pd.DataFrame(rows)
    result.attrs.update(reference=reference, column=column, threshold=threshold, alpha=alpha)
    return result


def render_table(result: pd.DataFrame) -> Table:
    """A rich table of a compare() result, showing only the key columns that vary."""
    keys = [k for k in result.columns if k not in (*STAT_COLUMNS, "variant")]
    varying = [k for k in keys if result[k].nunique(dropna=False) > 1]
    constant = ", ".join(f"{k}={result[k].iloc[0]}" for k in keys if k not in varying)
    attrs = result.attrs
    title = f"{attrs.get('column', 'seconds')} / {attrs['reference']}" if "reference" in attrs else None
    table = Table(title=title, caption=constant or None)
    for name in [*varying, "variant"]:
        table.add_column(name)
    for name in ("base ratio", "new ratio", "change", "p", "n base/new", "verdict"):
        table.add_column(name, justify="left" if name == "verdict" else "right")
    for row in result.to_dict("records"):
        table.add_row(
            *(str(row[k]) for k in [*varying, "variant"]),
            f"{row['base_ratio']:.3f}",
            f"{row['new_ratio']:.3f}",
            f"{(row['change'] - 1) * 100:+.1f}%",
            f"{row['p_value']:.3g}",
            f"{row['n_base']}/{row['n_new']}",
            f"[{VERDICT_STYLES[row['verdict']]}]{row['verdict']}[/]",
        )
    return table


def exit_code(result: pd.DataFrame) -> int:
    """1 when any variant got SLOWER relative to the reference, else 0."""
    return int((result["verdict"] == "SLOWER").any())
