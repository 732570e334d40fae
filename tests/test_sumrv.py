"""The sumrv suite on a CPU: the numba twins of the skew-diagonal kernel against numpy,
exactly on dyadic inputs for every m, n in 1..70; the log-space references on inputs
that underflow in linear space; the error bounds; the suite on the harness; which plan the
GPU's auto replays (stand-in arrays)."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from bench import harness
from impls.sumrv import cpu, gpu
from impls.sumrv.suite import SUITE, log_errors, make_inputs, normwise_errors, relative_errors, tolerance

SIZES = range(1, 71)


@pytest.mark.parametrize("precision", ["f32", "f64"])
def test_twins_equal_numpy_exactly_on_dyadic_inputs_for_every_m_n_up_to_70(precision):
    wrong = []
    for m in SIZES:
        for n in SIZES:
            p, q = make_inputs(2, m, n, precision, "dyadic", [m, n])
            expected = cpu.reference(p, q, log=False)
            for deterministic in (False, True):
                got = cpu.skewdiag(p, q, False, deterministic)
                if got.dtype != p.dtype or not np.array_equal(got, expected):
                    wrong.append((m, n, deterministic))
    assert not wrong, f"{len(wrong)} (m, n, deterministic) differ from numpy, first {wrong[:5]}"


def test_dyadic_inputs_stay_exact_up_to_two_to_the_fourteen_in_float32():
    """The claim the GPU exactness checks rest on: the largest output at m = n = 2^14
    is below 2^24 units of the last place."""
    p, q = make_inputs(1, 1 << 14, 1 << 14, "f32", "dyadic", 0)
    assert (15 / 16) * (15 / 8) * (1 << 14) * 128 < 1 << 24
    assert np.array_equal(np.convolve(p[0].astype(np.float64), q[0]).astype(np.float32).astype(np.float64),
                          np.convolve(p[0].astype(np.float64), q[0]))


def test_the_post_s_four_by_four_example_is_the_skewed_layout():
    """Warp i, lane j reads x = (i - j) mod 32, y = j: lanes 0..i on diagonal i, the rest on i + 32."""
    for i in range(32):
        sums = [((i - j) % 32) + j for j in range(32)]
        assert sums == [i] * (i + 1) + [i + 32] * (31 - i)


def test_twins_in_log_space_match_the_float64_reference_on_tiny_probabilities():
    for precision in ("f32", "f64"):
        for m, n in ((1, 1), (5, 70), (33, 64), (70, 3)):
            a, b = make_inputs(3, m, n, precision, "tiny", [m, n])
            assert np.all(a[np.isfinite(a)] < -745)  # below float64's smallest subnormal, 4.9e-324
            expected = cpu.reference(a, b, log=True)
            assert np.all(np.exp(expected[np.isfinite(expected)].astype(np.float64)) == 0)
            bound = tolerance(precision, m, n, expected, True, True)
            for deterministic in (False, True):
                got = cpu.skewdiag(a, b, True, deterministic)
                error = log_errors(got, expected)
                assert np.all(error <= bound), (precision, m, n, deterministic, error.max())


def test_log_reference_is_the_log_of_the_linear_one_where_both_exist():
    p, q = make_inputs(4, 20, 9, "f64", "random", 1)
    assert np.allclose(cpu.reference(np.log(p), np.log(q), True), np.log(cpu.reference(p, q, False)), rtol=0,
                       atol=1e-13)


def test_log_reference_of_known_values():
    """log(0.5 e^-800 * 0.25 e^-800 + ...) by hand: p = (1/2, 1/2) e^-800, q = (1/4, 3/4) e^-800."""
    a = np.log(np.array([[0.5, 0.5]])) - 800
    b = np.log(np.array([[0.25, 0.75]])) - 800
    expected = np.log([0.125, 0.5, 0.375]) - 1600
    assert np.allclose(cpu.reference(a, b, True)[0], expected, rtol=0, atol=1e-12)
    zero = np.array([[-np.inf]])
    assert np.all(cpu.reference(zero, b, True) == -np.inf)


def test_the_numpy_peer_underflows_in_log_space_where_the_twins_do_not():
    """A user's per-vector max shift loses terms far below the maximum: the reason for log space."""
    a = np.array([[0.0, -800.0]])
    b = np.array([[0.0]])
    assert cpu.numpy_convolve(a, b, True)[0, 1] == -np.inf
    assert cpu.skewdiag(a, b, True, True)[0, 1] == -800.0
    assert relative_errors(cpu.numpy_convolve(a, b, True), cpu.reference(a, b, True), True).max() == 1.0
    assert normwise_errors(cpu.numpy_convolve(a, b, True), cpu.reference(a, b, True), True).max() == 0.0


def test_errors_flag_wrong_answers():
    reference = np.array([[1.0, 2.0, 4.0]])
    assert relative_errors(reference * (1 + 1e-3), reference, False).max() == pytest.approx(1e-3)
    assert relative_errors(np.array([[1.0, np.nan, 4.0]]), reference, False).max() == np.inf
    assert tolerance("f32", 10, 10, reference, False, True) < 1e-6


def test_suite_sweeps_on_a_cpu_and_skips_large_twins_with_a_reason(tmp_path):
    plan = harness.plan(SUITE, {"m": "33,4096", "n": "1000", "batch": "2", "precision": "f32", "space": "lin,log"},
                        "cpu")
    assert any("numba twins emulate every lane" in line for line in plan.describe_skips())
    assert harness.sweep(plan, harness.Settings(repeats=2, warmup=1, out_dir=tmp_path)) == 0
    df = pd.read_csv(tmp_path / "sumrv.csv")
    assert set(df["variant"]) == {"numpy", "skewdiag", "skewdiag-det"}
    assert set(df.loc[df["m"] == 4096, "variant"]) == {"numpy"}
    assert (df["gflops"] > 0).all() and df["peak_frac"].isna().all()  # no FMA peak on a CPU
    assert (df.loc[(df["space"] == "lin"), "max_rel_error"] < 1e-4).all()


@pytest.mark.parametrize("space, fma_gflops, expected", [("lin", 1000.0, 0.5), ("log", 1000.0, None),
                                                         ("lin", None, None)])
def test_a_gpu_rows_peak_fraction_is_over_the_ceilings_fma_peak(space, fma_gflops, expected):
    # Linear space only (log space's exps and logs are no multiply-adds); none where the run
    # measured no ceilings (under bench profile's ncu).
    work = SUITE.prepare({"m": 100, "n": 50, "batch": 2, "precision": "f32", "space": space, "backend": "cpu"})
    seconds = 2 * 100 * 50 * 2 / 500e9  # 500 GFLOP/s
    row = {"seconds": seconds, "device": "gpu", "copy_gbps": 100.0,
           **({"fma_gflops": fma_gflops} if fma_gflops else {})}
    values = SUITE.derived(work, row)
    assert values["peak_frac"] == (pytest.approx(expected) if expected else None)
    assert values["copy_frac"] == pytest.approx(values["gbps"] / 100.0)


@pytest.mark.parametrize("given, message", [
    ({"m": "0"}, "m must be >= 1"), ({"n": "20000"}, "n must be <= 16384"),
    ({"batch": "70000"}, "batch must be <= 65536"), ({"space": "ln"}, "unknown space 'ln'"),
])
def test_bad_axes_are_refused(given, message):
    from bench.errors import BenchError

    with pytest.raises(BenchError, match=message):
        harness.plan(SUITE, given, "cpu")


@pytest.mark.parametrize("m, n, batch, split", [(1, 1, 1, False), (33, 1000, 2, False), (1000, 3, 1, False),
                                                (4096, 4096, 1, True), (16384, 16384, 1, True), (16383, 5, 1, False),
                                                (16383, 1000, 1, True), (256, 256, 4096, False)])
def test_the_strip_kernels_splits_cover_p_in_whole_vectors(monkeypatch, m, n, batch, split):
    """Every j of p in exactly one split, each split starting at a whole 16-byte vector (the
    kernel's chunks do); j is split only where a batch of enough terms cannot fill the GPU."""
    monkeypatch.setattr(gpu, "multiprocessors", lambda: 132)
    for precision in ("f32", "f64"):
        *config, splits, split_len = gpu.strip_config(m, n, batch, precision, "lin")
        assert tuple(config) in gpu.STRIPS[precision, "lin"] + (gpu.WHOLE[precision, "lin"],)
        assert split_len % 4 == 0 and (splits - 1) * split_len < m <= splits * split_len
        assert (splits > 1) == split


def test_strip_takes_a_warp_per_pair_where_the_batch_fills_the_gpu_and_the_pair_fits(monkeypatch):
    monkeypatch.setattr(gpu, "multiprocessors", lambda: 132)
    assert gpu.strip_config(256, 256, 4096, "f32", "lin")[:4] == gpu.WHOLE["f32", "lin"]
    assert gpu.strip_config(512, 512, 65536, "f32", "log")[:4] == gpu.WHOLE["f32", "log"]
    assert gpu.strip_config(128, 896, 4096, "f64", "lin")[4:] == (1, 128)  # never split
    for m, n, batch, precision, space in [(256, 256, 1024, "f32", "lin"), (64, 64, 65536, "f32", "lin"),
                                          (1024, 1024, 4096, "f32", "lin"), (256, 256, 4096, "f64", "log")]:
        assert gpu.strip_config(m, n, batch, precision, space)[2] > 0, (m, n, batch, precision, space)


def test_strip_takes_the_systolic_kernel_where_it_was_measured_faster():
    assert gpu.systolic_applies(256, 256, 65536, "f32", "lin") and gpu.systolic_applies(64, 64, 16384, "f64", "lin")
    for m, n, batch, precision, space in [(256, 256, 4096, "f32", "lin"), (256, 300, 65536, "f32", "lin"),
                                          (64, 64, 65536, "f32", "lin"), (512, 512, 65536, "f64", "lin"),
                                          (256, 256, 65536, "f32", "log")]:
        assert not gpu.systolic_applies(m, n, batch, precision, space), (m, n, batch, precision, space)
    for precision, (smallest, largest) in gpu.SYSTOLIC_SIZES.items():  # every size it takes fits
        assert gpu.systolic_config(smallest, smallest, precision) and gpu.systolic_config(largest, largest, precision)
    # f32: blocks of 8 outputs a lane where p has at most 32 of them, else of 16
    assert gpu.systolic_config(256, 256, "f32")[:3] == (128, 8, 32)
    assert gpu.systolic_config(257, 257, "f32")[:3] == (96, 16, 32)
    assert gpu.systolic_config(24, 1000, "f32")[:3] == (128, 8, 16)  # three blocks of p, a team of 16: the pairs fit
    assert gpu.systolic_config(520, 520, "f32") is None  # more blocks of p than a warp has lanes


def test_log_space_splits_j_sooner_an_exp_a_term(monkeypatch):
    monkeypatch.setattr(gpu, "multiprocessors", lambda: 132)
    assert gpu.strip_config(256, 256, 1, "f64", "log")[4] > 1 == gpu.strip_config(256, 256, 1, "f64", "lin")[4]


def test_auto_replays_the_plan_kept_under_auto_key_and_no_other(monkeypatch):
    """auto's key, written out in auto for speed, is auto_key's: the plan kept under auto_key is
    the one auto calls, and arrays that differ in their strides, their space or their GPU (a plan
    holds strides and launches for one GPU) do not get it. Stand-ins for CuPy arrays: the key
    reads only their attributes."""
    def array(shape, strides, device=0):
        return SimpleNamespace(data=SimpleNamespace(device_id=device), shape=shape, strides=strides,
                               dtype=np.dtype(np.float32))

    p, q = array((4, 8), (32, 4)), array((4, 5), (20, 4))

    def not_kept(*args):
        raise LookupError("no plan kept for these arrays")
    monkeypatch.setattr(gpu, "_auto_choices", {gpu.auto_key(p, q, False): ("strip", lambda a, b: "the kept plan")})
    monkeypatch.setattr(gpu, "_auto_chosen", not_kept)
    assert gpu.auto(p, q, False) == "the kept plan"
    for other in ((array((4, 8), (64, 4)), q, False), (p, array((4, 5), (20, 8)), False), (p, q, True),
                  (array((4, 8), (32, 4), device=1), q, False), (array((4, 9), (36, 4)), q, False)):
        with pytest.raises(LookupError):
            gpu.auto(*other)


def test_auto_times_candidates_in_turn_and_drops_those_far_behind():
    """fastest_in_turn: the least of each name's best time; a round's slow spell falls on every
    name timed in it (a candidate timed alone in a slow spell is not judged by it); a name
    AUTO_BEHIND slower than the best after a round is timed no more."""
    times = {"strip": [1.0, 3.0, 1.0], "fftconv": [0.9, 3.0, 1.2], "naive": [5.0, 5.0, 5.0]}
    asked = []

    def seconds(name):
        asked.append(name)
        return times[name][sum(n == name for n in asked) - 1]
    assert gpu.fastest_in_turn(list(times), seconds, 3, gpu.AUTO_BEHIND) == "fftconv"
    assert asked == ["strip", "fftconv", "naive", "strip", "fftconv", "strip", "fftconv"]
    assert gpu.fastest_in_turn(["strip"], lambda name: 1.0, 3, 1.5) == "strip"


def test_auto_times_loops_of_at_least_four_calls_and_at_most_eight():
    assert [gpu.loop_calls(terms, gpu.AUTO_LOOP_TERMS, gpu.AUTO_MIN_CALLS, gpu.AUTO_MAX_CALLS)
            for terms in (1, 1 << 29, 1 << 30, 1 << 32, 1 << 36)] == [8, 8, 4, 4, 4]


def test_strips_path_forced_or_chosen():
    """_strip_path, the one place strip() and auto's plan take strip's path from: the shift per
    pair in log space from LOG_BY_SHIFT_TERMS (or forced), never systolic there; systolic in linear
    space where systolic_applies and the shape fits (or forced), the shorter row either side."""
    def rows(batch, length, dtype=np.float32):
        return SimpleNamespace(shape=(batch, length), dtype=np.dtype(dtype))

    big = gpu.LOG_BY_SHIFT_TERMS["f32"]
    assert gpu._strip_path(rows(1, 4096), rows(1, big // 4096), True) == "shift"
    assert gpu._strip_path(rows(1, 64), rows(1, 64), True) == "strip"
    assert gpu._strip_path(rows(1, 64), rows(1, 64), True, shift=True) == "shift"
    assert gpu._strip_path(rows(1, 64), rows(1, 64), True, systolic=True) == "strip"
    size = gpu.SYSTOLIC_SIZES["f32"][0]
    assert gpu._strip_path(rows(gpu.SYSTOLIC_BATCH, size), rows(gpu.SYSTOLIC_BATCH, size), False) == "systolic"
    assert gpu._strip_path(rows(gpu.SYSTOLIC_BATCH, size), rows(gpu.SYSTOLIC_BATCH, size), False,
                           systolic=False) == "strip"
    assert gpu._strip_path(rows(4, 32), rows(4, size), False, systolic=True) == \
        gpu._strip_path(rows(4, size), rows(4, 32), False, systolic=True)
