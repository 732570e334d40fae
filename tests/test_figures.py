"""Figure plumbing (bench.figures) and the lda figures (impls.lda.figures) on synthetic results."""

from types import SimpleNamespace

import pandas as pd
import pytest

from bench.figures import caption, render_all
from bench.results import append_rows, read_results, update_sidecar
from impls.lda import figures as lda_figures

LDA = SimpleNamespace(name="lda", render_figures=lda_figures.render_figures)
ENV = {
    "cpu_model": "AMD EPYC", "cpu_count": 16, "gpu_name": "NVIDIA H100 80GB HBM3",
    "cuda_runtime": "12.8", "driver_version": "580.65",
    "versions": {"numpy": "2.4.6", "numba": "0.68.1", "cupy": "14.2.0"},
}
FIGURE_STEMS = ["fig7a-time-vs-k-f32", "fig7b-time-vs-k-f64", "fig8a-zoom-480-544-f32", "fig8b-zoom-480-544-f64",
                "speedup-over-alg1"]


def sweep_rows(precisions=("f32", "f64"), dataset="wiki", run_id="r1", update="mfm"):
    """A coarse K sweep of three variants and a dense 480..544 sweep of two, 2 repeats each."""
    points = [(K, v) for K in range(32, 1025, 32) for v in ("alg1", "alg4", "alg7")]
    points += [(K, v) for K in range(480, 545) if K % 32 for v in ("alg4", "alg7")]
    rows = []
    for precision in precisions:
        for K, variant in points:
            for repeat in range(2):
                seconds = K * {"alg1": 0.01, "alg4": 0.004, "alg7": 0.0035}[variant] * (1 + (K % 32) / 64)
                rows.append({
                    "suite": "lda", "variant": variant, "backend": "gpu", "precision": precision,
                    "dataset": dataset, "update": update, "K": K, "iterations": 100, "repeat": repeat,
                    "seconds": seconds * (1 + repeat / 50), "group": f"{dataset}-{update}-{precision}-{K}",
                    "run_id": run_id,
                    "code_version": "abc123", "timestamp": "2026-01-02T03:04:05+00:00", "machine": "nvidia-h100",
                })
    return rows


@pytest.fixture
def results_root(tmp_path):
    root = tmp_path / "results"
    append_rows(root / "nvidia-h100" / "lda.csv", sweep_rows())
    update_sidecar(root / "nvidia-h100" / "lda.json", "r1", ENV)
    append_rows(root / "nvidia-h100" / "other.csv", [{"suite": "other", "variant": "a", "seconds": 1.0}])
    (root / "empty-machine").mkdir()
    return root


def test_render_all_writes_fig7_and_fig8(results_root, tmp_path):
    written = render_all(results_root, tmp_path / "figures", [LDA])
    outdir = tmp_path / "figures" / "nvidia-h100"
    expected = {outdir / f"{stem}.{ext}" for stem in FIGURE_STEMS for ext in ("png", "pdf")}
    assert set(written) == expected
    for path in expected:
        assert path.stat().st_size > 1000
    assert all(path.read_bytes().startswith(b"\x89PNG") for path in expected if path.suffix == ".png")


def test_only_figures_with_data_are_drawn(tmp_path):
    rows = [r for r in sweep_rows(precisions=("f32",)) if r["K"] < 480 or r["K"] > 544 or r["variant"] == "alg1"]
    written = lda_figures.render_figures(pd.DataFrame(rows), {"runs": {"r1": ENV}}, tmp_path)
    assert sorted(p.name for p in written) == sorted(
        ["fig7a-time-vs-k-f32.png", "fig7a-time-vs-k-f32.pdf", "speedup-over-alg1.png", "speedup-over-alg1.pdf"]
    )  # no f64 rows, and no alg4/alg7 rows in the zoom range


def test_differing_settings_get_separate_figures(tmp_path):
    df = pd.DataFrame(sweep_rows(precisions=("f32",)) + sweep_rows(precisions=("f32",), dataset="nytimes"))
    written = lda_figures.render_figures(df, {"runs": {"r1": ENV}}, tmp_path)
    assert sorted(p.name for p in written if p.suffix == ".png") == [
        "fig7a-time-vs-k-f32-dataset-nytimes.png", "fig7a-time-vs-k-f32-dataset-wiki.png",
        "fig8a-zoom-480-544-f32-dataset-nytimes.png", "fig8a-zoom-480-544-f32-dataset-wiki.png",
        "speedup-over-alg1-dataset-nytimes.png", "speedup-over-alg1-dataset-wiki.png",
    ]


def test_figure6_needs_both_application_variants(tmp_path):
    rows = sweep_rows(precisions=("f32", "f64")) + sweep_rows(precisions=("f32", "f64"), update="dirichlet")
    rows += [dict(r, K=r["K"] - 16) for r in rows if r["K"] <= 256 and r["variant"] in ("alg1", "alg7")]
    written = lda_figures.render_figures(pd.DataFrame(rows), {"runs": {"r1": ENV}}, tmp_path)
    names = {p.name for p in written if p.suffix == ".png"}
    assert "fig6-butterfly-application-variants.png" in names
    # Figures 7 and 8 and the speed-up show the mean-for-mode application alone.
    assert not any("dirichlet" in name for name in names)


def test_caption_names_machine_software_and_constant_settings(results_root):
    df = read_results(results_root / "nvidia-h100" / "lda.csv")
    meta = {"runs": {"r1": ENV}, "machine": "nvidia-h100"}
    text = caption(meta, df[df["precision"] == "f32"])
    assert "NVIDIA H100 80GB HBM3" in text and "CUDA 12.8" in text and "driver 580.65" in text
    assert "numpy 2.4.6" in text and "cupy 14.2.0" in text and "backend gpu" in text
    assert "dataset=wiki" in text and "iterations=100" in text and "precision=f32" in text and "update=mfm" in text
    assert "K=" not in text  # varies, so not a setting
    assert "2 repeats per point" in text and "2026-01-02" in text and "abc123" in text
