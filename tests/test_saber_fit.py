"""The held-out evaluator and the `saber-fit` suite on the CPU (tomotopy where installed)."""

import functools
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from bench.corpus import Corpus, cached_corpus
from bench.corpus.entries import entry
from bench.corpus.synth import generate, targets
from impls.saber import heldout


@pytest.fixture(scope="module")
def nytimes():
    corpus = cached_corpus("nytimes-synth", 0.01)
    return corpus, heldout.split(corpus)


def _stub(documents: int, length: int = 2, vocabulary: int = 50) -> Corpus:
    doc_ptr = np.arange(documents + 1, dtype=np.int64) * length
    words = np.random.default_rng(1).integers(0, vocabulary, doc_ptr[-1]).astype(np.int32)
    return Corpus("stub", doc_ptr, words, vocabulary)


@pytest.mark.parametrize("documents, held", [(500, 50), (20_000, heldout.HELDOUT_DOCUMENTS)])
def test_at_most_a_thousand_documents_and_a_tenth_of_the_corpus_are_held_out(documents, held):
    split = heldout.split(_stub(documents))
    assert split.observed.num_docs == held
    assert split.train.num_docs + split.observed.num_docs == documents


def test_a_corpus_too_small_to_hold_a_document_out_is_refused():
    from bench.errors import BenchError

    with pytest.raises(BenchError, match="3 documents leave none to hold out"):
        heldout.split(_stub(3))


def _reference_log_likelihood(held, phi: np.ndarray, alpha: float, iterations: int) -> float:
    """The evaluator written out in numpy, a document at a time."""
    total = 0.0
    observed, evaluated = held.observed, held.evaluated
    for h in range(observed.num_docs):
        rows = phi[observed.words[observed.doc_ptr[h]:observed.doc_ptr[h + 1]]]
        theta = np.full(phi.shape[1], 1.0 / phi.shape[1])
        for _ in range(iterations):
            weights = rows * theta
            expected = alpha + (weights / weights.sum(axis=1, keepdims=True)).sum(axis=0)
            theta = expected / expected.sum()
        total += np.log(phi[evaluated.words[evaluated.doc_ptr[h]:evaluated.doc_ptr[h + 1]]] @ theta).sum()
    return total / evaluated.num_tokens


def test_the_evaluator_is_its_numpy_reference():
    corpus = cached_corpus("tiny", 1.0)
    held = heldout.split(corpus)
    b = np.random.default_rng(3).integers(0, 20, size=(corpus.vocab_size, 7))
    phi = heldout.phi_of(b, 0.01)
    assert np.allclose(phi.sum(axis=0), 1.0)
    assert heldout.log_likelihood(held, phi, 0.3, 20) == pytest.approx(_reference_log_likelihood(held, phi, 0.3, 20),
                                                                       rel=1e-12)


@pytest.mark.parametrize("topics", [1, 7, 300])
def test_the_evaluators_whole_array_form_is_its_loop(nytimes, topics, monkeypatch):
    """fold_in, the form the GPU runs (there with CuPy), here with numpy and scipy.sparse: the
    numba loop's value on a corpus of real shape, its pairs gathered in many blocks."""
    import scipy.sparse

    monkeypatch.setattr(heldout, "PAIR_BLOCK_BYTES", 1 << 18)
    corpus, held = nytimes
    evaluation, rows = heldout.compact(held)
    phi = heldout.phi_of(np.random.default_rng(topics).integers(0, 20, size=(corpus.vocab_size, topics)), 0.01, rows)
    loop = heldout.log_likelihood(evaluation, phi, 0.3, 10)
    assert heldout.fold_in(np, scipy.sparse, evaluation, phi, 0.3, 10) == pytest.approx(loop, rel=1e-12)


def test_the_evaluators_whole_array_form_takes_empty_halves():
    """Documents of one token (one half of each empty) and of none, as the loop takes them."""
    import scipy.sparse

    phi = heldout.phi_of(np.random.default_rng(6).integers(0, 9, size=(50, 3)), 0.01)
    for held in (heldout.split(_stub(500, length=1)), heldout.split(_stub(500, length=3))):
        assert heldout.fold_in(np, scipy.sparse, held, phi, 0.5) == pytest.approx(
            heldout.log_likelihood(held, phi, 0.5), rel=1e-12)
    assert np.isnan(heldout.fold_in(np, scipy.sparse, heldout.split(_stub(30, length=0)), phi, 0.5))


def test_the_evaluator_on_the_held_out_words_alone_scores_what_it_scores_on_all(nytimes):
    """heldout.compact: phi's rows of the words the held-out documents use, from B, and the
    generating model's, give the full evaluation's values."""
    corpus, held = nytimes
    evaluation, rows = heldout.compact(held)
    assert np.all(np.diff(rows) > 0) and evaluation.train is held.train
    b = np.random.default_rng(4).integers(0, 20, size=(corpus.vocab_size, 9))
    full, picked = heldout.phi_of(b, 0.01), heldout.phi_of(b, 0.01, rows)
    np.testing.assert_array_equal(picked, full[rows])
    assert heldout.log_likelihood(evaluation, picked, 0.3) == pytest.approx(heldout.log_likelihood(held, full, 0.3),
                                                                           rel=1e-12)
    assert heldout.ceiling(evaluation) == pytest.approx(heldout.ceiling(held), rel=1e-12)


def test_one_topic_scores_the_mean_log_probability_of_the_evaluated_words():
    """With K = 1, theta is 1 whatever the fold-in: the score is the mean of log phi_w."""
    held = heldout.split(_stub(500, length=1))  # one token a document: every observed or evaluated half is empty
    phi = heldout.phi_of(np.random.default_rng(5).integers(0, 9, size=(50, 1)), 0.01)
    assert heldout.log_likelihood(held, phi, 0.5) == pytest.approx(np.log(phi[held.evaluated.words, 0]).mean(),
                                                                   rel=1e-12)
    assert np.isnan(heldout.log_likelihood(heldout.split(_stub(30, length=0)), phi, 0.5))  # nothing to evaluate


def test_the_generating_phi_comes_near_the_ceiling_and_above_the_unigram(nytimes):
    """The ceiling (generating theta and phi) bounds what the evaluator can give: the
    generating phi, with theta folded in from half of each document (under the generating
    alpha), comes within 2.5% (kos's structure: sparse, distinct topics, which half of a
    document of 330 tokens does not pin down exactly); the word frequencies alone (what a
    random start gives) score below it."""
    corpus, held = nytimes
    ceiling = heldout.ceiling(held)
    true_phi = heldout.log_likelihood(held, corpus.true_phi, targets(entry("nytimes-synth"), 0.01).alpha)
    unigram = np.bincount(held.train.words, minlength=corpus.vocab_size)[:, None]
    frequencies = heldout.log_likelihood(held, heldout.phi_of(unigram, 0.01), 0.5)
    assert ceiling > true_phi > frequencies
    assert true_phi == pytest.approx(ceiling, rel=0.025)


def test_target_and_time_to_target():
    from impls.saber.figures import target_of, time_to_target

    series = pd.DataFrame({"variant": list("aaabbbccc"), "iteration": [0, 5, 10] * 3,
                           "wall_s": [0.0, 1.0, 2.0, 0.0, 4.0, 8.0, 0.0, 3.0, 6.0],
                           "loglik": [-10, -8, -6, -12, -9.5, -9.2, -7, -9, -8.6]})
    assert target_of(series, -5.0)[0] == pytest.approx(-10 + 0.9 * 5)  # from the median start, 90% of the way
    assert target_of(series, float("nan"))[0] == pytest.approx(-6.01)  # the best reached less 0.01
    assert target_of(series[series["iteration"] > 0], -5.0)[0] == pytest.approx(-6.01)  # no start recorded
    seconds = time_to_target(series, -8.5)
    assert seconds["a"] == 1.0 and np.isnan(seconds["b"])
    assert np.isnan(seconds["c"])  # its start was above the target, its training never is


@pytest.mark.real_corpus("kos")
def test_a_cpu_convergence_sweep_improves_and_draws_figure_11(tmp_path):
    from bench import harness
    from bench.figures import render_all
    from bench.results import read_csv
    from impls.saber.fit_suite import SUITE

    settings = harness.Settings(repeats=1, warmup=0, out_dir=tmp_path / "results" / "cpu-test")
    plan = harness.plan(SUITE, {"dataset": "kos", "K": "20", "iterations": "10", "eval_every": "5"}, "cpu")
    assert harness.sweep(plan, settings) == 0
    rows = read_csv(settings.out_dir / "saber-fit.csv")
    series = read_csv(settings.out_dir / "saber-fit-series.csv").dropna(subset=["loglik"])
    assert set(rows["variant"]) == {"esca-cpu", "delayed-gibbs-cpu", "tomotopy"}  # tomotopy is a test dependency
    for variant, curve in series.groupby("variant"):
        assert list(curve["iteration"]) == [0, 5, 10], variant
        assert curve["loglik"].iloc[-1] > curve["loglik"].iloc[0] + 0.05, variant  # kos has topics to learn
        assert curve["wall_s"].is_monotonic_increasing
    assert rows["ceiling"].isna().all()  # a real corpus: no generating model
    names = {path.name for path in render_all(tmp_path / "results", tmp_path / "figures", [SUITE])}
    assert {"fig11-loglik-vs-time-dataset-kos-K-20.png", "saber-fit-table.md"} <= names
    table = (tmp_path / "figures" / "cpu-test" / "saber-fit-table.md").read_text()
    assert "esca-cpu" in table and "seconds to target" in table
    (settings.out_dir / "saber-fit-series.csv").unlink()  # no curves: no Figure 11, and no error
    names = {path.name for path in render_all(tmp_path / "results", tmp_path / "figures2", [SUITE])}
    assert not any(name.startswith("fig11") for name in names)


def test_a_system_on_several_gpus_is_a_system_of_its_own():
    from impls.saber.figures import _systems

    frame = pd.DataFrame({"variant": ["G4", "G4", "tomotopy"], "gpus": [1, 2, 1]})
    assert list(_systems(frame)["variant"]) == ["G4", "G4 (2 GPUs)", "tomotopy"]
    assert list(_systems(frame.drop(columns="gpus"))["variant"]) == ["G4", "G4", "tomotopy"]  # older results


def test_the_corpus_beyond_one_gpu_draws_figure_12(tmp_path):
    from bench import harness
    from bench.figures import render_all
    from impls.saber.fit_suite import SUITE

    settings = harness.Settings(repeats=1, warmup=0, out_dir=tmp_path / "results" / "cpu-test")
    plan = harness.plan(SUITE, {"dataset": "clueweb-synth", "scale": "0.00002", "K": "5", "iterations": "2",
                                "eval_every": "1"}, "cpu", variant_names=["esca-cpu"])
    assert harness.sweep(plan, settings) == 0
    names = {path.name for path in render_all(tmp_path / "results", tmp_path / "figures", [SUITE])}
    assert "fig12-loglik-vs-time-dataset-clueweb-synth-K-5.png" in names
    assert "tokens/s" in (tmp_path / "figures" / "cpu-test" / "saber-fit-table.md").read_text()


@pytest.mark.real_corpus("kos")
def test_a_calibrated_corpus_has_topics_to_find_as_its_real_corpus_has(tmp_path):
    """kos-synth (kos's size, the generator's parameters calibrated against kos): trained
    alike from a random start, a model gains on held-out documents at least half of what it
    gains on kos, so a generator change that flattens the topics fails."""
    from bench import harness
    from bench.results import read_csv
    from impls.saber.fit_suite import SUITE

    settings = harness.Settings(repeats=1, warmup=0, out_dir=tmp_path)
    given = {"dataset": "kos,kos-synth", "scale": "1", "K": "100", "iterations": "20", "eval_every": "20"}
    assert harness.sweep(harness.plan(SUITE, given, "cpu", ["delayed-gibbs-cpu"]), settings) == 0
    rows = read_csv(tmp_path / "saber-fit.csv").set_index("dataset")
    real, synthetic = rows.loc["kos"], rows.loc["kos-synth"]
    assert real["heldout_gap"] > 0.1  # kos has topics to learn
    assert synthetic["heldout_gap"] >= 0.5 * real["heldout_gap"]
    assert synthetic["topic_js"] >= 0.5 * real["topic_js"]
    assert synthetic["mean_length"] == pytest.approx(real["mean_length"], rel=1e-3)


@functools.cache  # kos-synth's, the reference of every large corpus, once
def _recoverable_gain(name: str, documents: int) -> float:
    """What a model that recovers the generating topics gains over the word frequencies (what a
    random start approaches; those the generator draws from, so that a small cut of a large
    vocabulary does not count its unseen words) on the held-out documents of `documents`
    documents of a calibrated corpus at its full vocabulary: the evaluator on both, no training."""
    t = targets(entry(name))
    t = replace(t, documents=documents, tokens=round(documents * t.tokens / t.documents))
    corpus = generate(name, t, seed=0)
    held = heldout.split(corpus)
    evaluation, rows = heldout.compact(held)
    frequencies = corpus.true_phi @ np.average(corpus.true_theta, axis=0, weights=corpus.lengths)
    return heldout.generating_phi(evaluation) - heldout.log_likelihood(evaluation, frequencies[rows, None], 0.5)


@pytest.mark.parametrize("name", ["nytimes-synth", "pubmed-synth", "clueweb-synth"])
def test_a_large_calibrated_corpus_has_as_much_to_find_as_the_corpus_it_imitates(name):
    """A corpus that imitates kos at its own size (its own alpha against its larger vocabulary)
    offers a model within 25% of what kos-synth offers, so a generator or catalogue change that
    flattens its topics, or sharpens them past kos's, fails on the CPU."""
    imitated = _recoverable_gain(entry(name)["imitates"] + "-synth", targets(entry("kos-synth")).documents)
    assert _recoverable_gain(name, 10_000) == pytest.approx(imitated, rel=0.25)
