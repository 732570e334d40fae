"""The admodel suite on a CPU: the generator's determinism and shapes, the CPU references
against the formula by hand, plain numpy and central finite differences, the agreement
rule of `bench verify`, our L-BFGS against scipy's, and the errors a user can meet."""

import hashlib
import math

import numpy as np
import pytest
from scipy.optimize import minimize

from bench import harness
from bench.errors import BenchError
from impls.admodel import cpu, data, lbfgs
from impls.admodel.suite import SUITE, check_memory, evaluation_theta

SCALE = 1 / 2048  # sim: 16,384 observations; real-like: 6,650


def digest(d: data.Data) -> str:
    h = hashlib.sha256()
    for array in (d.covariates, d.y, d.w, d.theta_true):
        h.update(array.tobytes())
    return h.hexdigest()


@pytest.mark.parametrize("dataset", ["sim", "real-like"])
def test_generator_is_deterministic_and_seeded(dataset):
    a = data.generate(dataset, SCALE, "shuffled", seed=3)
    data._shuffled.cache_clear()  # a second generation, not the cached arrays
    assert digest(data.generate(dataset, SCALE, "shuffled", seed=3)) == digest(a)
    assert digest(data.generate(dataset, SCALE, "shuffled", seed=4)) != digest(a)


@pytest.mark.parametrize("dataset", ["sim", "real-like"])
def test_generated_data_has_the_thesis_shapes(dataset):
    d = data.generate(dataset, SCALE, "shuffled")
    shape = d.shape
    assert d.observations == round(shape.observations * SCALE)
    assert d.covariates.dtype == np.int32 and d.y.dtype == np.int8 and d.w.dtype == np.int16
    assert d.nbytes == d.observations * data.BYTES_PER_OBSERVATION == 23 * d.observations
    assert set(np.unique(d.y)) <= {0, 1, 2, 3}
    for cls in range(5):
        assert 0 <= d.covariates[cls].min() and d.covariates[cls].max() < shape.levels[cls]
        # every observed level is one of the class's active levels
        assert d.active[shape.offsets[cls] + d.covariates[cls]].all()
    assert int(d.active.sum()) == shape.active_parameters
    assert np.all(d.theta_true[~d.active] == 0)
    if dataset == "sim":
        assert shape.parameters == 125_001 and shape.active_parameters == 125_001 and np.all(d.w == 1)
    else:
        assert shape.parameters == 1_475_051 and shape.active_parameters == 32_601
        assert set(np.unique(d.w)) == {1, 4} and np.all(d.w[d.y > 0] == 1)
        # sparse allowed pairs: a material is shown on a few placements only
        pairs = np.unique(d.covariates[data.MATERIAL].astype(np.int64) << 32 | d.covariates[data.PLACEMENT])
        assert len(pairs) < 8 * shape.active[data.MATERIAL]


def test_sorted_layout_is_a_permutation_sorted_by_material_then_placement():
    shuffled = data.generate("real-like", SCALE, "shuffled")
    ordered = data.generate("real-like", SCALE, "sorted")
    key = ordered.covariates[data.MATERIAL].astype(np.int64) << 32 | ordered.covariates[data.PLACEMENT]
    assert np.all(np.diff(key) >= 0)
    def rows(d):
        table = np.vstack([d.covariates, d.y, d.w]).T.astype(np.int64)
        return table[np.lexsort(table.T[::-1])]

    assert np.array_equal(rows(shuffled), rows(ordered))


def test_hottest_share_finds_a_level_in_every_warp_and_takes_the_skewed_path_only_there():
    from impls.admodel import gpu

    keys = np.arange(5 * 64 * 32, dtype=np.int32).reshape(5, 64 * 32)  # every level once
    assert gpu.hottest_share(keys) == 1 / 64
    keys[3, ::32] = 7  # level 7 of class r in every warp (a tile of 32), once each
    assert gpu.hottest_share(keys) == 1.0
    keys[3, 16::64] = 7  # twice in every other warp: still one warp each
    assert gpu.hottest_share(keys) == 1.0
    assert gpu.hottest_share(keys[:, :31]) == 0.0  # no whole warp
    # The generators: real-like's popular levels are in every warp, sim's levels in few.
    for layout in data.LAYOUTS:
        assert gpu.hottest_share(data.generate("real-like", SCALE, layout).covariates) > gpu.SKEWED_FROM
        assert gpu.hottest_share(data.generate("sim", SCALE, layout).covariates) < gpu.SKEWED_FROM / 3


def test_objective_by_hand_weights_log_factorial_and_the_prior_sign():
    d = data.generate("sim", SCALE, "shuffled")
    one = data.Data("one", d.shape, d.covariates[:, :1].copy(), np.array([2], np.int8), np.array([3], np.int16),
                    d.theta_true, d.active)
    theta = np.zeros(d.shape.parameters)
    theta[0] = 0.5
    mu = math.exp(0.5)
    expected = (-3 * (2 * 0.5 - mu - math.log(2)) + 0.25 / (2 * data.PSI)
                + d.shape.parameters * (math.log(2 * math.pi) + math.log(data.PSI)) / 2)
    for parallel in (False, True):
        f, grad = cpu.evaluate(one, theta, True, parallel)
        assert f == pytest.approx(expected, rel=1e-14)
        assert grad[0] == pytest.approx(0.5 / data.PSI - 3 * (2 - mu), rel=1e-14)


@pytest.mark.parametrize("dataset", ["sim", "real-like"])
@pytest.mark.parametrize("layout", ["shuffled", "sorted"])
def test_references_agree_with_plain_numpy(dataset, layout):
    d = data.generate(dataset, SCALE, layout)
    theta = evaluation_theta(d)
    f, grad = cpu.plain(d, theta)
    f_magnitude, _, g_magnitude, _ = cpu.magnitudes(d, theta)
    for parallel in (False, True):
        f_ref, g_ref = cpu.evaluate(d, theta, True, parallel)
        assert abs(f_ref - f) <= 1e-13 * f_magnitude
        assert np.all(np.abs(g_ref - grad) <= 1e-13 * g_magnitude)
        assert cpu.evaluate(d, theta, False, parallel)[0] == f_ref


@pytest.mark.parametrize("dataset", ["sim", "real-like"])
def test_gradient_matches_central_finite_differences(dataset):
    d = data.generate(dataset, SCALE, "shuffled")
    theta = evaluation_theta(d)
    _, grad = cpu.evaluate(d, theta, True)
    offsets = d.shape.offsets
    observed = [offsets[c] + d.covariates[c, 0] for c in range(5)]
    factor_rows = [offsets[5] + d.covariates[data.MATERIAL, 0] * 10 + 3, offsets[6] + d.covariates[data.PLACEMENT, 0] * 10 + 7]
    inactive = np.flatnonzero(~d.active)[:1].tolist()
    h = 1e-5
    for j in [0, *observed, *factor_rows, *inactive]:
        step = np.zeros_like(theta)
        step[j] = h
        numeric = (cpu.evaluate(d, theta + step, False)[0] - cpu.evaluate(d, theta - step, False)[0]) / (2 * h)
        assert numeric == pytest.approx(grad[j], rel=1e-5, abs=1e-5), j


def _case(dataset="sim", precision="f64", op="both"):
    point = {"suite": "admodel", "backend": "cpu", "dataset": dataset, "scale": SCALE, "layout": "shuffled",
             "precision": precision, "op": op, "l1": "ldg", "block": 256}
    return SUITE.verify_case(point, seed=5)


def test_agreement_rule_passes_the_references_and_fails_a_wrong_gradient():
    case = _case()
    for variant in ("cpu-serial", "cpu-parallel"):
        ok, detail = SUITE.agrees(case, SUITE.output(case, variant, "cpu"), 0.001)
        assert ok, detail
    f, grad = SUITE.output(case, "cpu-serial", "cpu")
    wrong = grad.copy()
    j = case["data"].shape.offsets[2] + case["data"].covariates[2, 0]
    wrong[j] += 2e-12 * case["bound"][2][j]  # one entry off by twice its bound
    assert not SUITE.agrees(case, (None, wrong), 0.001)[0]
    assert not SUITE.agrees(case, (case["reference"][0] + 2e-12 * case["bound"][0], None), 0.001)[0]
    # float32 is held to its own, looser bound: a float32 rounding of the answer passes
    f32 = _case(precision="f32")
    rounded = f32["reference"][1].astype(np.float32).astype(np.float64)
    assert SUITE.agrees(f32, (float(np.float32(f32["reference"][0])), rounded), 0.001)[0]


def test_bench_verify_plan_covers_each_op_with_its_variants():
    plan = harness.plan(SUITE, {"scale": str(SCALE)}, "cpu", verification=True)
    assert {p["op"] for p in plan.points} == {"objective", "gradient", "both"}
    assert all(p["precision"] == "f64" and p["l1"] == "ldg" for p in plan.points)
    assert {name for name, _ in plan.variants} == {"cpu-serial", "cpu-parallel"}


def test_lbfgs_reaches_scipys_optimum():
    d = data.generate("sim", 1 / 512, "shuffled")

    def fg(x):
        return cpu.evaluate(d, x, True)

    x0 = np.zeros(d.shape.parameters)
    expected = minimize(fg, x0, jac=True, method="L-BFGS-B", options={"maxcor": 10, "ftol": 1e-12, "gtol": 1e-5})
    seen = []
    result = lbfgs.minimize(fg, x0, np, ftol=1e-12, gtol=1e-5, on_iteration=lambda k, f, g: seen.append((k, f)))
    assert result.converged and expected.success
    assert abs(result.f - expected.fun) <= 1e-8 * abs(expected.fun)
    assert [k for k, _ in seen] == list(range(1, result.iterations + 1))
    assert all(b <= a for (_, a), (_, b) in zip(seen, seen[1:]))  # Armijo: f never rises


def test_lbfgs_stops_with_a_clear_error_on_a_non_finite_objective():
    d = data.generate("sim", SCALE, "shuffled")
    x0 = np.zeros(d.shape.parameters)
    x0[0] = 800.0  # exp(800) overflows
    with pytest.raises(lbfgs.FitError, match="not finite"):
        lbfgs.minimize(lambda x: cpu.evaluate(d, x, True), x0, np)


def test_a_scale_beyond_host_memory_is_a_one_line_error_before_allocating():
    point = {"suite": "admodel", "backend": "cpu", "dataset": "sim", "scale": 64.0}
    with pytest.raises(BenchError, match="lower --scale"):
        check_memory([point])


def test_bad_axis_values_are_one_line_errors():
    with pytest.raises(BenchError, match="unknown layout"):
        harness.plan(SUITE, {"layout": "random"}, "cpu")
    with pytest.raises(BenchError, match="unknown dataset"):
        harness.plan(SUITE, {"dataset": "criteo"}, "cpu")
    with pytest.raises(BenchError, match="block"):
        harness.plan(SUITE, {"block": "1024"}, "gpu")
    with pytest.raises(BenchError, match="multiple of 32"):  # the kernels' shuffles take whole warps
        harness.plan(SUITE, {"block": "100"}, "gpu")


def test_sweeps_of_both_suites_render_their_tables_and_figures(tmp_path):
    from bench.figures import render_all
    from impls.admodel.fit_suite import SUITE as FIT

    machine = tmp_path / "results" / "cpu-test"
    settings = harness.Settings(repeats=1, warmup=0, out_dir=machine)
    assert harness.sweep(harness.plan(SUITE, {"scale": str(SCALE), "dataset": "sim"}, "cpu"), settings) == 0
    assert harness.sweep(harness.plan(FIT, {"scale": str(SCALE)}, "cpu"), settings) == 0
    written = render_all(tmp_path / "results", tmp_path / "figures", [SUITE, FIT])
    names = {path.name for path in written}
    assert {"admodel-tables.md", "admodel-fit-table.md", "admodel-fit-convergence-dataset-sim.png"} <= names
    tables = (tmp_path / "figures" / "cpu-test" / "admodel-tables.md").read_text()
    assert "cpu-serial" in tables and "cpu-parallel" in tables
    fit = (tmp_path / "figures" / "cpu-test" / "admodel-fit-table.md").read_text()
    assert fit.count("scipy-cpu") == 2  # sim and real-like, each converged
    import pandas as pd

    series = pd.read_csv(machine / "admodel-fit-series.csv")
    assert set(series["variant"]) == {"scipy-cpu"} and series["objective"].notna().all()


def test_figures_and_tables_keep_scales_apart_and_take_a_configurations_newest_run(tmp_path, monkeypatch):
    # results of two scales (a quick run beside a full one) and a configuration measured in two
    # runs: a figure per scale, bars from one run each, the tables' rows by scale
    import pandas as pd

    from bench.results import schema_for
    from impls.admodel import figures

    rows = []
    for run, scale, configs in (("20260101T000000Z-a", 1.0, ("f64", "f32")), ("20260102T000000Z-b", 1.0, ("f64",)),
                                ("20260103T000000Z-c", 0.125, ("f64", "f32"))):
        for precision in configs:
            for variant, seconds in (("cpu-serial", 1.0), ("fused", 0.01 if run.endswith("a") else 0.02)):
                rows.append(dict(suite="admodel", backend="gpu", dataset="sim", scale=scale, layout="shuffled",
                                 precision=precision, op="both", l1="ldg", block=256, variant=variant,
                                 seconds=seconds, run_id=run, group=0, repeat=0, machine="m",
                                 timestamp=f"2026-01-0{run[7]}T00:00:00+00:00", code_version="c"))
    drawn = {}

    def bars(fig, outdir, stem, caption_text=None):
        drawn[stem] = [bar.get_height() for bar in fig.axes[0].patches], caption_text
        return [outdir / f"{stem}.png"]

    monkeypatch.setattr(figures, "save", bars)
    figures.render_evaluations(pd.DataFrame(rows), {"schema": schema_for(SUITE), "runs": {}}, tmp_path)
    assert set(drawn) == {"fig4-combined-dataset-sim-scale-1.0", "fig4-combined-dataset-sim-scale-0.125"}
    heights, caption = drawn["fig4-combined-dataset-sim-scale-1.0"]
    assert sorted(heights) == [50.0, 100.0]  # f64 from run b (1 / 0.02), f32 from run a, its only one
    assert "Measured 2026-01-01 to 2026-01-02" in caption and "scale=1.0" in caption  # runs a and b alone
    tables = (tmp_path / "admodel-tables.md").read_text()
    assert "| 0.125 " in tables
    assert tables.count("10.00 (100x") == 1  # f32 at scale 1 (run a); f64 there from run b: 20.00 (50x)
    # a newer run resumed past the references (f32's GPU variant alone): the cell keeps run a's, with
    # its speed-ups, not a time with none
    resumed = dict(rows[1], run_id="20260104T000000Z-d", seconds=0.04, timestamp="2026-01-04T00:00:00+00:00",
                   precision="f32", scale=1.0)
    assert resumed["variant"] == "fused"
    assert "40.00" not in figures.markdown_tables(pd.DataFrame([*rows, resumed]))
    assert figures.markdown_tables(pd.DataFrame([*rows, resumed])).count("10.00 (100x") == 1
