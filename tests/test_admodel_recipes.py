"""The admodel recipes and claims: declarations that plan, and verdicts computed from
synthetic results of a thesis-like GPU and of one like ours, None where results lack what
a claim needs (CPU-only results, none at all)."""

import itertools
from pathlib import Path

import pandas as pd
import pytest

from bench import harness
from bench.recipes import PROFILES, Measured, backend_of
from bench.report import Results
from bench.suite import get_suite
from impls.admodel import figures
from impls.admodel.fit_suite import SUITE as FIT
from impls.admodel.recipes import CLAIMS, RECIPES
from impls.admodel.suite import OP_VARIANTS, SUITE

REPO = Path(__file__).resolve().parents[1]
CPU = ("cpu-serial", "cpu-parallel")


class FakeResults:
    """What a claim reads of bench.report.Results, from frames in memory."""

    def __init__(self, frames=None, profiles=None):
        self.frames, self.profiles = frames or {}, profiles or {}

    def frame(self, suite):
        return self.frames.get(suite, pd.DataFrame())

    def series(self, suite):
        return pd.DataFrame()

    def profile(self, suite):
        return self.profiles.get(suite, pd.DataFrame())

    def runs(self, suite):
        return {}


# Seconds of one call per variant, and factors by layout, precision and L1 policy.
THESIS_LIKE = dict(base={"objective": 0.03, "grad-atomic": 0.5, "grad-block": 0.25, "grad-warp": 0.01,
                         "two-pass": 0.53, "fused": 0.02, "fused-bucketed": 0.015},
                   sorted={"objective": 0.3, "grad-atomic": 10.0}, f32={}, ldg={"objective": 1.5},
                   copy_frac={"fused": 0.5, "fused-bucketed": 0.7})
OURS_LIKE = dict(base={"objective": 0.003, "grad-atomic": 0.01, "grad-block": 0.3, "grad-warp": 0.005,
                       "two-pass": 0.013, "fused": 0.0056, "fused-bucketed": 0.0034},
                 sorted={"objective": 0.3, "grad-atomic": 1.2, ("real-like", "objective"): 1.15},
                 f32={"grad-atomic": 1.3}, ldg={"objective": 0.5},
                 copy_frac={"fused": 0.35, "fused-bucketed": 0.58})


def evaluations(world: dict, scale: float = 1.0, run_id: str = "run-1", cpu_seconds: float = 1.0) -> pd.DataFrame:
    """Three repeats of every point of the paper profile's axes, the CPU references at f64,
    ldg, blocks of 256 (as the suite measures them)."""
    rows = []
    for dataset, layout, precision, l1, op in itertools.product(("sim", "real-like"), ("shuffled", "sorted"),
                                                                 ("f64", "f32"), ("ldg", "ldcg"), OP_VARIANTS):
        for variant in OP_VARIANTS[op]:
            if variant in CPU:
                if precision != "f64" or l1 != "ldg":
                    continue
                seconds, device, copy_frac = cpu_seconds * (0.25 if variant == "cpu-parallel" else 1), "cpu", None
            else:
                seconds = world["base"][variant]
                seconds *= world["sorted"].get((dataset, variant), world["sorted"].get(variant, 1.0)) \
                    if layout == "sorted" else 1.0
                seconds *= world["f32"].get(variant, 0.5) if precision == "f32" else 1.0
                seconds *= world["ldg"].get(variant, 1.0) if l1 == "ldg" else 1.0
                device, copy_frac = "gpu", world["copy_frac"].get(variant, 0.4)
            for repeat in range(3):
                jitter = 1 + 0.01 * (repeat - 1)
                rows.append(dict(suite="admodel", backend="gpu", dataset=dataset, scale=scale, layout=layout,
                                 precision=precision, op=op, l1=l1, block=256, variant=variant, device=device,
                                 repeat=repeat, seconds=seconds * jitter, copy_gbps=4000.0,
                                 copy_frac=None if copy_frac is None else copy_frac / jitter,
                                 gbps=None if copy_frac is None else 4000.0 * copy_frac / jitter,
                                 setup_s=0.05 if variant == "fused-bucketed" else None, run_id=run_id))
    return pd.DataFrame(rows)


def fits(scale: float = 1.0, gpu: bool = True, lbfgs_seconds: float = 0.6, lbfgs_f: float = 20119663.4904,
         effects: float = 0.025) -> pd.DataFrame:
    routes = {"scipy-cpu": (70.0, 20119663.4872)}
    if gpu:
        routes |= {"scipy-gpu": (2.0, 20119663.4852), "lbfgs-gpu": (lbfgs_seconds, lbfgs_f),
                   "torch-lbfgs": (0.7, 20119663.4852)}
    rows = [dict(suite="admodel-fit", dataset="sim", scale=scale, layout="shuffled", precision="f64",
                 variant=variant, repeat=repeat, seconds=seconds, iterations=100, evaluations=120,
                 final_objective=f, converged=1, effects_rmse=effects, factors_rmse=0.159, run_id="fit-1")
            for variant, (seconds, f) in routes.items() for repeat in range(2)]
    return pd.DataFrame(rows)


def verdicts(results) -> dict:
    out = {}
    for claim in CLAIMS:
        measured = claim.ours(results)
        assert measured is None or (isinstance(measured, Measured) and measured.text), claim.id
        out[claim.id] = None if measured is None else claim.holds(measured.value)
    return out


def test_thesis_like_results_hold_every_claim():
    results = FakeResults({"admodel": evaluations(THESIS_LIKE), "admodel-fit": fits()})
    assert verdicts(results) == {claim.id: True for claim in CLAIMS}


def test_results_like_ours_give_the_verdicts_of_the_h200():
    results = FakeResults({"admodel": evaluations(OURS_LIKE), "admodel-fit": fits()})
    expected = {"objective-speedup": True, "gradient-speedup": False, "improved-gradient": False,
                "single-objective": True, "single-gradient": False, "sorted-objective": False,
                "sorted-gradient": False, "l1-objective": False, "gradient-target": True, "fused-copy": False,
                "fit-speed": True, "fit-agreement": True, "fit-recovery": True}
    assert verdicts(results) == expected


def test_fit_claims_differ_where_the_fit_is_slow_or_stops_elsewhere():
    results = FakeResults({"admodel-fit": fits(lbfgs_seconds=7.0, lbfgs_f=20119663.4872 * (1 + 1e-7),
                                               effects=0.2)})
    got = verdicts(results)
    assert (got["fit-speed"], got["fit-agreement"], got["fit-recovery"]) == (False, False, False)


def test_no_results_and_cpu_only_results_are_not_measured():
    assert set(verdicts(FakeResults()).values()) == {None}
    cpu = evaluations(OURS_LIKE, scale=0.015625)
    cpu = cpu[cpu["variant"].isin(CPU)]
    results = FakeResults({"admodel": cpu, "admodel-fit": fits(scale=0.00390625, gpu=False)})
    assert set(verdicts(results).values()) == {None}


def test_claims_read_the_largest_scale_and_say_when_it_is_not_the_thesis():
    quick = evaluations(THESIS_LIKE, scale=0.25, run_id="quick")
    paper = evaluations(OURS_LIKE, scale=1.0, run_id="paper")
    both = FakeResults({"admodel": pd.concat([quick, paper])})
    claim = next(c for c in CLAIMS if c.id == "l1-objective")
    assert not claim.holds(claim.ours(both).value)  # the scale-1 rows (ours), not the quick ones
    assert "scale" not in claim.ours(both).text and "GPU points (at the thesis's size)" in claim.ours(both).text
    assert "at scale 0.25" in claim.ours(FakeResults({"admodel": quick})).text


def test_fused_copy_shows_the_profile_where_there_is_one():
    profile = pd.DataFrame([dict(variant="fused-bucketed", layout="sorted", kernel="admodel_fused_f64_n10_ldg",
                                 metric="lts__throughput.avg.pct_of_peak_sustained_elapsed", value=64.0)])
    results = FakeResults({"admodel": evaluations(OURS_LIKE)}, {"admodel": profile})
    claim = next(c for c in CLAIMS if c.id == "fused-copy")
    assert "Nsight Compute (bench profile): fused-bucketed: L2 64% of peak" in claim.ours(results).text


def test_fused_copy_holds_only_when_both_datasets_reach_the_target():
    claim = next(c for c in CLAIMS if c.id == "fused-copy")
    rows = evaluations(THESIS_LIKE)  # fused-bucketed 0.7 of the copy bandwidth on both
    assert claim.holds(claim.ours(FakeResults({"admodel": rows})).value)
    assert claim.ours(FakeResults({"admodel": rows[rows["dataset"] == "sim"]})) is None  # real-like unmeasured
    slow = rows["dataset"].eq("real-like") & rows["copy_frac"].notna()
    rows.loc[slow, "copy_frac"] = rows.loc[slow, "copy_frac"] * 0.5
    measured = claim.ours(FakeResults({"admodel": rows}))
    assert not claim.holds(measured.value) and "real-like: fused-bucketed 0.35" in measured.text


def test_every_claim_computes_on_the_committed_h200_results():
    directory = REPO / "results" / "nvidia-h200"
    if not (directory / "admodel.csv").exists():
        pytest.skip("no committed H200 results of admodel")
    results = Results(directory, {SUITE.name: SUITE, FIT.name: FIT})
    for claim in CLAIMS:
        measured = claim.ours(results)
        assert measured is not None and measured.text, claim.id
        claim.holds(measured.value)


def test_recipes_plan_under_every_profile_and_name_the_figures_drawn():
    names = {recipe.name for recipe in RECIPES}
    assert {claim.recipe for claim in CLAIMS} <= names
    drawn = {*figures.FIGURE.values(), "admodel-tables", "admodel-fit-convergence", "admodel-fit-table",
             "admodel-profile"}  # the last: bench's roofline and stall figures of admodel-profile.csv
    for recipe in RECIPES:
        assert (recipe.figures or not recipe.reproduces_paper) and all(any(stem.startswith(d) for d in drawn) for stem in recipe.figures)
        for sweep, profile in itertools.product(recipe.sweeps, PROFILES):
            if sweep.at(profile) is not None:
                plan = harness.plan(get_suite(sweep.suite), sweep.specs(profile), backend_of(profile, True), None)
                assert plan.points, (recipe.name, profile)
    fit = next(recipe for recipe in RECIPES if recipe.name == "fit")
    assert {sweep.suite for sweep in fit.sweeps} == {"admodel-fit"}
    assert SUITE.paper and FIT.paper == SUITE.paper and ".txt" not in SUITE.paper


def test_kernel_builds_name_the_suites_kernel_file():
    (source, options), = SUITE.kernel_builds()
    assert source.name == "admodel.cu" and "admodel_" in source.read_text()
    assert "-std=c++17" in options
