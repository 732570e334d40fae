"""The lda suites' recipes and claims (impls/lda/recipes.py): every claim's verdict on small
synthetic results built here, "not measured here" (None) on empty and CPU-only results,
and no claim failing on the committed results of any machine."""

from pathlib import Path

import pandas as pd
import pytest

from bench.recipes import PROFILES
from bench.report import Results
from bench.suite import all_suites, get_suite
from impls.lda.recipes import CLAIMS, RECIPES, trailing_zeros

ROOT = Path(__file__).resolve().parent.parent
CLAIM = {claim.id: claim for claim in CLAIMS}


class FakeResults:
    """What the claims read of bench.report.Results, from frames given here."""

    def __init__(self, frames=None, profiles=None):
        self.frames, self.profiles = frames or {}, profiles or {}

    def frame(self, suite):
        return self.frames.get(suite, pd.DataFrame())

    def profile(self, suite):
        return self.profiles.get(suite, pd.DataFrame())


def application(times, update="mfm", iterations=3, repeats=2, backend="gpu", draw_share=0.9, **extra):
    """lda rows: times maps (precision, variant, K) to seconds a run, the same in every repeat."""
    rows = []
    for (precision, variant, K), seconds in times.items():
        for repeat in range(repeats):
            rows.append(dict(suite="lda", backend=backend, dataset="wiki-synth", update=update, precision=precision,
                             K=K, iterations=iterations, variant=variant, repeat=repeat, seconds=seconds,
                             draw_z_s=draw_share * seconds, update_s=0.05 * seconds, tokens=1000,
                             group=f"{update}-{precision}-{K}-{iterations}", **{"run_id": "r1", **extra}))
    return pd.DataFrame(rows)


def kernels(times, repeats=2, **columns):
    """lda-kernels rows: times maps (precision, variant, K, loads) to seconds a launch."""
    rows = []
    for (precision, variant, K, loads), seconds in times.items():
        for repeat in range(repeats):
            rows.append(dict(suite="lda-kernels", backend="gpu", dataset="wiki-synth", precision=precision, K=K,
                             storage="auto", registers=0, loads=loads, variant=variant, repeat=repeat,
                             seconds=seconds, group=f"{precision}-{K}-{loads}", **columns))
    return pd.DataFrame(rows)


def verdict(claim_id, results):
    measured = CLAIM[claim_id].ours(results)
    return None if measured is None else CLAIM[claim_id].holds(measured.value)


GRID = range(4, 1025, 4)


@pytest.mark.parametrize("claim_id, precision", [("ST1", "f32"), ("ST2", "f64")])
@pytest.mark.parametrize("alg4_over_alg7, expected", [(1.1, True), (0.9, False)])
def test_alg7_against_alg4(claim_id, precision, alg4_over_alg7, expected):
    times = {**{(precision, "alg7", K): 1e-3 * K for K in GRID},
             **{(precision, "alg4", K): 1e-3 * K * alg4_over_alg7 for K in GRID}}
    results = FakeResults({"lda": application(times)})
    assert verdict(claim_id, results) is expected
    # The other precision's claim has nothing to read.
    assert verdict({"ST1": "ST2", "ST2": "ST1"}[claim_id], results) is None
    # alg7 measured again at two K by a later run alone: those K have no ratio within a run, and say so
    later = application({key: value for key, value in times.items() if key[1] == "alg7" and key[2] in (16, 80)},
                        run_id="r2")
    apart = FakeResults({"lda": pd.concat([application(times)[lambda d: ~((d["variant"] == "alg7")
                                                                        & d["K"].isin([16, 80]))], later])})
    assert "of the 254 K = 4k measured" in CLAIM[claim_id].ours(apart).text
    assert "(left out: K = 16, 80, where alg4 and alg7 ran in different runs)" in CLAIM[claim_id].ours(apart).text


@pytest.mark.parametrize("speedup, expected", [(2.0, True), (0.8, False)])
def test_st3_over_alg1(speedup, expected):
    times = {(p, v, K): (speedup if v == "alg1" else 1.0) * 1e-3 * K
             for p in ("f32", "f64") for v in ("alg1", "alg4", "alg7") for K in range(996, 1025, 4)}
    measured = CLAIM["ST3"].ours(FakeResults({"lda": application(times)}))
    assert measured.value == pytest.approx([speedup] * 4)
    assert CLAIM["ST3"].holds(measured.value) is expected


def test_claims_read_the_setting_most_rows_were_measured_at():
    # the paper's corpus at full size, and a few K of a smaller scale where alg1 is three times
    # slower and alg7 twice: ST1 and ST3 read the full size alone (ST3 had failed on two scales)
    full = {(p, v, K): (2.0 if v == "alg1" else 1.1 if v == "alg4" else 1.0) * 1e-3 * K
            for p in ("f32", "f64") for v in ("alg1", "alg4", "alg7") for K in range(480, 1025, 4)}
    half = {(p, v, K): (6.0 if v == "alg1" else 1.1 if v == "alg4" else 2.0) * 1e-3 * K
            for p in ("f32", "f64") for v in ("alg1", "alg4", "alg7") for K in range(996, 1025, 4)}
    results = FakeResults({"lda": pd.concat([application(full, scale=1.0), application(half, scale=0.5)])})
    assert CLAIM["ST3"].ours(results).value == pytest.approx([2.0 / 1.1, 2.0] * 2)
    alone = FakeResults({"lda": application(full, scale=1.0)})
    assert CLAIM["ST1"].ours(results).value == CLAIM["ST1"].ours(alone).value


@pytest.mark.parametrize("deepening, expected", [(1.0, True), (-1.0, False)])
def test_st4_dips_by_trailing_zero_bits(deepening, expected):
    # The paper's shape: an upper line through the odd K, each even K below it by an
    # amount that grows with the trailing zero bits of K mod 32 (or, reversed, shrinks).
    def seconds(K):
        zeros = trailing_zeros(K % 32)
        dip = 0.0 if K % 2 else 0.01 * (zeros if deepening > 0 else 6 - zeros)
        return 1e-3 * K * (1 - dip)

    times = {(p, v, K): seconds(K) for p in ("f32", "f64") for v in ("alg4", "alg7") for K in range(480, 545)}
    assert verdict("ST4", FakeResults({"lda": application(times)})) is expected
    # The Figure 7 grid alone (K = 4k) has no odd neighbours: not measured.
    grid = {key: value for key, value in times.items() if key[2] % 4 == 0}
    assert verdict("ST4", FakeResults({"lda": application(grid)})) is None
    # that grid measured again, 5% faster, by a later run: each dip stays one run's
    later = application({key: 0.95 * value for key, value in grid.items()}, run_id="r2")
    both = FakeResults({"lda": pd.concat([application(times), later])})
    def dips(results):
        return {kernel: by_zeros.round(12).to_dict() for kernel, by_zeros in CLAIM["ST4"].ours(results).value.items()}

    assert dips(both) == dips(FakeResults({"lda": application(times)}))


def test_trailing_zeros():
    assert [trailing_zeros(r) for r in (0, 1, 2, 3, 4, 8, 16, 24, 31)] == [5, 0, 1, 0, 2, 3, 4, 3, 0]


@pytest.mark.parametrize("speedup, expected", [(2.5, True), (1.5, False)])
def test_st5_figure6(speedup, expected):
    frames = [application({(p, v, K): (speedup if v == "alg1" else 1.0) * 1e-3 * K
                           for p in ("f32", "f64") for v in ("alg1", "alg7") for K in range(16, 241, 32)},
                          update=update) for update in ("mfm", "dirichlet")]
    measured = CLAIM["ST5"].ours(FakeResults({"lda": pd.concat(frames, ignore_index=True)}))
    assert measured.value == pytest.approx(speedup)
    assert "K = 208, 240" in measured.text
    assert CLAIM["ST5"].holds(measured.value) is expected


@pytest.mark.parametrize("drift, expected", [(1.0, True), (1.1, False)])
def test_iterations(drift, expected):
    def times(scale):
        return {(p, v, K): {"alg1": 2.0, "alg4": 1.0, "alg7": 1.0 * scale, "warpscan": 0.2}[v] * 1e-3 * K
                for p in ("f32",) for v in ("alg1", "alg4", "alg7", "warpscan") for K in (512, 1024)}

    frame = pd.concat([application(times(1.0), iterations=3), application(times(drift), iterations=100)],
                      ignore_index=True)
    assert verdict("iterations", FakeResults({"lda": frame})) is expected
    # One iteration count only: nothing to compare.
    assert verdict("iterations", FakeResults({"lda": application(times(1.0))})) is None
    # the fewest iterations measured again by newer code (alg7 slower there): not compared with the
    # most iterations measured by the older
    later = application(times(1.2), iterations=3, run_id="r2", code_version="new")
    mixed = pd.concat([frame.assign(code_version="old"), later], ignore_index=True)
    assert verdict("iterations", FakeResults({"lda": mixed})) is None
    assert verdict("iterations", FakeResults({"lda": frame.assign(code_version="old")})) is expected


@pytest.mark.parametrize("speedup_at_1024, expected", [(2.5, True), (1.5, False)])
def test_segscan_speed(speedup_at_1024, expected):
    # segscan 1.2x faster than warpscan below K = 1024 and 0.9x (slower) at K = 64, f32 and f64.
    times = {}
    for p in ("f32", "f64"):
        for K in (32, 64, 256, 1024):
            times[p, "warpscan", K, "auto"] = 1e-6 * K
            times[p, "segscan", K, "auto"] = 1e-6 * K / {1024: speedup_at_1024, 64: 0.9}.get(K, 1.2)
    measured = CLAIM["segscan-speed"].ours(FakeResults({"lda-kernels": kernels(times)}))
    assert measured.value == pytest.approx(speedup_at_1024)
    assert CLAIM["segscan-speed"].holds(measured.value) is expected
    assert "0.90x at 64" in measured.text and "at 32" not in measured.text  # K from 64 only
    assert "Smallest at any K: 0.90x" in measured.text
    # Without K = 1024 there is nothing to judge.
    at_256 = {key: t for key, t in times.items() if key[2] != 1024}
    assert CLAIM["segscan-speed"].ours(FakeResults({"lda-kernels": kernels(at_256)})) is None


def test_segscan_speed_names_the_l2_share_twice_warpscans_speed_would_need():
    # segscan 3 ms at 60% of the L2 peak against warpscan's 4 ms: at 2 ms it would need 90%.
    times = {(p, v, 1024, "auto"): t for p in ("f32", "f64") for v, t in (("warpscan", 4e-3), ("segscan", 3e-3))}
    counters = {"gpu__time_duration.sum": {"warpscan": 4.0, "segscan": 3.0},
                "lts__throughput.avg.pct_of_peak_sustained_elapsed": {"warpscan": 80.0, "segscan": 60.0},
                "sm__issue_active.avg.pct_of_peak_sustained_elapsed": {"warpscan": 70.0, "segscan": 50.0},
                "sm__warps_active.avg.pct_of_peak_sustained_active": {"warpscan": 50.0, "segscan": 25.0}}
    profile = pd.DataFrame([dict(kernel=f"drawz_{variant}_{precision}", variant=variant, precision=precision, K=1024,
                                 metric=metric, unit="ms" if metric.startswith("gpu__time") else "%", value=value)
                            for metric, values in counters.items() for variant, value in values.items()
                            for precision in ("f32", "f64")])
    text = CLAIM["segscan-speed"].ours(FakeResults({"lda-kernels": kernels(times)}, {"lda-kernels": profile})).text
    assert "f32 3.00 ms against warpscan's 4.00, issue slots 50% busy, 25% of warps active, L2 at 60%" in text
    assert text.count("twice warpscan's speed with this L2 traffic would need 90%") == 2
    # Without a profile the claim says nothing of it.
    assert "Profile" not in CLAIM["segscan-speed"].ours(FakeResults({"lda-kernels": kernels(times)})).text


@pytest.mark.parametrize("warpscan, expected", [(0.25, True), (2.0, False)])
def test_warpscan_speed(warpscan, expected):
    times = {(p, v, K): {"alg1": 2.0, "alg4": 1.0, "alg7": 1.0, "warpscan": warpscan}[v] * 1e-3 * K
             for p in ("f32", "f64") for v in ("alg1", "alg4", "alg7", "warpscan") for K in range(996, 1025, 4)}
    assert verdict("warpscan-speed", FakeResults({"lda": application(times)})) is expected


@pytest.mark.parametrize("vector_speedup_below_512, expected", [(0.7, True), (1.5, False)])
def test_warpscan_loads(vector_speedup_below_512, expected):
    # auto loads scalars below K = 512 in f32 and vectors from there, where vectors here run 1.25x faster.
    times = {}
    for K in (64, 256, 512, 1024):
        times["f32", "warpscan", K, "scalar"] = 1e-6 * K
        times["f32", "warpscan", K, "vector"] = 1e-6 * K / (1.25 if K >= 512 else vector_speedup_below_512)
    assert verdict("warpscan-loads", FakeResults({"lda-kernels": kernels(times)})) is expected


def test_every_claim_not_measured_on_empty_or_cpu_results(tmp_path):
    empty = Results(tmp_path, {s.name: s for s in all_suites()})
    cpu = FakeResults({"lda": application({(p, v, K): 1e-3 for p in ("f32", "f64")
                                           for v in ("alg1", "alg4", "alg7") for K in range(480, 1025)},
                                          backend="cpu")})
    for claim in CLAIMS:
        assert claim.ours(FakeResults()) is None, claim.id
        assert claim.ours(empty) is None, claim.id
        assert claim.ours(cpu) is None, claim.id


@pytest.mark.parametrize("machine", sorted(p.name for p in (ROOT / "results").iterdir() if p.is_dir()))
def test_claims_compute_on_committed_results(machine):
    results = Results(ROOT / "results" / machine, {s.name: s for s in all_suites()})
    for claim in CLAIMS:
        measured = claim.ours(results)
        if measured is not None:
            assert isinstance(claim.holds(measured.value), bool), claim.id
            assert measured.text, claim.id


def test_committed_h200_verdicts():
    """The committed H200 results: the verdicts whose margins are wide."""
    results = Results(ROOT / "results" / "nvidia-h200", {s.name: s for s in all_suites()})
    if results.frame("lda").empty:
        pytest.skip("no committed H200 lda results")
    assert verdict("ST2", results) is False  # alg7 slower than alg4 in f64 at every K
    assert verdict("ST3", results) is True
    assert verdict("ST5", results) is False  # 1.2-1.5x, not 2x
    assert verdict("warpscan-speed", results) is True


def test_recipes_are_well_formed():
    suite = get_suite("lda")
    assert suite.recipes is RECIPES and suite.claims is CLAIMS
    assert suite.paper and get_suite("lda-kernels").paper == suite.paper
    names = [recipe.name for recipe in RECIPES]
    assert len(set(names)) == len(names)
    assert {claim.recipe for claim in CLAIMS} <= set(names)
    assert len({claim.id for claim in CLAIMS}) == len(CLAIMS)
    for recipe in RECIPES:
        assert recipe.figures or not recipe.reproduces_paper  # the gate (ci) draws nothing
        for sweep in recipe.sweeps:
            target = get_suite(sweep.suite)
            axes = {a.name for a in target.axes} | {alias for a in target.axes for alias in a.aliases}
            assert set(sweep.axes) <= axes, (recipe.name, sweep.axes)
            assert {v for v in sweep.variants} <= {v.name for v in target.variants}
            for profile in PROFILES:
                specs = sweep.specs(profile)
                if specs is not None:
                    assert set(specs) <= axes, (recipe.name, profile, specs)


def test_kernel_builds():
    lda, drawz = get_suite("lda").kernel_builds(), get_suite("lda-kernels").kernel_builds()
    assert [source.name for source, _ in lda] == ["drawz.cu", "counts.cu"]
    assert [source.name for source, _ in drawz] == ["drawz.cu"]
    assert any(option.startswith("-DDRAWZ_KMAX_LOCAL=") for option in drawz[0][1])
    for source, _ in lda:
        assert source.read_text()
