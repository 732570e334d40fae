"""The admodel GPU kernels (needs CuPy and a GPU): every kernel within the agreement rule
of `bench verify` for both layouts, precisions, L1 policies and block sizes, on a count
of observations that is no multiple of the block; the fused kernel's f equal to the
objective kernel's; the fit on the GPU at scipy's optimum; memory errors before allocating."""

from dataclasses import replace

import numpy as np
import pytest

from bench.errors import BenchError
from impls.admodel import cpu, fit_suite, gpu
from impls.admodel.data import MATERIAL, PLACEMENT
from impls.admodel.suite import OP_VARIANTS, SUITE, check_memory

pytestmark = pytest.mark.gpu
SCALE = 0.0003  # sim: 10,066 observations; real-like: 4,086


def _case(dataset, layout, precision, op, l1="ldg", block=256, seed=11):
    point = {"suite": "admodel", "backend": "gpu", "dataset": dataset, "scale": SCALE, "layout": layout,
             "precision": precision, "op": op, "l1": l1, "block": block}
    return SUITE.verify_case(point, seed)


@pytest.mark.parametrize("dataset", ["sim", "real-like"])
@pytest.mark.parametrize("layout", ["shuffled", "sorted"])
@pytest.mark.parametrize("precision", ["f64", "f32"])
@pytest.mark.parametrize("op", ["objective", "gradient", "both"])
def test_kernels_agree_with_the_reference(dataset, layout, precision, op):
    for l1, block in (("ldg", 256), ("ldcg", 96), ("ldg", 32), ("ldcg", 512)):
        case = _case(dataset, layout, precision, op, l1, block)
        for variant in OP_VARIANTS[op]:
            if variant.startswith("cpu"):
                continue
            got = SUITE.output(case, variant, "gpu")
            assert got[0] is not None or got[1] is not None
            ok, detail = SUITE.agrees(case, got, 0.001)
            assert ok, f"{variant} l1={l1} block={block}: {detail}"


@pytest.mark.parametrize("layout", ["shuffled", "sorted"])
@pytest.mark.parametrize("precision", ["f64", "f32"])
def test_skewed_path_agrees_across_many_tiles_a_block(monkeypatch, layout, precision):
    """real-like takes the skewed path; a grid of two blocks makes each block run many tiles,
    so that row runs and the cache carry across tiles (at the tests' scale a full grid gives
    each block one tile)."""
    monkeypatch.setattr(gpu, "_grid", lambda observations, block: 2)
    case = _case("real-like", layout, precision, "both")
    assert gpu.upload(case["data"]).skewed
    for variant in ("fused", "fused-bucketed"):
        ok, detail = SUITE.agrees(case, SUITE.output(case, variant, "gpu"), 0.001)
        assert ok, f"{variant}: {detail}"
    case = _case("real-like", layout, precision, "gradient")
    ok, detail = SUITE.agrees(case, SUITE.output(case, "grad-warp", "gpu"), 0.001)
    assert ok, f"grad-warp: {detail}"


@pytest.mark.parametrize("precision", ["f64", "f32"])
@pytest.mark.parametrize("l1, block", [("ldg", 256), ("ldcg", 96)])
def test_pairs_of_few_materials_agree(precision, l1, block):
    """Bucketed observations go by their (material, placement) pairs: sim folded onto 3
    materials and 1,000 placements (about 3,000 pairs of 3 observations), so that a material's
    warps in pair_rows loop over more pairs than they have lanes, a placement's leave some idle
    and a placement gathers the pairs of every material. The pairs are each observation's,
    grouped as they say, and fused-bucketed agrees with the reference."""
    case = _case("sim", "shuffled", precision, "both", l1, block)
    covariates = case["data"].covariates.copy()
    covariates[MATERIAL] %= 3
    covariates[PLACEMENT] %= 1000
    data = replace(case["data"], covariates=covariates)
    case = {**case, "data": data, "reference": cpu.plain(data, case["theta"]),
            "bound": cpu.magnitudes(data, case["theta"])}
    bucketed = gpu.bucket(gpu.upload(data))
    pairs = bucketed.pairs
    of, placement, by_placement = pairs.of.get(), pairs.placement.get(), pairs.by_placement.get()
    observed = bucketed.covariates[MATERIAL].get()
    material = observed[np.flatnonzero(np.diff(of, prepend=-1))]  # each pair's: its first observation's
    assert pairs.count == np.unique(covariates[MATERIAL] * 1000 + covariates[PLACEMENT]).size > 2 * 1000
    assert (np.diff(of) >= 0).all()
    np.testing.assert_array_equal(material[of], observed)
    np.testing.assert_array_equal(placement[of], bucketed.covariates[PLACEMENT].get())
    np.testing.assert_array_equal(pairs.material_by_placement.get(), material[by_placement])
    for (ptr, key), keys in ((pairs.material_groups, material), (pairs.placement_groups, placement[by_placement])):
        ptr, key = ptr.get(), key.get()
        np.testing.assert_array_equal(np.repeat(key, np.diff(ptr)), keys)
        assert ptr[-1] == pairs.count and (np.diff(key) > 0).all()
    ok, detail = SUITE.agrees(case, SUITE.output(case, "fused-bucketed", "gpu"), 0.001)
    assert ok, detail


def test_fused_objective_equals_the_objective_kernel_and_grad_warp_its_gradient():
    import cupy

    case = _case("real-like", "sorted", "f64", "both")
    dev = gpu.upload(case["data"])
    theta = cupy.asarray(case["theta"])
    f, grad = gpu.fused(dev, theta)
    assert float(f) == float(gpu.objective(dev, theta))  # same blocks, same order: bit for bit
    assert np.allclose(grad.get(), gpu.gradient("grad-warp", dev, theta).get(), rtol=1e-13, atol=1e-13)


def test_fit_on_the_gpu_reaches_scipy_cpus_optimum():
    point = {"suite": "admodel-fit", "backend": "gpu", "dataset": "sim", "scale": 1 / 256, "layout": "shuffled",
             "precision": "f64"}
    suite = fit_suite.SUITE
    work = suite.prepare(point)

    class Ctx:
        device = "gpu"
        series = []

        def record(self, iteration, **values):
            self.series.append((iteration, values))

        def untimed(self):
            from contextlib import nullcontext
            return nullcontext()

    results = {}
    variants = [v.name for v in suite.variants if not v.missing()]  # torch-lbfgs where torch is installed
    for variant in variants:
        ctx = Ctx()
        results[variant] = suite.run(work, variant, ctx)
        assert ctx.series and results[variant]["converged"] == 1
    reference = results["scipy-cpu"]["final_objective"]
    for variant, values in results.items():
        assert abs(values["final_objective"] - reference) <= 1e-8 * abs(reference), variant


def test_a_scale_beyond_gpu_memory_is_a_one_line_error_before_allocating(monkeypatch):
    import cupy

    monkeypatch.setattr(cupy.cuda.runtime, "memGetInfo", lambda: (1 << 28, 1 << 34))  # 256 MiB free
    point = {"suite": "admodel", "backend": "gpu", "dataset": "sim", "scale": 1.0}
    with pytest.raises(BenchError, match="on the GPU"):
        check_memory([point])
