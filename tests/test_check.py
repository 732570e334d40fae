"""Regression check (bench.check) on synthetic results with a declared schema."""

import json

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from bench.check import compare, exit_code, reference_for, render_json, render_markdown, render_table, summary
from bench.errors import BenchError

REPEATS = 8
AXIS = {"role": "axis"}
SCHEMA = {"suite": "lda", "reference": "alg1", "columns": {
    "suite": AXIS, "backend": AXIS, "precision": AXIS, "K": AXIS, "variant": {"role": "variant"},
    "repeat": {"role": "bookkeeping"},
    "seconds": {"role": "metric", "unit": "s", "better": "lower", "per": "run", "gate": "ratio"},
    "draw_z_s": {"role": "metric", "unit": "s", "better": "lower", "per": "run", "gate": None},
    # A quality metric: a relative tolerance, higher is better; a column named like a key.
    "final_objective": {"role": "metric", "unit": "", "better": "higher", "per": "run", "gate": "tolerance",
                        "tolerance": 0.05},
    "calibration_s": {"role": "calibration", "unit": "s"},
}}


def results(factors, seed, noise=0.01, Ks=(32, 64), run_id=None, day=1, jitter=None, machine=1.0, quality=10.0):
    """Rows of one run (run_id r<seed> unless given): the calibration takes ~0.1 s x machine,
    each variant ~K/32 s x machine x its factor (alg1's is 1 unless given). Noise is
    multiplicative; `jitter` is a per-repeat drift that the pairing must cancel."""
    rng = np.random.default_rng(seed)
    run_id = run_id or f"r{seed}"
    factors = {"alg1": 1.0, **factors}
    rows = []
    for K in Ks:
        for repeat in range(REPEATS):
            drift = machine * (1 + (jitter or 0) * repeat)
            calibration = 0.1 * drift * rng.uniform(1 - noise, 1 + noise)
            for variant, factor in factors.items():
                seconds = K / 32 * factor * drift * rng.uniform(1 - noise, 1 + noise)
                rows.append({
                    "suite": "lda", "variant": variant, "backend": "cpu", "precision": "f32", "K": K,
                    "repeat": repeat, "seconds": seconds, "draw_z_s": seconds / 2, "final_objective": quality,
                    "calibration_s": calibration, "group": f"{run_id}-{K}", "run_id": run_id,
                    "code_version": "c", "timestamp": f"2026-01-{day:02d}T00:00:00+00:00", "machine": "m",
                })
    return pd.DataFrame(rows)


def verdicts(result, metric="seconds"):
    result = result[result["metric"] == metric]
    return dict(zip(zip(result["K"], result["variant"], result["against"]), result["verdict"]))


BASE_FACTORS = {"alg4": 0.6, "alg7": 0.5}


def test_no_change_is_same_everywhere():
    result = compare(results(BASE_FACTORS, seed=2), results(BASE_FACTORS, seed=1), SCHEMA)
    v = verdicts(result)
    assert set(v) == {(K, variant, over) for K in (32, 64) for variant, over in
                      (("alg4", "alg1"), ("alg7", "alg1"), ("alg1", "calibration"))}
    assert set(result["verdict"]) == {"SAME"}
    assert set(result["metric"]) == {"seconds", "final_objective"}  # ungated draw_z_s is not checked
    timed = result["metric"] == "seconds"
    assert result.loc[timed, "p_value"].between(0, 1).all()
    assert result.loc[~timed, "p_value"].isna().all()  # a tolerance gate runs no test
    assert np.allclose(result.loc[result["metric"] == "seconds", "change"], 1, atol=0.03)
    assert exit_code(result) == 0


def test_one_variant_twice_as_slow_fails():
    new = results({"alg4": 0.6, "alg7": 1.0}, seed=2, jitter=0.05)  # drift cancels in the ratios
    result = compare(new, results(BASE_FACTORS, seed=1), SCHEMA)
    v = verdicts(result)
    assert v[(32, "alg7", "alg1")] == v[(64, "alg7", "alg1")] == "SLOWER"
    assert v[(32, "alg4", "alg1")] == "SAME" and v[(32, "alg1", "calibration")] == "SAME"
    assert exit_code(result) == 1


def test_reference_twice_as_slow_fails_through_the_calibration():
    new = results({**BASE_FACTORS, "alg1": 2.0}, seed=2)
    result = compare(new, results(BASE_FACTORS, seed=1), SCHEMA)
    v = verdicts(result)
    assert v[(32, "alg1", "calibration")] == v[(64, "alg1", "calibration")] == "SLOWER"
    assert v[(32, "alg4", "alg1")] == "FASTER"  # relative to a slower reference
    assert exit_code(result) == 1


def test_every_variant_twice_as_slow_fails_through_the_calibration():
    new = results(BASE_FACTORS, seed=2).assign(seconds=lambda d: d["seconds"] * 2)
    result = compare(new, results(BASE_FACTORS, seed=1), SCHEMA)
    v = verdicts(result)
    assert v[(32, "alg1", "calibration")] == v[(64, "alg1", "calibration")] == "SLOWER"
    assert v[(32, "alg4", "alg1")] == v[(32, "alg7", "alg1")] == "SAME"
    assert exit_code(result) == 1


def test_a_slower_machine_is_not_a_regression():
    # Everything, the calibration included, 1.5x slower: no ratio moves.
    result = compare(results(BASE_FACTORS, seed=2, machine=1.5), results(BASE_FACTORS, seed=1), SCHEMA)
    assert set(result["verdict"]) == {"SAME"}


def test_missing_points_and_variants_fail_unless_allowed():
    base = results(BASE_FACTORS, seed=1)
    new = results(BASE_FACTORS, seed=2, Ks=(32,))
    new = new[new["variant"] != "alg7"]
    result = compare(new, base, SCHEMA)
    missing = result[result["verdict"] == "MISSING"]
    assert set(zip(missing["K"], missing["variant"])) >= {(64, "alg1"), (64, "alg4"), (64, "alg7"), (32, "alg7")}
    assert exit_code(result) == 1
    assert exit_code(result, allow_missing=True) == 0


def test_quality_gated_by_tolerance_and_direction():
    base = results(BASE_FACTORS, seed=1, quality=-100.0)
    worse = compare(results(BASE_FACTORS, seed=2, quality=-110.0), base, SCHEMA, metrics=["final_objective"])
    assert set(worse["verdict"]) == {"WORSE"} and exit_code(worse) == 1
    within = compare(results(BASE_FACTORS, seed=2, quality=-103.0), base, SCHEMA, metrics=["final_objective"])
    assert set(within["verdict"]) == {"SAME"}
    better = compare(results(BASE_FACTORS, seed=2, quality=-90.0), base, SCHEMA, metrics=["final_objective"])
    assert set(better["verdict"]) == {"BETTER"} and exit_code(better) == 0


def test_a_quality_value_that_fails_in_some_repeats_is_worse_whatever_the_median():
    base = results(BASE_FACTORS, seed=1, quality=-100.0)
    new = results(BASE_FACTORS, seed=2, quality=-100.0)
    new.loc[new["repeat"] < 2, "final_objective"] = -1000.0  # two repeats of eight failed
    result = compare(new, base, SCHEMA, metrics=["final_objective"])
    assert set(result["verdict"]) == {"WORSE"} and set(result["new"]) == {-1000.0}


def test_an_empty_quality_value_is_worse_even_where_missing_points_are_allowed():
    base = results(BASE_FACTORS, seed=1, quality=-100.0)
    new = results(BASE_FACTORS, seed=2, quality=float("nan"))
    result = compare(new, base, SCHEMA)
    quality = result[result["metric"] == "final_objective"]
    assert set(quality["verdict"]) == {"WORSE"} and exit_code(result, allow_missing=True) == 1


def test_a_quality_value_that_is_not_finite_in_one_repeat_is_worse():
    base = results(BASE_FACTORS, seed=1, quality=-100.0)
    for bad in (float("nan"), float("-inf")):  # an intermittent failure hides in a median
        new = results(BASE_FACTORS, seed=2, quality=-100.0)
        new.loc[new["repeat"] == 0, "final_objective"] = bad
        result = compare(new, base, SCHEMA, metrics=["final_objective"])
        assert set(result["verdict"]) == {"WORSE"} and exit_code(result) == 1
        assert result["change"].isna().all()  # the row shows the value that failed, not a median
    # where BASE failed alike, the same failure in NEW is no change
    flaky = base.assign(final_objective=np.where(base["repeat"] == 0, np.nan, base["final_objective"]))
    result = compare(new.assign(final_objective=np.where(new["repeat"] == 0, np.nan, -100.0)), flaky, SCHEMA,
                     metrics=["final_objective"])
    assert set(result["verdict"]) == {"SAME"}


def test_base_that_cannot_gate_a_variant_is_bad_input():
    new, base = results(BASE_FACTORS, seed=2), results(BASE_FACTORS, seed=1)
    # the reference missing at one point, or measured in runs of its own, or with newer code
    apart = base.assign(run_id=np.where(base["variant"] == "alg1", "r-reference", base["run_id"]))
    newer = pd.concat([base, base[base["variant"] == "alg1"].assign(
        run_id="r-later", code_version="d", timestamp="2026-02-01T00:00:00+00:00")])
    for broken in (base[~((base["variant"] == "alg1") & (base["K"] == 64))], apart, newer):
        with pytest.raises(BenchError, match="BASE cannot gate seconds at .*NEW has alg1"):
            compare(new, broken, SCHEMA)
    # a point that neither side measured the reference at (a sweep's points beyond it) is not gated
    beyond = [df[~((df["variant"] == "alg1") & (df["K"] == 64))] for df in (new, base)]
    result = compare(*beyond, SCHEMA, metrics=["seconds"])
    assert not ((result["K"] == 64) & (result["against"] == "alg1")).any() and set(result["verdict"]) == {"SAME"}
    # a baseline measured before the calibration existed cannot gate the reference's own time,
    # nor NEW without it (its reference three times as slow would pass as missing)
    with pytest.raises(BenchError, match="BASE has alg1 rows without calibration_s where NEW has it"):
        compare(new, base.drop(columns=["calibration_s"]), SCHEMA)
    slow = results({**BASE_FACTORS, "alg1": 3.0}, seed=2).drop(columns=["calibration_s"])
    with pytest.raises(BenchError, match="NEW has alg1 rows without calibration_s where BASE has it"):
        compare(slow, base, SCHEMA)


def test_a_run_on_both_sides_is_bad_input():
    base = results(BASE_FACTORS, seed=1)
    with pytest.raises(BenchError, match="share 1 run"):
        compare(base, base, SCHEMA)
    with pytest.raises(BenchError, match="share 1 run"):  # NEW appended to the baseline's folder
        compare(pd.concat([base, results(BASE_FACTORS, seed=2)]), base, SCHEMA)


def test_base_schema_gates_not_the_new_files(tmp_path):
    from bench.check import compare_files
    from bench.results import update_sidecar

    loose = json.loads(json.dumps(SCHEMA))
    loose["columns"]["seconds"]["gate"] = None  # a change that declares its own time ungated
    for side, df, schema in (("base", results(BASE_FACTORS, seed=1), SCHEMA),
                             ("new", results({"alg4": 0.6, "alg7": 1.5}, seed=2), loose)):
        (tmp_path / side).mkdir()
        df.to_csv(tmp_path / side / "lda.csv", index=False)
        update_sidecar(tmp_path / side / "lda.json", None, schema=schema)
    result = compare_files(tmp_path / "new", tmp_path / "base", "lda")
    assert verdicts(result)[(32, "alg7", "alg1")] == "SLOWER"


def test_cpu_rows_measured_with_other_thread_counts_are_bad_input(tmp_path):
    from bench.check import compare_files
    from bench.results import update_sidecar

    for side, seed, threads in (("base", 1, 1), ("new", 2, 2)):
        (tmp_path / side).mkdir()
        results(BASE_FACTORS, seed=seed).to_csv(tmp_path / side / "lda.csv", index=False)
        update_sidecar(tmp_path / side / "lda.json", f"r{seed}", {"numba_threads": threads}, schema=SCHEMA)
    with pytest.raises(BenchError, match=r"NEW's CPU rows ran with \[2\] numba threads, BASE's with \[1\]"):
        compare_files(tmp_path / "new", tmp_path / "base", "lda")
    update_sidecar(tmp_path / "new" / "lda.json", "r2", {"numba_threads": 1})
    assert len(compare_files(tmp_path / "new", tmp_path / "base", "lda"))
    # a run of older code in BASE, at other threads, is not compared and does not count
    old = results(BASE_FACTORS, seed=3).assign(code_version="b", timestamp="2025-12-01T00:00:00+00:00")
    pd.concat([old, results(BASE_FACTORS, seed=1)]).to_csv(tmp_path / "base" / "lda.csv", index=False)
    update_sidecar(tmp_path / "base" / "lda.json", "r3", {"numba_threads": 16})
    assert len(compare_files(tmp_path / "new", tmp_path / "base", "lda"))


def _sides(tmp_path, base_run: dict, new_run: dict, new_factors=BASE_FACTORS) -> None:
    from bench.results import update_sidecar

    for side, seed, factors, info in (("base", 1, BASE_FACTORS, base_run), ("new", 2, new_factors, new_run)):
        (tmp_path / side).mkdir(parents=True, exist_ok=True)
        results(factors, seed=seed).to_csv(tmp_path / side / "lda.csv", index=False)
        update_sidecar(tmp_path / side / "lda.json", f"r{seed}", info, schema=SCHEMA)


def test_times_over_two_calibration_jobs_are_bad_input(tmp_path):
    """A change to the calibration job (its size, say) would move the reference's time over it:
    a change could loosen its own check so."""
    from bench.check import compare_files
    from bench.timing import calibration_id

    _sides(tmp_path, {"calibration": "job-a"}, {"calibration": "job-b"})
    with pytest.raises(BenchError, match=r"NEW's cpu runs timed the calibration job \['job-b'\], BASE's"):
        compare_files(tmp_path / "new", tmp_path / "base", "lda")
    _sides(tmp_path, {"calibration": "job-a"}, {"calibration": "job-a"})
    assert len(compare_files(tmp_path / "new", tmp_path / "base", "lda"))
    assert calibration_id("cpu") != calibration_id("gpu") and calibration_id("cpu") == calibration_id("cpu")


def test_a_baseline_measured_slowed_on_purpose_is_bad_input(tmp_path):
    from bench.check import compare_files

    _sides(tmp_path, {"slowdown": "*=2"}, {}, new_factors={"alg4": 1.1, "alg7": 0.9})
    with pytest.raises(BenchError, match=r"BASE was measured with BENCH_SLOWDOWN=\*=2.*no baseline"):
        compare_files(tmp_path / "new", tmp_path / "base", "lda")
    _sides(tmp_path / "detection", {}, {"slowdown": "*=2"})  # NEW slowed: how detection is measured
    assert len(compare_files(tmp_path / "detection" / "new", tmp_path / "detection" / "base", "lda"))


def test_a_directorys_suites_are_those_of_its_files_installed_or_not(tmp_path):
    from bench.check import suites_in
    from bench.results import update_sidecar

    renamed = {**SCHEMA, "suite": "gone"}
    results(BASE_FACTORS, seed=1).to_csv(tmp_path / "gone.csv", index=False)
    update_sidecar(tmp_path / "gone.json", None, schema=renamed)
    results(BASE_FACTORS, seed=1).to_csv(tmp_path / "lda.csv", index=False)  # an older file: no sidecar
    (tmp_path / "detection-lda.csv").write_text("a\n1\n")
    (tmp_path / "gone-series.csv").write_text("a\n1\n")
    assert suites_in(tmp_path, ["lda", "sumrv"]) == ["gone", "lda"]


def test_results_of_another_machine_type_are_bad_input(tmp_path):
    from bench.check import compare_files
    from bench.results import update_sidecar

    for side, seed, machine in (("base", 1, "nvidia-h100"), ("new", 2, "nvidia-h200")):
        (tmp_path / side).mkdir()
        results(BASE_FACTORS, seed=seed).assign(machine=machine).to_csv(tmp_path / side / "lda.csv", index=False)
        update_sidecar(tmp_path / side / "lda.json", None, schema=SCHEMA)
    with pytest.raises(BenchError, match="NEW was measured on nvidia-h200, BASE on nvidia-h100; bench check compares"):
        compare_files(tmp_path / "new", tmp_path / "base", "lda")
    # each point on its own: the machines swapped between the two K are no one machine type either
    base, new = results(BASE_FACTORS, seed=1), results(BASE_FACTORS, seed=2)
    base["machine"] = np.where(base["K"] == 32, "nvidia-h100", "nvidia-h200")
    new["machine"] = np.where(new["K"] == 32, "nvidia-h200", "nvidia-h100")
    base.to_csv(tmp_path / "base" / "lda.csv", index=False)
    new.to_csv(tmp_path / "new" / "lda.csv", index=False)
    with pytest.raises(BenchError, match="K=32, variant=alg1: NEW was measured on nvidia-h200, BASE on nvidia-h100"):
        compare_files(tmp_path / "new", tmp_path / "base", "lda")
    # rows that name no machine (written before rows named it) are not compared
    results(BASE_FACTORS, seed=2).assign(machine=None).to_csv(tmp_path / "new" / "lda.csv", index=False)
    assert len(compare_files(tmp_path / "new", tmp_path / "base", "lda"))
    results(BASE_FACTORS, seed=2).assign(machine="nvidia-h200").to_csv(tmp_path / "new" / "lda.csv", index=False)
    # older code measured elsewhere is not compared and does not count
    old = results(BASE_FACTORS, seed=3).assign(code_version="b", timestamp="2025-12-01T00:00:00+00:00")
    pd.concat([old.assign(machine="nvidia-h100"), results(BASE_FACTORS, seed=1).assign(machine="nvidia-h200")]).to_csv(
        tmp_path / "base" / "lda.csv", index=False)
    assert len(compare_files(tmp_path / "new", tmp_path / "base", "lda"))


@pytest.mark.parametrize("side", ["new", "base"])
def test_a_file_without_the_reference_is_bad_input(side):
    files = {"new": results(BASE_FACTORS, seed=2), "base": results(BASE_FACTORS, seed=1)}
    files[side] = files[side][files[side]["variant"] != "alg1"]
    with pytest.raises(BenchError, match=f"{side.upper()} has no cpu rows of the reference variant 'alg1'"):
        compare(files["new"], files["base"], SCHEMA)


def test_files_of_other_backends_say_how_they_differ_before_any_missing_reference():
    base = results(BASE_FACTORS, seed=1).assign(backend="gpu")
    base = base[base["variant"] != "alg1"]  # another reference on the GPU
    with pytest.raises(BenchError, match=r"share no measured .*backend: NEW \['cpu'\] vs BASE \['gpu'\]"):
        compare(results(BASE_FACTORS, seed=2), base, SCHEMA)


def test_higher_is_better_ratio_metric_regresses_downwards():
    schema = json.loads(json.dumps(SCHEMA))
    schema["columns"]["tokens_per_s"] = {"role": "metric", "unit": "tokens/s", "better": "higher", "per": "run",
                                         "gate": "ratio"}
    base = results(BASE_FACTORS, seed=1).assign(tokens_per_s=lambda d: 1 / d["seconds"])
    new = results({"alg4": 0.6, "alg7": 1.0}, seed=2).assign(tokens_per_s=lambda d: 1 / d["seconds"])
    v = verdicts(compare(new, base, schema, metrics=["tokens_per_s"]), "tokens_per_s")
    assert v[(32, "alg7", "alg1")] == "WORSE" and v[(32, "alg4", "alg1")] == "SAME"


def test_small_changes_are_same_even_when_significant():
    base = results({"alg4": 0.6}, seed=1, noise=0.005)
    shifted = compare(results({"alg4": 0.6 * 1.05}, seed=2, noise=0.005), base, SCHEMA, metrics=["seconds"])
    alg4 = shifted[shifted["variant"] == "alg4"]
    assert (alg4["p_value"] < 0.05).all()  # a real 5% change, but under the 10% threshold
    assert set(shifted["verdict"]) == {"SAME"}


def test_runs_of_older_code_are_ignored():
    old_slow = results({"alg4": 1.2}, seed=1, run_id="old", day=1).assign(code_version="old")
    current = results({"alg4": 0.6}, seed=2, run_id="cur", day=2)
    result = compare(results({"alg4": 0.6}, seed=3), pd.concat([current, old_slow]), SCHEMA, metrics=["seconds"])
    assert set(result["verdict"]) == {"SAME"}
    assert np.allclose(result.loc[result["variant"] == "alg4", "base_ratio"], 0.6, rtol=0.05)


def test_a_disturbed_run_does_not_make_a_regression():
    base = pd.concat([results({"alg4": 0.6}, seed=s, run_id=f"b{s}") for s in range(3)])
    disturbed = results({"alg4": 0.6 * 1.6}, seed=10, run_id="n0")
    new = pd.concat([disturbed, *(results({"alg4": 0.6}, seed=s, run_id=f"n{s}") for s in (11, 12))])
    result = compare(new, base, SCHEMA, metrics=["seconds"])
    assert set(result["verdict"]) == {"SAME"}
    assert (result["n_new"] == 3 * REPEATS).all()
    slower = pd.concat([results({"alg4": 1.2}, seed=s, run_id=f"n{s}") for s in (20, 21, 22)])
    assert verdicts(compare(slower, base, SCHEMA))[(32, "alg4", "alg1")] == "SLOWER"


def test_a_slow_mode_held_by_whole_processes_is_not_a_regression():
    """alg4 1.65x slower in some processes, all of whose repeats share it (the CPU's emulated
    warps): the new side's four processes all slow, the baseline's one of four fast. Its
    least disturbed run moves by 65% and its repeats differ significantly, but its processes
    do not: SAME. Every process twice as slow is SLOWER."""
    def runs(prefix, modes, factor=1.0):
        return pd.concat([results({"alg4": 0.6 * mode * factor}, seed=ord(prefix) * 100 + i, run_id=f"{prefix}{i}",
                                  noise=0.03) for i, mode in enumerate(modes)])

    base = runs("b", (1.0, 1.65, 1.65, 1.65))
    unchanged = compare(runs("n", (1.65, 1.65, 1.65, 1.65)), base, SCHEMA, threshold=0.6, metrics=["seconds"])
    alg4 = unchanged[unchanged["variant"] == "alg4"]
    assert (alg4["change"] > 1.6).all() and (alg4["n_new"] == 4).all()
    assert set(unchanged["verdict"]) == {"SAME"}
    slower = compare(runs("n", (1.0, 1.65, 1.65, 1.65), factor=2), base, SCHEMA, threshold=0.6, metrics=["seconds"])
    assert set(slower.loc[slower["variant"] == "alg4", "verdict"]) == {"SLOWER"}


def test_disjoint_files_and_other_axes_are_bad_input():
    base = results({"alg4": 0.6}, seed=1, Ks=(32,))
    new = results({"alg4": 0.6}, seed=2, Ks=(64,))
    with pytest.raises(BenchError, match=r"K: NEW \['64'\] vs BASE \['32'\]"):
        compare(new, base, SCHEMA)
    other = json.loads(json.dumps(SCHEMA))
    other["columns"]["W"] = AXIS
    with pytest.raises(BenchError, match="different axes"):
        compare(new, base, SCHEMA, new_schema=other)
    with pytest.raises(BenchError, match="no gated metric 'draw_z_s'"):
        compare(new, base, SCHEMA, metrics=["draw_z_s"])


def test_reports_show_absolute_times_ratios_change_and_p():
    result = compare(results({"alg4": 0.6, "alg7": 1.0}, seed=2), results(BASE_FACTORS, seed=1), SCHEMA)
    console = Console(record=True, width=200)
    console.print(render_table(result))
    text = console.export_text()
    assert "SLOWER" in text and "SAME" in text and "+100." in text and "calibration" in text
    header = next(line for line in text.splitlines() if "variant" in line)
    assert "K" in header and "precision" not in header  # constant keys left out of the columns
    assert "precision=f32" in text
    markdown = render_markdown(result)
    assert markdown.startswith("| K | variant | metric | over | base | new |") and "SLOWER" in markdown
    quality = next(line for line in markdown.splitlines() if "| final_objective |" in line).split("|")
    assert quality[7:11] == ["  ", "  ", quality[9], "  "] and quality[9].strip().endswith("%")  # no ratio, no p
    rows = json.loads(render_json([result]))["suites"][0]["rows"]
    slow = next(r for r in rows if r["variant"] == "alg7" and r["K"] == 32 and r["metric"] == "seconds")
    assert slow["verdict"] == "SLOWER" and slow["new"] == pytest.approx(1.0, rel=0.05)
    assert slow["base"] == pytest.approx(0.5, rel=0.05)


def test_too_few_repeats_for_the_test_fall_back_to_the_threshold():
    few = {"alg4": 0.6}
    base = results(few, seed=1)
    new = results({"alg4": 1.2}, seed=2)  # alg4 twice as slow
    base, new = (df[df["repeat"] < 3] for df in (base, new))  # 3 repeats a side: p >= 0.1 at best
    result = compare(new, base, SCHEMA)
    alg4 = result[(result["variant"] == "alg4") & (result["metric"] == "seconds")]
    assert set(alg4["verdict"]) == {"SLOWER"} and alg4["p_value"].isna().all()
    assert exit_code(result) == 1
    assert "too few" in render_markdown(result)
    assert "SLOWER or WORSE by the threshold alone, too few repeats for the test" in summary(result)
    assert "threshold alone" not in summary(compare(results({"alg4": 1.2}, seed=2), results(few, seed=1), SCHEMA))
    same = compare(results(few, seed=3).query("repeat < 3"), base, SCHEMA)
    assert set(same["verdict"]) == {"SAME"}  # small noise stays below the threshold


def test_gpu_runs_are_compared_over_the_gpu_reference():
    # sumrv's reference (numpy) runs on the CPU; its GPU runs divide by naive, a GPU kernel.
    schema = {**SCHEMA, "reference": "numpy", "gpu_reference": "alg1"}
    gpu = results(BASE_FACTORS, seed=1).assign(backend="gpu")
    assert reference_for(schema, "gpu") == "alg1" and reference_for(schema, "cpu") == "numpy"
    assert reference_for({**SCHEMA, "reference": "alg1"}, "gpu") == "alg1"  # an older sidecar: no gpu_reference
    new = results({"alg4": 0.6, "alg7": 1.0}, seed=2).assign(backend="gpu")
    result = compare(new, gpu, schema)
    assert verdicts(result)[(32, "alg7", "alg1")] == "SLOWER" and result.attrs["reference"] == "alg1"


def test_a_file_of_cpu_and_gpu_rows_is_gated_over_each_backends_reference():
    schema = {**SCHEMA, "gpu_reference": "alg4"}
    base = pd.concat([results(BASE_FACTORS, seed=1), results(BASE_FACTORS, seed=3).assign(backend="gpu")])
    new = pd.concat([results(BASE_FACTORS, seed=2), results({"alg4": 0.6, "alg7": 1.0}, seed=4).assign(backend="gpu")])
    result = compare(new, base, schema, metrics=["seconds"])
    on = {(b, v, a): verdict for b, v, a, verdict in
          result[result["K"] == 32][["backend", "variant", "against", "verdict"]].itertuples(index=False)}
    assert on[("gpu", "alg7", "alg4")] == "SLOWER" and on[("cpu", "alg7", "alg1")] == "SAME"
    assert ("gpu", "alg1", "alg4") in on and result.attrs["reference"] == "alg1 / alg4"


def test_detection_table_counts_false_alarms_and_catches():
    from bench.check import detection_table

    rows = pd.DataFrame([{"threshold": 0.1, "calibration_threshold": 0.25, "kind": "unchanged", "variant": "-",
                          "factor": 1.0, "run": r, "exit_code": 0, "largest_change_pct": 3.0 + r} for r in range(2)] +
                        [{"threshold": 0.1, "calibration_threshold": 0.25, "kind": "one kernel", "variant": "alg7",
                          "factor": 2.0, "run": r, "exit_code": r, "largest_change_pct": 99.0} for r in range(2)])
    table = detection_table(rows)
    assert "0 of 2 false alarms" in table and "1 of 2 caught" in table
    null = [cell.strip() for cell in table.splitlines()[2].split("|")]
    assert null[1:3] == ["0.1", "0.25"]  # the ratio's and the calibration's threshold
    assert null[8:11] == ["3.5", "3", "4"]  # median, smallest and largest change: how near the threshold


def test_a_tolerance_is_relative_to_the_resolution_where_the_baseline_is_smaller():
    schema = json.loads(json.dumps(SCHEMA))
    schema["columns"]["final_objective"].update(better="lower", tolerance=9.0, resolution=1e-12)
    base = results(BASE_FACTORS, seed=1, quality=0.0)  # an error of 0: one thread's rounding
    rounding = compare(results(BASE_FACTORS, seed=2, quality=3e-14), base, schema, metrics=["final_objective"])
    assert set(rounding["verdict"]) == {"SAME"}
    broken = compare(results(BASE_FACTORS, seed=2, quality=1e-6), base, schema, metrics=["final_objective"])
    assert set(broken["verdict"]) == {"WORSE"}
    schema["columns"]["final_objective"]["resolution"] = 0.0  # without one, any error at all would fail
    assert set(compare(results(BASE_FACTORS, seed=2, quality=3e-14), base, schema,
                       metrics=["final_objective"])["verdict"]) == {"WORSE"}


def test_a_baseline_from_before_resolutions_takes_the_installed_suites(tmp_path):
    from pathlib import Path

    from bench.check import compare_files
    from bench.results import schema_for, update_sidecar
    from bench.suite import get_suite

    schema = schema_for(get_suite("sumrv"))
    old = json.loads(json.dumps(schema))
    del old["columns"]["max_rel_error"]["resolution"]
    base = pd.read_csv(Path(__file__).parent.parent / "results" / "cpu-amd-epyc-2c" / "ci" / "sumrv.csv")
    for side, df, sidecar in (("base", base.assign(max_rel_error=0.0), old),
                              ("new", base.assign(max_rel_error=3e-14, run_id=base["run_id"] + "-new"), schema)):
        (tmp_path / side).mkdir()
        df.to_csv(tmp_path / side / "sumrv.csv", index=False)
        update_sidecar(tmp_path / side / "sumrv.json", None, schema=sidecar)
    result = compare_files(tmp_path / "new", tmp_path / "base", "sumrv", metrics=["max_rel_error"])
    assert set(result["verdict"]) == {"SAME"}
