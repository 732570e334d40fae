"""The sumrv GPU kernels (needs CuPy and a GPU): exact on dyadic inputs, skewdiag-det
bit for bit its CPU twin on random inputs, every kernel within its stated bound in
both spaces, strip's shift per pair in log space, strided views, the split-j path, and the
peak kernels' rates."""

import numpy as np
import pytest

from impls.sumrv import cpu, gpu
from impls.sumrv.suite import KERNELS, log_errors, make_inputs, normwise_errors, tolerance

pytestmark = pytest.mark.gpu

MAX_SPILL_BYTES = 16
SHAPES = [(1, 1, 1), (3, 1, 70), (2, 33, 65), (5, 64, 64), (1, 1000, 3), (2, 4096, 1000), (1, 16384, 16384)]


@pytest.fixture(scope="module")
def cupy():
    import cupy

    return cupy


@pytest.mark.parametrize("batch, m, n", SHAPES)
@pytest.mark.parametrize("precision", ["f32", "f64"])
def test_kernels_equal_numpy_on_dyadic_inputs(cupy, batch, m, n, precision):
    p, q = make_inputs(batch, m, n, precision, "dyadic", [m, n, 7])
    expected = cpu.reference(p, q, False)
    for variant in KERNELS:
        got = gpu.convolve(variant, cupy.asarray(p), cupy.asarray(q), False).get()
        assert got.dtype == p.dtype and np.array_equal(got, expected), variant


@pytest.mark.parametrize("batch, m, n", SHAPES[:5])
@pytest.mark.parametrize("precision", ["f32", "f64"])
def test_skewdiag_det_is_its_twin_bit_for_bit_on_random_inputs(cupy, batch, m, n, precision):
    p, q = make_inputs(batch, m, n, precision, "random", [m, n, 8])
    got = gpu.convolve("skewdiag-det", cupy.asarray(p), cupy.asarray(q), False).get()
    assert np.array_equal(got, cpu.skewdiag(p, q, False, True))
    again = gpu.convolve("skewdiag-det", cupy.asarray(p), cupy.asarray(q), False).get()
    assert np.array_equal(got, again)


@pytest.mark.parametrize("batch, m, n", SHAPES[:6])
@pytest.mark.parametrize("precision", ["f32", "f64"])
@pytest.mark.parametrize("kind", ["random", "tiny"])
def test_log_space_kernels_within_their_bound(cupy, batch, m, n, precision, kind):
    a, b = make_inputs(batch, m, n, precision, kind, [m, n, 9])
    if kind == "random":
        a, b = np.log(a), np.log(b)
    expected = cpu.reference(a, b, True)
    bound = tolerance(precision, m, n, expected, True, True)
    for variant in KERNELS:
        error = log_errors(gpu.convolve(variant, cupy.asarray(a), cupy.asarray(b), True).get(), expected)
        assert np.all(error <= bound), (variant, error.max())


@pytest.mark.parametrize("batch, m, n", [(3, 1, 70), (2, 33, 65), (5, 64, 64), (3, 1000, 3), (2, 700, 1000)])
@pytest.mark.parametrize("precision", ["f32", "f64"])
def test_strip_log_by_shift_keeps_the_bound_and_leaves_wide_pairs_to_the_per_output_kernel(cupy, batch, m, n,
                                                                                           precision):
    """The shift per pair on random log-probabilities, and a last pair whose first values lie
    1.2 x the spread limit below the rest: shifted, its first output would underflow (f64: to
    -inf), so the per-output kernel must take it; on packed rows and on row-strided views."""
    a, b = (np.log(v) for v in make_inputs(batch, m, n, precision, "random", [m, n, 10]))
    low = -1.2 * gpu.SPREAD[precision]
    a[-1, 0], b[-1, 0] = a[-1].max() + low, b[-1].max() + low
    expected = cpu.reference(a, b, True)
    bound = tolerance(precision, m, n, expected, True, True)

    def row_strided(v):  # rows 3 values apart beyond their length, from the second value of a buffer
        buffer = cupy.full((v.shape[0], v.shape[1] + 4), -np.inf, dtype=v.dtype)
        buffer[:, 1:-3] = cupy.asarray(v)
        return buffer[:, 1:-3]

    for shift in (True, False):
        for view in (cupy.asarray, row_strided):
            error = log_errors(gpu.strip(view(a), view(b), True, shift=shift).get(), expected)
            assert np.all(error <= bound), (shift, view, error.max())


@pytest.mark.parametrize("batch, m, n", [(3, 1, 70), (2, 33, 65), (5, 64, 64), (3, 128, 100), (2, 300, 7),
                                         (4, 256, 256), (2, 511, 513)])
@pytest.mark.parametrize("precision, space", sorted(gpu.WHOLE))
def test_strip_with_a_warp_per_pair_is_exact_on_dyadic_inputs_and_within_the_log_bound(cupy, batch, m, n, precision,
                                                                                       space):
    """The warp-per-pair strip kernels (gpu.WHOLE, forced at any batch), on packed rows and on
    row-strided views (rows not 16-byte aligned: scalar staging); m + n = 1024 takes more
    than the 48 KiB of shared memory a launch gets without asking in f64."""
    log = space == "log"
    p, q = make_inputs(batch, m, n, precision, "random" if log else "dyadic", [m, n, 11])
    if log:
        p, q = np.log(p), np.log(q)
    expected = cpu.reference(p, q, log)

    def row_strided(v):
        buffer = cupy.zeros((v.shape[0], v.shape[1] + 3), dtype=v.dtype)
        buffer[:, 1:-2] = cupy.asarray(v)
        return buffer[:, 1:-2]

    for view in (cupy.asarray, row_strided):
        got = gpu.strip(view(p), view(q), log, configs=(gpu.WHOLE[precision, space],), shift=False).get()
        if log:
            assert np.all(log_errors(got, expected) <= tolerance(precision, m, n, expected, True, True)), view
        else:
            assert np.array_equal(got, expected), view


SYSTOLIC_SHAPES = [(3, 64, 64), (5, 256, 256), (40, 128, 128), (2, 100, 37), (4, 37, 300), (2, 24, 1000),
                   (3, 250, 700), (2, 1, 1), (3, 17, 1), (3, 64, 101)]


@pytest.mark.parametrize("batch, m, n, precision", [(*shape, precision) for precision in ("f32", "f64")
                                                    for shape in SYSTOLIC_SHAPES] +
                         [(3, 300, 520, "f32"), (2, 512, 512, "f32"), (7, 700, 260, "f32")])  # f32 in blocks of 16
def test_systolic_strip_is_exact_on_dyadic_inputs(cupy, batch, m, n, precision):
    """The systolic strip kernels (forced at any batch), each configuration: either row the
    shorter, teams of 1 to 32 lanes, teams wider than p's blocks (a block's pairs would not fit
    its shared memory: 24 x 1000), a warp's last teams without a pair, and row-strided views:
    rows that start off 16 bytes (q staged a value at a time) and rows that start on 16 bytes
    with a length of no whole vectors (q's last vector staged a value at a time)."""
    assert gpu.systolic_config(min(m, n), max(m, n), precision)
    p, q = make_inputs(batch, m, n, precision, "dyadic", [m, n, 9])
    expected = cpu.reference(p, q, False)

    def strided(a, start: int, width: int):
        buffer = cupy.zeros((batch, width), dtype=a.dtype)
        buffer[:, start:start + a.shape[1]] = cupy.asarray(a)
        return buffer[:, start:start + a.shape[1]]

    aligned = -(-(n + 1) // 4) * 4  # whole vectors of 16 bytes in either precision
    for p_view, q_view in ((cupy.asarray(p), cupy.asarray(q)), (strided(p, 2, m + 5), cupy.asarray(q)),
                           (cupy.asarray(p), strided(q, 0, aligned)), (strided(p, 0, m + 3), strided(q, 1, n + 6))):
        got = gpu.strip(p_view, q_view, False, systolic=True).get()
        assert got.dtype == p.dtype and np.array_equal(got, expected)


@pytest.mark.parametrize("batch, m, n, log", [(1, 32, 32, False), (4096, 1024, 1024, False), (1, 256, 256, True)])
def test_auto_runs_the_fastest_candidate_it_timed_and_keeps_it(cupy, monkeypatch, batch, m, n, log):
    p, q = (cupy.asarray(a) for a in make_inputs(batch, m, n, "f32", "random", [m, n, 3]))
    if log:
        p, q = cupy.log(p), cupy.log(q)
    got = gpu.auto(p, q, log)
    choice = gpu.auto_choice(p, q, log)
    assert choice in gpu.AUTO_CANDIDATES[log]
    np.testing.assert_array_equal(got.get(), gpu.convolve(choice, p, q, log).get())

    def look_up_again(*args):
        raise AssertionError("auto missed its choice: the key written out in auto is not auto_key")
    monkeypatch.setattr(gpu, "_auto_chosen", look_up_again)
    np.testing.assert_array_equal(gpu.auto(p, q, log).get(), got.get())


def test_a_timed_run_of_auto_records_the_method_it_ran(cupy):
    from bench.timing import RunContext
    from impls.sumrv.suite import SUITE

    point = {"backend": "gpu", "batch": 64, "m": 96, "n": 40, "precision": "f32", "space": "lin"}
    work = SUITE.prepare(point)
    with RunContext("gpu").timed() as ctx:
        values = SUITE.run(work, "auto", ctx)
    assert values["auto_choice"] == gpu.auto_choice(work.p, work.q, False)
    with RunContext("gpu").timed() as ctx:
        assert "auto_choice" not in SUITE.run(work, "strip", ctx)


@pytest.mark.parametrize("batch, m, n", [(1, 1, 1), (3, 1, 70), (2, 33, 65), (5, 64, 64), (2, 4096, 1000)])
@pytest.mark.parametrize("precision", ["f32", "f64"])
@pytest.mark.parametrize("space", ["lin", "log"])
def test_fftconv_within_the_normwise_bound(cupy, batch, m, n, precision, space):
    """Our FFT path on packed rows and on element-strided views (the pad kernel reads strides)."""
    log = space == "log"
    p, q = make_inputs(batch, m, n, precision, "random", [m, n, 12])
    if log:
        p, q = np.log(p), np.log(q)
    expected = cpu.reference(p, q, log)
    bound = tolerance(precision, m, n, expected, log, False)

    def every_other(v):
        buffer = cupy.zeros((2 * v.shape[0], 2 * v.shape[1]), dtype=v.dtype)
        buffer[::2, ::2] = cupy.asarray(v)
        return buffer[::2, ::2]

    for view in (cupy.asarray, every_other):
        got = gpu.fftconv(view(p), view(q), log).get()
        assert got.dtype == p.dtype and got.shape == expected.shape
        assert normwise_errors(got, expected, log).max() <= bound, view


@pytest.mark.parametrize("batch, m, n, log", [(1, 4096, 4096, False), (3, 33, 65, False), (3, 33, 65, True),
                                              (4096, 256, 256, False), (4096, 32, 32, True), (4096, 64, 64, True),
                                              (4096, 256, 256, True), (16384, 128, 128, False)])
@pytest.mark.parametrize("precision", ["f32", "f64"])
def test_auto_plans_give_their_variants_outputs(cupy, batch, m, n, log, precision):
    """Each candidate's plan (the j split at batch 1, the chunked, warp-per-pair and systolic strips,
    strip's shift per pair in log space, f64 from m = n = 64, f32 at 256) gives its variant's output
    bit for bit: on packed rows; on row-strided views whose rows start 16-byte aligned, then on views whose rows
    start one value further (not aligned: the plan made for aligned rows hands them to strip),
    and the other way round (a plan made from unaligned rows serves aligned ones); on
    element-strided views (plans of their own)."""
    p, q = make_inputs(batch, m, n, precision, "random", [m, n, 13])
    if log:
        p, q = np.log(p), np.log(q)

    def in_rows(v, offset):  # rows of a multiple of 4 values apart, from value `offset` of a buffer
        buffer = cupy.zeros((v.shape[0], -(-v.shape[1] // 4) * 4 + 4), dtype=v.dtype)
        buffer[:, offset:offset + v.shape[1]] = cupy.asarray(v)
        return buffer[:, offset:offset + v.shape[1]]

    def every_other(v):
        buffer = cupy.zeros((v.shape[0], 2 * v.shape[1]), dtype=v.dtype)
        buffer[:, ::2] = cupy.asarray(v)
        return buffer[:, ::2]

    cases = [((cupy.asarray(p), cupy.asarray(q)),), ((in_rows(p, 0), in_rows(q, 0)), (in_rows(p, 1), in_rows(q, 1))),
             ((in_rows(p, 1), in_rows(q, 1)), (in_rows(p, 0), in_rows(q, 0))), ((every_other(p), every_other(q)),)]
    for planned_for, *others in cases:
        for name in gpu.AUTO_CANDIDATES[log]:
            plan = gpu._auto_plan(name, *planned_for, log)
            for a, b in (planned_for, *others):
                np.testing.assert_array_equal(plan(a, b).get(), gpu.convolve(name, a, b, log).get(), err_msg=name)


def test_strided_views_need_no_copy(cupy):
    p, q = make_inputs(4, 100, 300, "f64", "dyadic", 3)
    big_p, big_q = cupy.zeros((8, 200)), cupy.zeros((4, 900))
    big_p[::2, ::2] = cupy.asarray(p)
    big_q[:, ::3] = cupy.asarray(q)
    for variant in KERNELS:
        got = gpu.convolve(variant, big_p[::2, ::2], big_q[:, ::3], False).get()
        assert np.array_equal(got, cpu.reference(p, q, False)), variant


def test_strip_splits_j_when_a_batch_cannot_fill_the_gpu():
    *_, splits, split_len = gpu.strip_config(16384, 16384, 1, "f32", "lin")
    assert splits > 1 and splits * split_len >= 16384
    assert gpu.strip_config(256, 256, 4096, "f32", "lin")[4] == 1


def test_no_kernel_spills_more_than_a_few_registers():
    """NVRTC 13 may trade two to four registers for occupancy (8-16 bytes of local memory,
    cached in L1); the 16-outputs-per-slot f64 and log kernels spilled hundreds."""
    resources = gpu.kernel_resources()
    assert len(resources) == len(gpu.kernel_names())
    assert not [r["kernel"] for r in resources if r["local_bytes"] > MAX_SPILL_BYTES], "a kernel spills"
