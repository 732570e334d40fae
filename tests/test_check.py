"""Regression check (bench.check) on synthetic results."""

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from bench.check import compare, exit_code, render_table

REPEATS = 8


def results(factors, seed, noise=0.01, Ks=(32, 64), run_id="r1", day=1, jitter=None):
    """Rows of one run: reference alg1 takes ~1 s (drifting per repeat), other variants factor x that.

    Noise is multiplicative and uniform in +-noise; `jitter` adds a per-row drift that
    the pairing must cancel (the machine getting slower between repeats).
    """
    rng = np.random.default_rng(seed)
    rows = []
    for K in Ks:
        for repeat in range(REPEATS):
            drift = 1 + (jitter or 0) * repeat
            for variant, factor in {"alg1": 1.0, **factors}.items():
                seconds = K / 32 * factor * drift * rng.uniform(1 - noise, 1 + noise)
                rows.append({
                    "suite": "lda", "variant": variant, "backend": "gpu", "precision": "f32", "K": K,
                    "repeat": repeat, "seconds": seconds, "draw_z_s": seconds / 2,
                    "group": f"{run_id}-{K}", "run_id": run_id, "code_version": "c",
                    "timestamp": f"2026-01-{day:02d}T00:00:00+00:00", "machine": "m",
                })
    return pd.DataFrame(rows)


def verdicts(result):
    return dict(zip(zip(result["K"], result["variant"]), result["verdict"]))


def test_identical_distributions_are_same():
    base = results({"alg4": 0.6, "alg7": 0.5}, seed=1)
    new = results({"alg4": 0.6, "alg7": 0.5}, seed=2)
    result = compare(new, base, reference="alg1")
    assert list(result.columns) == [
        "suite", "backend", "precision", "K", "variant",
        "base_ratio", "new_ratio", "change", "p_value", "verdict", "n_base", "n_new",
    ]
    assert len(result) == 4 and set(result["variant"]) == {"alg4", "alg7"}
    assert set(result["verdict"]) == {"SAME"}
    assert result["p_value"].between(0, 1).all()
    assert (result["n_base"] == REPEATS).all() and (result["n_new"] == REPEATS).all()
    assert np.allclose(result["change"], 1, atol=0.03)
    assert exit_code(result) == 0


def test_twice_slower_variant_fails():
    base = results({"alg4": 0.6, "alg7": 0.5}, seed=1)
    new = results({"alg4": 0.6, "alg7": 1.0}, seed=2, jitter=0.05)  # drift cancels in the ratios
    result = compare(new, base, reference="alg1")
    v = verdicts(result)
    assert v[(32, "alg7")] == v[(64, "alg7")] == "SLOWER"
    assert v[(32, "alg4")] == v[(64, "alg4")] == "SAME"
    assert np.allclose(result.loc[result["variant"] == "alg7", "change"], 2, rtol=0.05)
    assert (result.loc[result["variant"] == "alg7", "p_value"] < 0.05).all()
    assert exit_code(result) == 1


def test_twice_faster_variant_passes():
    base = results({"alg4": 0.6, "alg7": 0.5}, seed=1)
    new = results({"alg4": 0.3, "alg7": 0.5}, seed=2)
    result = compare(new, base, reference="alg1")
    assert {k: v for k, v in verdicts(result).items() if k[1] == "alg4"} == {(32, "alg4"): "FASTER", (64, "alg4"): "FASTER"}
    assert exit_code(result) == 0


def test_small_changes_are_same_even_when_significant():
    base = results({"alg4": 0.6}, seed=1, noise=0.03)
    assert set(compare(results({"alg4": 0.6}, seed=2, noise=0.03), base, "alg1")["verdict"]) == {"SAME"}
    shifted = compare(results({"alg4": 0.6 * 1.05}, seed=2, noise=0.005), results({"alg4": 0.6}, seed=1, noise=0.005), "alg1")
    assert (shifted["p_value"] < 0.05).all()  # a real 5% change, but under the 10% threshold
    assert set(shifted["verdict"]) == {"SAME"}


def test_runs_of_older_code_are_ignored():
    old_slow = results({"alg4": 1.2}, seed=1, run_id="old", day=1).assign(code_version="old")
    current = results({"alg4": 0.6}, seed=2, run_id="cur", day=2)
    base = pd.concat([current, old_slow])  # file order must not matter
    result = compare(results({"alg4": 0.6}, seed=3), base, "alg1")
    assert set(result["verdict"]) == {"SAME"}
    assert np.allclose(result["base_ratio"], 0.6, rtol=0.05)


def test_a_disturbed_run_does_not_make_a_regression():
    # Runs of the same code are pooled; a run slowed as a whole (another process on
    # the machine) must not be mistaken for a slower variant.
    base = pd.concat([results({"alg4": 0.6}, seed=s, run_id=f"b{s}") for s in range(3)])
    disturbed = results({"alg4": 0.6 * 1.6}, seed=10, run_id="n0")
    new = pd.concat([disturbed, *(results({"alg4": 0.6}, seed=s, run_id=f"n{s}") for s in (11, 12))])
    result = compare(new, base, "alg1")
    assert set(result["verdict"]) == {"SAME"}
    assert (result["n_new"] == 3 * REPEATS).all()
    slower = pd.concat([results({"alg4": 1.2}, seed=s, run_id=f"n{s}") for s in (20, 21, 22)])
    assert set(compare(slower, base, "alg1")["verdict"]) == {"SLOWER"}


def test_rows_without_partner_are_dropped():
    base = results({"alg4": 0.6}, seed=1)
    new = results({"alg4": 0.6}, seed=2)
    new = new.drop(new.index[(new["variant"] == "alg1") & (new["repeat"] < 3)])
    result = compare(new, base, "alg1")
    assert (result["n_new"] == REPEATS - 3).all() and (result["n_base"] == REPEATS).all()


def test_other_measurement_column():
    base = results({"alg4": 0.6}, seed=1)
    new = results({"alg4": 0.6}, seed=2)
    new.loc[new["variant"] == "alg4", "draw_z_s"] *= 3  # only the draw phase regressed
    assert set(compare(new, base, "alg1")["verdict"]) == {"SAME"}
    assert set(compare(new, base, "alg1", column="draw_z_s")["verdict"]) == {"SLOWER"}


def test_disjoint_files_raise_with_explanation():
    base = results({"alg4": 0.6}, seed=1, Ks=(32,))
    new = results({"alg4": 0.6}, seed=2, Ks=(64,))
    with pytest.raises(ValueError, match=r"K: NEW \['64'\] vs BASE \['32'\]"):
        compare(new, base, "alg1")
    with pytest.raises(ValueError, match="reference variant 'alg9'"):
        compare(new, base, "alg9")
    with pytest.raises(ValueError, match="different key columns"):
        compare(new.assign(W=32), base, "alg1")


def test_render_table_shows_varying_keys_and_verdicts():
    base = results({"alg4": 0.6, "alg7": 0.5}, seed=1)
    result = compare(results({"alg4": 0.6, "alg7": 1.0}, seed=2), base, "alg1")
    console = Console(record=True, width=150)
    console.print(render_table(result))
    text = console.export_text()
    assert "SLOWER" in text and "SAME" in text and "+100." in text
    header = next(line for line in text.splitlines() if "variant" in line)
    assert "K" in header and "precision" not in header  # constant keys left out of the columns
    assert "precision=f32" in text  # but named under the table
