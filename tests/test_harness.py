"""The sweep harness: rows, resume, --fresh, interruption, via the lda suite on `tiny`."""

import pandas as pd
import pytest

from bench import harness
from bench.errors import BenchError
from bench.suite import get_suite

SUITE = get_suite("lda")


def _points(k="4,8,12", **options):
    return SUITE.points({"k": k, "dataset": "tiny", "scale": 1.0, "iterations": 1, "precision": "f32",
                         **options}, "cpu")


def _settings(tmp_path, **kw):
    return harness.SweepSettings(variants=["alg1", "alg7"], repeats=2, warmup=1, backend="cpu",
                                 out_dir=tmp_path, **kw)


def test_sweep_writes_one_row_per_variant_and_repeat(tmp_path):
    assert harness.sweep(SUITE, _points(), _settings(tmp_path)) == 0
    df = pd.read_csv(tmp_path / "lda.csv")
    assert len(df) == 3 * 2 * 2
    assert set(df["variant"]) == {"alg1", "alg7"}
    assert {"seconds", "rng_s", "draw_z_s", "counts_s", "update_s", "tokens_per_s", "run_id", "group",
            "code_version", "machine"} <= set(df.columns)
    assert (df["seconds"] > 0).all()
    # phases are parts of the whole run
    phases = df[["rng_s", "draw_z_s", "counts_s", "update_s"]].sum(axis=1)
    assert (phases <= df["seconds"] * 1.001).all()
    # the variants of a point were measured interleaved, in one group
    assert df.groupby("K")["group"].nunique().eq(1).all()
    assert (tmp_path / "lda.json").exists()


def test_rerun_resumes_and_fresh_remeasures(tmp_path):
    harness.sweep(SUITE, _points("4,8"), _settings(tmp_path))
    harness.sweep(SUITE, _points("4,8,12"), _settings(tmp_path))  # only K=12 is new
    df = pd.read_csv(tmp_path / "lda.csv")
    assert sorted(df.groupby("K").size().to_dict().items()) == [(4, 4), (8, 4), (12, 4)]
    harness.sweep(SUITE, _points("4"), _settings(tmp_path, fresh=True))
    assert len(pd.read_csv(tmp_path / "lda.csv").query("K == 4")) == 8


def test_interrupted_sweep_keeps_finished_points_and_resumes(tmp_path, monkeypatch):
    calls = {"n": 0}
    real = harness.measure_point

    def interrupt_on_third_point(suite, point, settings):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        yield from real(suite, point, settings)

    monkeypatch.setattr(harness, "measure_point", interrupt_on_third_point)
    assert harness.sweep(SUITE, _points("4,8,12,16"), _settings(tmp_path)) == 130
    assert sorted(pd.read_csv(tmp_path / "lda.csv")["K"].unique()) == [4, 8]
    monkeypatch.setattr(harness, "measure_point", real)
    assert harness.sweep(SUITE, _points("4,8,12,16"), _settings(tmp_path)) == 0
    df = pd.read_csv(tmp_path / "lda.csv")
    assert df.groupby("K").size().to_dict() == {4: 4, 8: 4, 12: 4, 16: 4}


@pytest.mark.parametrize("options, message", [
    ({"dataset": "nope"}, "unknown dataset 'nope'"),
    ({"W": 12}, "--warp must be one of"),
    ({"precision": "f16"}, "unknown precision 'f16'"),
    ({"update": "vb"}, "unknown update 'vb'"),
    ({"iterations": 0}, "--iterations must be >= 1"),
    ({"k": "4..x"}, "bad K spec"),
])
def test_bad_options_are_usage_errors(options, message):
    with pytest.raises(BenchError, match=message):
        SUITE.points({"dataset": "tiny", **options}, "cpu")
