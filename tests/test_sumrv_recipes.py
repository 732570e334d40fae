"""The sumrv suite's recipes and claims: the recipes plan on their backends under every
profile, and the claims give the expected verdicts on small synthetic result frames,
compute on the committed H200 results, and say "not measured here" (None) on none."""

import re
from pathlib import Path

import pandas as pd
import pytest

from bench import harness, results
from bench.recipes import PROFILES, backend_of
from bench.report import Results
from impls.sumrv import figures
from impls.sumrv.recipes import CLAIMS, RECIPES
from impls.sumrv.suite import SUITE

ROOT = Path(__file__).resolve().parent.parent
CLAIM = {claim.id: claim for claim in CLAIMS}
GPU_VARIANTS = ("strip", "naive", "skewdiag", "skewdiag-det", "fft", "torch-conv1d")


class Frame:
    """What a claim reads of a bench.report.Results: the suite's frame and the directory
    (for the profile file; none here)."""

    def __init__(self, df: pd.DataFrame, directory: Path):
        self.df, self.directory = df, directory

    def frame(self, suite: str) -> pd.DataFrame:
        return self.df


RUN = "20261101T000000Z-aaaaaa"


def _row(variant, m, n, batch, precision, space, us, peak_frac=None, error=1e-9, run_id=RUN):
    return {"variant": variant, "device": "cpu" if variant == "numpy" else "gpu", "m": m, "n": n, "batch": batch,
            "run_id": run_id,
            "precision": precision, "space": space, "repeat": 0, "call_s": us * 1e-6,
            "gflops": 2 * m * n * batch / (us * 1e3), "peak_frac": peak_frac, "max_rel_error": error,
            "fma_gflops": 60_000.0}


def _frame(fft_faster_at_1024=False, strip_peak=0.6) -> pd.DataFrame:
    """strip fastest everywhere (FFT only at 4096 x 4096 of the grid), naive 2x strip,
    skewdiag 20x, skewdiag-det 19x; log space 1.5x linear; errors within the bound but FFT's."""
    times = {"strip": 1, "naive": 2, "skewdiag": 20, "skewdiag-det": 19, "fft": 5, "torch-conv1d": 6, "numpy": 10}
    rows = []
    for space in ("lin", "log"):
        for precision in ("f32", "f64"):
            for batch in (1, 4096):
                for size in (32, 256, 1024):
                    for variant, factor in times.items():
                        us = 10 * factor * (1.5 if space == "log" else 1) * (size / 32 if batch > 1 else 1)
                        if fft_faster_at_1024 and variant == "fft" and batch > 1 and size == 1024 and space == "lin":
                            us = 5 * size / 32
                        frac = strip_peak if variant == "strip" and batch > 1 and size >= 256 else 0.01
                        error = 1e-2 if variant == "fft" else 1e-7 if precision == "f32" else 1e-15
                        rows.append(_row(variant, size, size, batch, precision, space, us, frac, error))
    for m in (256, 1024, 4096):
        for n in (256, 1024, 4096):
            strip = m * n / 1e4
            fft = strip / 2 if m == n == 4096 else strip * 2
            rows.append(_row("strip", m, n, 1024, "f32", "lin", strip, strip_peak))
            rows.append(_row("fft", m, n, 1024, "f32", "lin", fft, 0.1))
    return pd.DataFrame(rows)


def _verdicts(results) -> dict:
    out = {}
    for claim in CLAIMS:
        measured = claim.ours(results)
        out[claim.id] = None if measured is None else claim.holds(measured.value)
    return out


def test_recipes_plan_on_their_backends_under_every_profile():
    for recipe in RECIPES:
        for sweep in recipe.sweeps:
            assert sweep.suite == "sumrv"
            for profile, backend in ((p, backend_of(p, gpu)) for p in PROFILES for gpu in (False, True)):
                specs = sweep.specs(profile, backend)
                if specs is not None:
                    plan = harness.plan(SUITE, specs, backend, list(sweep.variants) or None)
                    assert plan.points, (recipe.name, profile, specs)
        assert recipe.figures == () or all(stem.startswith("sumrv-") for stem in recipe.figures)
    assert {claim.recipe for claim in CLAIMS} <= {recipe.name for recipe in RECIPES}
    assert any(sweep.cpu for recipe in RECIPES for sweep in recipe.sweeps)  # `make figures` draws sumrv


def test_the_suite_declares_its_recipes_claims_paper_and_kernel_build():
    assert SUITE.recipes == RECIPES and SUITE.claims == CLAIMS
    assert "Lawrence Murray" in SUITE.paper and "/" not in SUITE.paper
    (source, options), = SUITE.kernel_builds()
    assert source.name == "sumrv.cu" and "__global__" in source.read_text()
    assert "-std=c++17" in options


def test_claims_hold_where_strip_wins_and_the_post_s_kernel_is_slow(tmp_path):
    verdicts = _verdicts(Frame(_frame(), tmp_path))
    assert verdicts == {"skewdiag-speed": False, "atomic-free": True, "kernel-correct": True, "log-cost": True,
                        "auto-fastest": None, "strip-fastest": True, "log-beats-peers": True, "fft-accuracy": True,
                        "fft-crossover": True, "fma-peak": True, "call-cost": None}  # call-cost needs a `bench profile`


def _with_auto(df: pd.DataFrame, lag: float, at_log_1024: float) -> pd.DataFrame:
    """auto beside every GPU point: lag x the fastest other variant, at_log_1024 x in log
    space at m = n = 1024."""
    gpu = df[df["device"] == "gpu"]
    keys = ["space", "precision", "batch", "m", "n"]
    fastest = gpu.groupby(keys)["call_s"].min().reset_index()
    factor = [at_log_1024 if (space == "log" and m == 1024) else lag
              for space, m in zip(fastest["space"], fastest["m"])]
    auto = fastest.assign(call_s=fastest["call_s"] * factor, variant="auto", device="gpu", repeat=0, run_id=RUN)
    return pd.concat([df, auto], ignore_index=True)


def test_auto_is_judged_against_the_fastest_variant_at_every_point(tmp_path):
    measured = CLAIM["auto-fastest"].ours(Frame(_with_auto(_frame(), 1.02, 1.02), tmp_path))
    assert CLAIM["auto-fastest"].holds(measured.value) and measured.value == pytest.approx(1.02)
    assert _verdicts(Frame(_with_auto(_frame(), 1.0, 1.0), tmp_path))["strip-fastest"]  # auto is not strip's rival
    measured = CLAIM["auto-fastest"].ours(Frame(_with_auto(_frame(), 1.0, 1.3), tmp_path))
    assert not CLAIM["auto-fastest"].holds(measured.value) and measured.value == pytest.approx(1.3)
    assert "beyond 1.05x at 4:" in measured.text and "m = 1024, n = 1024" in measured.text  # 2 precisions, 2 batches


def test_auto_fastest_says_which_method_auto_ran(tmp_path):
    """The method auto chose at each point (its auto_choice column), counted; results from before
    the column say nothing of it."""
    df = _with_auto(_frame(), 1.0, 1.0)
    gpu = df[(df["device"] == "gpu") & (df["variant"] != "auto")]
    keys = figures.AUTO_KEYS
    fastest = gpu.loc[gpu.groupby(keys)["call_s"].idxmin()].set_index(keys)["variant"]
    auto = df["variant"] == "auto"
    df.loc[auto, "auto_choice"] = [fastest[tuple(row)] for row in df.loc[auto, keys].itertuples(index=False)]
    df.loc[auto.idxmax(), "auto_choice"] = "skewdiag-det"  # one point where auto ran another
    text = CLAIM["auto-fastest"].ours(Frame(df, tmp_path)).text
    ran = dict(re.findall(r"([a-z-]+) at (\d+)", text.split("; auto ran ")[1].split(" of ")[0]))
    assert sum(map(int, ran.values())) == len(fastest) and ran["skewdiag-det"] == "1"
    assert text.endswith(f"of the {len(fastest)} points where its choice was recorded")
    assert "auto ran" not in CLAIM["auto-fastest"].ours(Frame(_with_auto(_frame(), 1.0, 1.0), tmp_path)).text

    # The same points as a table beside the figures: what to call at each shape.
    meta = {"schema": results.schema_for(SUITE), "runs": {}}

    def as_results(frame):  # what the caption reads of a results frame
        return frame.assign(backend="gpu", group=frame.groupby(keys).ngroup(), timestamp="2026-11-01T00:00:00+00:00",
                            code_version="c0de")
    [table] = figures.auto_choice_table(as_results(df), meta, tmp_path)
    points = figures.auto_points(df)
    assert len(points) == len(fastest) and (points["auto over rival"] == 1.0).all()
    assert points["auto ran"].value_counts()["skewdiag-det"] == 1 and "| skewdiag-det " in table.read_text()
    assert figures.auto_choice_table(as_results(_with_auto(_frame(), 1.0, 1.0)), meta, tmp_path) == []


def test_auto_is_judged_in_the_newest_run_that_measured_it(tmp_path):
    """A later run where the whole machine was 1.5x slower: auto within 1.02x of strip in
    it, 1.53x of the earlier run's strip, which pooling the runs would compare it with."""
    def row(variant, us, run_id=RUN):
        return _row(variant, 256, 256, 1024, "f32", "lin", us, run_id=run_id)
    late = "20261102T000000Z-bbbbbb"
    early = [row("strip", 10), row("auto", 10.1)]
    measured = CLAIM["auto-fastest"].ours(Frame(pd.DataFrame(early + [row("auto", 15.3, late), row("strip", 15, late)]),
                                          tmp_path))
    assert measured.value == pytest.approx(1.02) and CLAIM["auto-fastest"].holds(measured.value)
    # No run measured auto beside both strip and naive: the newest, its absent rival named
    measured = CLAIM["auto-fastest"].ours(Frame(pd.DataFrame(early + [row("auto", 15.3, late), row("naive", 30, late)]),
                                          tmp_path))
    assert measured.value == pytest.approx(15.3 / 30) and "(absent: strip)" in measured.text
    # A newer run that measured fewer rivals is passed over for the one that measured them all
    complete = [row("strip", 10), row("naive", 20), row("auto", 10.1)]
    measured = CLAIM["auto-fastest"].ours(Frame(pd.DataFrame(complete + [row("auto", 15.3, late), row("naive", 30, late)]),
                                          tmp_path))
    assert measured.value == pytest.approx(1.01) and "absent" not in measured.text


def test_the_tables_claims_compare_variants_within_one_run(tmp_path):
    # a later run measured fftconv alone at one point, faster than strip was in the earlier run
    # (which measured every variant there): strip is still fastest in the run that compared them
    df = _frame()
    late = pd.DataFrame([{**_row("fft", 256, 256, 4096, "f32", "lin", 1.0, run_id="20261102T000000Z-bbbbbb"),
                          "repeat": repeat} for repeat in range(2)])  # pooled, its median would be below strip's
    assert _verdicts(Frame(pd.concat([df, late]), tmp_path))["strip-fastest"] is True
    # and where no run measured every variant, each variant's newest run stands for it
    lone = df[(df["variant"] != "fft") | (df["m"] != 256) | (df["batch"] != 4096)].assign(
        run_id=lambda d: d["run_id"].where(d["variant"] != "strip", "20261102T000000Z-cccccc"))
    assert _verdicts(Frame(pd.concat([lone, late]), tmp_path))["strip-fastest"] is False


def test_auto_is_judged_repeat_by_repeat_and_in_log_space_against_componentwise_rivals(tmp_path):
    def row(variant, us, repeat, space="lin"):
        return {**_row(variant, 256, 256, 1024, "f32", space, us), "repeat": repeat}
    # The host slowed in repeat 1 (both variants) and for auto alone in repeat 2: the medians
    # of each variant compare auto's slow repeats with strip's fast ones (1.53x), the repeats
    # themselves say 1.02x twice
    rows = [row("strip", 10, 0), row("auto", 10.2, 0), row("strip", 15, 1), row("auto", 15.3, 1),
            row("strip", 10, 2), row("auto", 15.3, 2)]
    measured = CLAIM["auto-fastest"].ours(Frame(pd.DataFrame(rows), tmp_path))
    assert measured.value == pytest.approx(1.02)
    # In log space the FFT (a peer's, through a shift) is no rival: its error is normwise
    log = [row("strip", 10, 0, "log"), row("fft", 4, 0, "log"), row("auto", 10.1, 0, "log")]
    measured = CLAIM["auto-fastest"].ours(Frame(pd.DataFrame(log), tmp_path))
    assert measured.value == pytest.approx(1.01) and CLAIM["auto-fastest"].holds(measured.value)
    assert "variants faster than auto" in measured.text and "fft 2.52x" in measured.text
    lin = [{**r, "space": "lin"} for r in log]
    assert CLAIM["auto-fastest"].ours(Frame(pd.DataFrame(lin), tmp_path)).value == pytest.approx(10.1 / 4)
    # A resumed run without strip at repeats 1 and 2: those repeats do not compare auto with naive
    uneven = [row("strip", 10, 0), row("naive", 20, 0), row("auto", 10.5, 0)] + [
        row(variant, us, repeat) for repeat in (1, 2) for variant, us in (("naive", 20), ("auto", 10))]
    measured = CLAIM["auto-fastest"].ours(Frame(pd.DataFrame(uneven), tmp_path))
    assert measured.value == pytest.approx(1.05) and "against strip" in measured.text
    # Where auto met no rival (log space, the FFT alone), the point is named, not judged
    alone = [row("fft", 4, 0, "log"), row("auto", 10, 0, "log")] + lin
    measured = CLAIM["auto-fastest"].ours(Frame(pd.DataFrame(alone), tmp_path))
    assert measured.value == pytest.approx(10.1 / 4) and "in no repeat beside a rival at f32 log" in measured.text


def test_claims_differ_where_fft_wins_and_strip_is_below_half_the_peak(tmp_path):
    results = Frame(_frame(fft_faster_at_1024=True, strip_peak=0.3), tmp_path)
    verdicts = _verdicts(results)
    assert verdicts["strip-fastest"] is False and verdicts["fma-peak"] is False
    measured = CLAIM["strip-fastest"].ours(results)
    assert measured.value == (22, 24) and "fft" in measured.text  # f32 and f64 at batch 4096, m = n = 1024
    assert CLAIM["fma-peak"].ours(results).value == pytest.approx(0.3)


def test_the_crossover_names_where_our_fft_path_beats_strip(tmp_path):
    df = _frame()
    rows = [_row("fftconv", m, n, 1024, "f32", "lin", 2 * m * n / 1e4 if m * n < 4096 * 1024 else m * n / 2e4)
            for m in (256, 1024, 4096) for n in (256, 1024, 4096)]
    measured = CLAIM["fft-crossover"].ours(Frame(pd.concat([df, pd.DataFrame(rows)]), tmp_path))
    assert measured.value == [(4096, 4096)] and CLAIM["fft-crossover"].holds(measured.value)
    assert "our fftconv faster than strip at 3: 1024 x 4096 (2.00x), 4096 x 1024 (2.00x), 4096 x 4096 (2.00x)" \
        in measured.text
    assert "our fftconv" not in CLAIM["fft-crossover"].ours(Frame(df, tmp_path)).text


def test_the_fma_peak_is_judged_where_the_work_outweighs_a_call_s_fixed_cost(tmp_path):
    """A call at batch 1 takes 10 us here: at m = n = 256, batch 4096 the multiply-adds take 8.9
    us at the 60 TFLOP/s peak, so that point's fraction is shown but not judged; at 1024 they
    take 143 us."""
    df = _frame(strip_peak=0.6)
    host_bound = (df["variant"] == "strip") & (df["m"] == 256) & (df["batch"] == 4096) & (df["space"] == "lin")
    df.loc[host_bound, "peak_frac"] = 0.1
    measured = CLAIM["fma-peak"].ours(Frame(df, tmp_path))
    assert measured.value == pytest.approx(0.6) and CLAIM["fma-peak"].holds(measured.value)
    assert "fixed cost (strip at batch 1, m = n <= 1024): 10 µs" in measured.text
    assert "left out (work at the peak under the fixed cost), m = n = 256: 0.100 (batch 4096)" in measured.text
    df.loc[(df["variant"] == "strip") & (df["m"] == 1024) & (df["batch"] == 4096), "peak_frac"] = 0.4
    assert CLAIM["fma-peak"].ours(Frame(df, tmp_path)).value == pytest.approx(0.4)
    # The grid alone (batch 1024, no call at batch 1): every point judged
    measured = CLAIM["fma-peak"].ours(Frame(df[df["batch"] == 1024], tmp_path))
    assert measured.value == pytest.approx(0.6) and measured.text.startswith("no call at batch 1 measured")


def test_every_claim_is_not_measured_on_empty_results(tmp_path):
    results = Results(tmp_path, {"sumrv": SUITE})
    assert all(claim.ours(results) is None for claim in CLAIMS)


def test_every_claim_computes_on_the_committed_h200_results():
    directory = ROOT / "results" / "nvidia-h200"
    if not (directory / "sumrv.csv").exists():
        pytest.skip("no committed H200 results of sumrv")
    results = Results(directory, {"sumrv": SUITE})
    for claim in CLAIMS:
        measured = claim.ours(results)
        if claim.id == "auto-fastest" and measured is None:  # auto came after these results
            continue
        assert measured is not None and measured.text, claim.id
        claim.holds(measured.value)


def test_auto_points_name_the_rival_with_the_lowest_median():
    """strip wins three of five repeats by a hair and loses two by far; naive's median is lower:
    the table names naive beside its own median, not the repeats' most frequent winner."""
    times = {"strip": [1, 2, 3, 100, 100], "naive": [2, 3, 4, 1, 1], "auto": [2, 3, 4, 2, 2]}
    df = pd.DataFrame([dict(_row(variant, 64, 64, 1, "f32", "lin", us), repeat=repeat)
                       for variant, series in times.items() for repeat, us in enumerate(series)])
    [point] = figures.auto_points(df).to_dict("records")
    assert point["fastest rival"] == "naive" and point["its us"] == pytest.approx(2.0)
