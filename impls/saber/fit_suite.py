"""The `saber-fit` suite: LDA trained to a held-out quality, every system against one
evaluator (impls/saber/heldout.py), its curve of held-out log-likelihood per token against
training time (the paper's Figures 11 and 12).

Every system trains on the same documents (the corpus less the held-out ones) with
alpha = 50/K and beta = 0.01, for `iterations` sweeps (G4, G0, delayed-gibbs and the CPU
systems from one seeded start, the peers from their own); every `eval_every` sweeps (and at 0 and the last)
its counts B are handed to the evaluator, untimed. Systems: SaberLDA's G4 and G0 on the GPU
(the suite `saber`'s code: resident or streamed, on one GPU or several), ESCA on the CPU
(the twin of G3, its E-step on every core), delayed Gibbs (G4 with each token's own topic
left out of its draw) on the GPU and as its CPU twin, and two peers: the lda
suite's dense GPU sampler and tomotopy (collapsed Gibbs, every core). On a synthetic corpus
every row also carries the ceiling (the evaluated tokens' mean log-likelihood under the
generating theta and phi) and what the evaluator gives the generating phi (theta folded in
from the observed half with alpha = 50/K, as for every system): a reference for what
recovering the topics is worth, not a bound.
"""

import os
import warnings
from dataclasses import dataclass, replace

import numpy as np

from bench.corpus import Corpus, HeldOut, cached_corpus, is_synthetic, parse_datasets
from bench.suite import Axis, Defaults, Metric, Suite, Variant
from bench.specs import parse_ints
from bench.timing import RunContext
from impls.lda import model as lda_model
from impls.lda import model_gpu as lda_gpu
from impls.saber import heldout, model, stream
from impls.saber.suite import PAPER, SEED, SaberSuite, Workload, iterate

SABER_AXES = {axis.name: axis for axis in SaberSuite.axes}


def _default_scale(backend: str, given: dict) -> str:
    """A synthetic corpus at a size whose held-out documents say something and whose CPU and peer
    systems train in seconds (CPU: 1M tokens of nytimes-synth) or minutes (GPU: 10M); a real
    corpus at its own size."""
    if all(is_synthetic(d) for d in parse_datasets(given.get("dataset", "nytimes-synth"))):
        return "0.01" if backend == "cpu" else "0.1"
    return "1"


@dataclass
class FitWorkload:
    train: Workload  # the saber suite's workload of the training documents
    held: HeldOut  # the split: the training documents, and the held-out ones as split
    evaluation: HeldOut  # the held-out halves, their words renumbered to `rows` (heldout.compact)
    rows: np.ndarray  # the word ids the held-out documents use
    ceiling: float  # under the generating theta and phi; nan where the corpus has no generating model
    true_phi_loglik: float  # the evaluator on the generating phi (a reference, not a bound)
    eval_every: int
    alpha: float
    text: dict  # the corpus's text statistics (Corpus.text_stats)
    gpu_evaluator: bool  # every system's evaluation on the GPU (_evaluates_on_gpu, _held_out_log_likelihood)
    final_topic_js: float = float("nan")  # the trained topics' separation, at the last evaluation


def _evaluation(work: FitWorkload):
    """observe(iteration, b) for every system: the held-out log-likelihood every
    eval_every iterations, at 0 and at the last, from counts B on the host or a GPU."""

    def observe(iteration: int, b) -> dict:
        if iteration % work.eval_every and iteration != work.train.iterations:
            return {}
        if iteration == work.train.iterations:  # untimed, as every evaluation
            work.final_topic_js = heldout.topic_separation(b, float(model.BETA))
        return {"loglik": _held_out_log_likelihood(work, b)}

    return observe


def _held_out_log_likelihood(work: FitWorkload, b) -> float:
    """On the GPU where the run's is (work.gpu_evaluator), and on every core from the first
    evaluation that the training's memory leaves no room for there."""
    beta = float(model.BETA)
    if work.gpu_evaluator:
        import cupy

        try:
            return heldout.evaluate(work.evaluation, b, beta, work.rows, work.alpha, gpu=True)
        except cupy.cuda.memory.OutOfMemoryError:
            work.gpu_evaluator = False
            warnings.warn("the held-out evaluation ran out of GPU memory beside the training: evaluated on every "
                          "core from here on")
    return heldout.evaluate(work.evaluation, b, beta, work.rows, work.alpha, gpu=False)


class SaberFitSuite(Suite):
    name = "saber-fit"
    description = ("LDA to a held-out quality: SaberLDA (G4, G0) on the GPU, ESCA on the CPU, a dense GPU sampler and "
                   "tomotopy, one evaluator")
    axes = (
        SABER_AXES["dataset"],
        replace(SABER_AXES["scale"], default=_default_scale,
                help="shrink a synthetic corpus (default 0.01 on the CPU: 1M tokens of nytimes-synth; 0.1 on a GPU)"),
        replace(SABER_AXES["K"], default=lambda backend, given: "100" if backend == "cpu" else "1000"),
        replace(SABER_AXES["iterations"], default=lambda backend, given: "20" if backend == "cpu" else "100"),
        Axis("eval_every", "5", lambda s: parse_ints(s, "eval_every"), "iterations between held-out evaluations"),
        SABER_AXES["chunks"],
        SABER_AXES["workers"],
        SABER_AXES["memory"],
        SABER_AXES["gpus"],
    )
    variants = (
        Variant("G4", "SaberLDA G4 (the saber suite's)", devices=("gpu",)),
        Variant("G0", "SaberLDA G0 (the saber suite's): what the stages buy in time to quality", devices=("gpu",)),
        Variant("esca-cpu", "ESCA on the CPU: the twin of G3, its E-step on every core, its rebuild on one",
                devices=("cpu",)),
        Variant("delayed-gibbs", "G4 with each token's own topic left out of A, B and n_k by an exact one-topic "
                "correction: collapsed Gibbs's conditional on the last iteration's counts, ESCA less its one "
                "approximation", devices=("gpu",)),
        Variant("delayed-gibbs-cpu", "the twin of delayed-gibbs (G3's, on every core): the same topics",
                devices=("cpu",)),
        Variant("dense-gpu", "the lda suite's dense (uncollapsed) Gibbs sampler on the GPU, its fastest draw-z "
                "(warpscan, float32), theta and phi drawn from their Dirichlet conditionals: a dense GPU LDA, the role "
                "BIDMach has in the paper", devices=("gpu",), peer=True),
        Variant("tomotopy", "tomotopy's LDAModel, collapsed Gibbs on every core, alpha fixed", devices=("cpu",),
                peer=True, needs=("tomotopy",)),
    )
    reference = "esca-cpu"
    gpu_reference = "G4"
    metrics = (
        Metric("final_loglik", "nats/token", better="higher", gate="tolerance", tolerance=0.01, help="held-out log-likelihood per token at the end"),
        Metric("initial_loglik", "nats/token", better="higher",
               help="held-out log-likelihood per token at the seeded random start"),
        Metric("heldout_gap", "nats/token", better="higher",
               help="final_loglik - initial_loglik: what training found (the corpus's topic structure)"),
        Metric("topic_js", "nats", better="higher", help="mean Jensen-Shannon divergence between two trained "
               "topics' word distributions (every pair of 64 topics drawn at random): how separated the topics are"),
        Metric("final_topics_per_document", "", help="saber: mean non-zero topics of a training document's row of "
               "A at the end (kd_mean): how many topics a document mixes"),
        Metric("mean_length", "tokens", help="the corpus's mean document length"),
        Metric("length_cv", "", help="the corpus's document lengths: standard deviation over mean"),
        Metric("zipf_exponent", "", help="the corpus's word frequencies: slope of log frequency against log rank "
               "(bench.corpus Corpus.zipf_exponent)"),
        Metric("tokens_per_pair", "", help="the corpus's burstiness: tokens per distinct (document, word) pair"),
        Metric("ceiling", "nats/token", better="higher",
               help="the same under the generating theta and phi (synthetic corpora)"),
        Metric("true_phi_loglik", "nats/token", better="higher", help="the evaluator on the generating phi, theta "
               "folded in as for every system: what recovering the topics is worth (synthetic corpora)"),
        Metric("tokens_per_s", "tokens/s", better="higher", help="training tokens x iterations / seconds"),
        Metric("heldout_documents", "", help="documents held out of training"),
        Metric("graphed", "", help="our GPU systems: 1 where the iterations were replayed as a CUDA graph (saber's "
               "axis graphs, whose default saber-fit takes: one GPU, resident, one chunk)"),
        Metric("evaluated_tokens", "", help="tokens of the held-out documents' evaluated halves"),
        Metric("evaluated_on_gpu", "", help="1 where every held-out evaluation ran on the GPU (heldout.fold_in), 0 "
               "where on every core (from the start, or from one the GPU had no memory left for)"),
        Metric("loglik", "nats/token", better="higher", per="iteration",
               help="held-out log-likelihood per token after the iteration"),
        Metric("kd_mean", "", per="iteration", help="saber: mean non-zeros per row of A after the iteration"),
    )
    sources = ("impls/saber", "impls/lda")  # lda's: the dense GPU peer
    paper = PAPER  # its Figures 11 and 12; the recipes and claims are the saber suite's

    def defaults(self, backend: str) -> Defaults:
        default = ("nytimes-synth at 1M tokens, K = 100, 20 iterations" if backend == "cpu" else
                   "nytimes-synth at 10M tokens, K = 1000, 100 iterations")
        return Defaults(repeats=1, warmup=0, note="one training run per system: a convergence curve, not a timing "
                        f"to repeat; default: {default}")

    def check(self, points: list[dict]) -> None:
        SaberSuite.check(self, points)  # the GPUs asked for, and corpora with something to sample

    def prepare(self, point: dict) -> FitWorkload:
        corpus = cached_corpus(point["dataset"], point["scale"])
        held = _split(point["dataset"], point["scale"])
        doc_ptr, words = held.train.doc_ptr, held.train.words
        gpus, budget = point["gpus"], point["memory"]
        chunks, resident = stream.chunks_for_budget(doc_ptr, corpus.vocab_size, point["K"], point["chunks"],
                                                    point["workers"], budget, gpus)
        train = Workload(doc_ptr, words, corpus.vocab_size, point["K"], point["iterations"],
                         _train_layout(point["dataset"], point["scale"], chunks * gpus), point["workers"])
        if point["backend"] == "gpu":  # streamed from pinned host memory where the budget needs it
            train.corpus = stream.load(train.layout, train.vocabulary, resident, budget, gpus)
        _warm_up(held.train, corpus.vocab_size, point)
        has_model = corpus.true_theta is not None and corpus.true_phi is not None
        alpha = float(model.alpha_of(point["K"]))
        ceiling, true_phi = float("nan"), float("nan")
        evaluation, rows = heldout.compact(held)
        if has_model:
            ceiling = heldout.ceiling(evaluation)
            true_phi = heldout.generating_phi(evaluation)
        return FitWorkload(train, held, evaluation, rows, ceiling, true_phi, point["eval_every"], alpha,
                           _text_stats(point["dataset"], point["scale"]), _evaluates_on_gpu(point, evaluation))

    def run(self, work: FitWorkload, variant: str, ctx) -> dict:
        ours = {}  # our systems' metrics (graphed)
        if variant == "tomotopy":
            _tomotopy(work, ctx)
        elif variant == "delayed-gibbs":
            ours = iterate(work.train, "G4", ctx, "gpu", _evaluation(work), without_own=True)[1]
        elif variant == "delayed-gibbs-cpu":
            iterate(work.train, "G3", ctx, "cpu", _evaluation(work), without_own=True)
        elif variant == "dense-gpu":
            _dense_gpu(work, ctx)
        elif variant == "esca-cpu":
            iterate(work.train, "G3", ctx, "cpu", _evaluation(work))
        else:
            ours = iterate(work.train, variant, ctx, "gpu", _evaluation(work))[1]
        with ctx.untimed():  # reading the series waits for the GPU, then stamps every record on the host
            first, last = ctx.series[0], ctx.series[-1]
        return {"final_loglik": last["loglik"], "initial_loglik": first["loglik"],
                "heldout_gap": last["loglik"] - first["loglik"], "topic_js": work.final_topic_js,
                "final_topics_per_document": last.get("kd_mean"), **work.text, "ceiling": work.ceiling,
                "true_phi_loglik": work.true_phi_loglik, "heldout_documents": work.held.evaluated.num_docs,
                "evaluated_tokens": work.held.evaluated.num_tokens, "evaluated_on_gpu": int(work.gpu_evaluator),
                "graphed": ours.get("graphed")}

    def skip_variant(self, point: dict, variant: str) -> str | None:
        if point.get("gpus", 1) > 1 and variant not in ("G4", "G0", "delayed-gibbs"):
            return f"{variant} runs on one device: gpus = {point['gpus']} is saber's alone"
        return None

    def derived(self, work: FitWorkload, row: dict) -> dict:
        return {"tokens_per_s": work.train.tokens * work.train.iterations / row["seconds"]}

    def render_figures(self, df, series, meta: dict, outdir) -> list:
        from impls.saber import figures  # matplotlib: loaded only to draw

        return figures.render_fit(df, series, meta, outdir)


def _evaluates_on_gpu(point: dict, evaluation: HeldOut) -> bool:
    """A GPU run evaluates every system on the GPU (heldout.fold_in: the same fixed point, summed
    in another order) where the evaluation takes at most a quarter of the GPU memory free once
    the corpus is loaded (the model, within the run's budget, comes later); else on every core,
    as a CPU run does. Free memory counted without what CuPy's pool keeps from earlier points."""
    if point["backend"] != "gpu":
        return False
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()
    return heldout.gpu_bytes(evaluation, point["K"]) <= cupy.cuda.runtime.memGetInfo()[0] / 4


@model.latest_only
def _split(dataset: str, scale: float) -> HeldOut:
    return heldout.split(cached_corpus(dataset, scale))


@model.latest_only
def _text_stats(dataset: str, scale: float) -> dict:
    """Once for every K of a sweep: a count of every word (2 billion tokens in clueweb-synth)."""
    return cached_corpus(dataset, scale).text_stats()


@model.latest_only
def _train_layout(dataset: str, scale: float, chunks: int) -> list:
    """The training documents' chunks, laid out once for every K of a sweep."""
    train = _split(dataset, scale).train
    return model.chunk_layout(train.doc_ptr, train.words, chunks)


WARM_UP_DOCUMENTS = 100


def _warm_up_corpus(train: Corpus) -> Corpus:
    """The first documents and the longest, so that a warm-up takes every path the training will."""
    chosen = set(range(min(WARM_UP_DOCUMENTS, train.num_docs))) | {int(np.diff(train.doc_ptr).argmax())}
    return train.select(np.array(sorted(chosen)), f"{train.name}:warm-up")


def _warm_up(train: Corpus, vocabulary: int, point: dict) -> None:
    """One iteration of each of our systems on its device, own topic counted and left out,
    on a few documents that take every path (_warm_up_corpus): numba's and CuPy's
    compilations depend on the types and the path alone, and are then not timed."""
    small = _warm_up_corpus(train)
    gpus = point["gpus"]
    work = Workload(small.doc_ptr, small.words, vocabulary, point["K"], 1,
                    model.chunk_layout(small.doc_ptr, small.words, gpus), 2)
    systems = [("G3", "cpu")]
    if point["backend"] == "gpu":  # every GPU's kernels loaded, and NCCL's communicators made
        work.corpus = stream.load(work.layout, vocabulary, True, 0.0, gpus)
        systems += [("G4", "gpu"), ("G0", "gpu")]
        dense = _dense_workload(small, point["K"])
        lda_gpu.iterate(dense[1], dense[2], DENSE_DRAW_Z, 1, RunContext("gpu"))
    for stage, device in systems:
        for without_own in (False, True) if stage != "G0" else (False,):
            ctx = RunContext(device)
            with ctx.timed():
                iterate(work, stage, ctx, device, without_own=without_own)


DENSE_DRAW_Z = "warpscan"


def _dense_workload(train: Corpus, topics: int) -> tuple:
    """The lda suite's application on the GPU at alpha = 50/K, beta = 0.01, from its own
    seeded start: (its host workload, its GPU workload, a fresh state)."""
    host = lda_model.make_workload(train, topics, 32, "f32", "dirichlet", SEED, float(model.alpha_of(topics)),
                                   float(model.BETA))
    device = lda_gpu.to_gpu(host)
    return host, device, device.fresh_state()


def _dense_gpu(work: FitWorkload, ctx) -> None:
    """The dense GPU sampler; its word-topic counts are the B handed to the evaluator."""
    with ctx.untimed():
        host, device, state = _dense_workload(work.held.train, work.train.topics)
        state.nwk.set(host.nwk0)  # the start's counts, for the first evaluation (each iteration recounts them)
    _evaluated_runs(work, ctx, lambda sweeps: lda_gpu.iterate(device, state, DENSE_DRAW_Z, sweeps, ctx),
                    lambda: state.nwk)


def _evaluated_runs(work: FitWorkload, ctx, train, counts) -> None:
    """A peer trained by train(sweeps) in runs of eval_every sweeps, timed; its counts()
    handed to the evaluator at the start and after each run, untimed."""
    observe, done = _evaluation(work), 0
    while True:
        with ctx.untimed():
            loglik = observe(done, counts())["loglik"]
        ctx.record(done, loglik=loglik)
        if done == work.train.iterations:
            return
        sweeps = min(work.eval_every, work.train.iterations - done)
        train(sweeps)
        done += sweeps


def _tomotopy(work: FitWorkload, ctx) -> None:
    """tomotopy's LDAModel on the training documents (word ids as strings), alpha and beta
    fixed; its counts B rebuilt from its unnormalised topic-word weights (n_kv + eta)."""
    train = work.train
    with ctx.untimed():
        import tomotopy

        lda = tomotopy.LDAModel(k=train.topics, alpha=work.alpha, eta=float(model.BETA), seed=SEED)
        lda.optim_interval = 0  # alpha stays 50/K, as every system's
        names = np.array([str(v) for v in range(train.vocabulary)], dtype=object)
        for d in range(train.doc_ptr.size - 1):
            lda.add_doc(names[train.words[train.doc_ptr[d]:train.doc_ptr[d + 1]]].tolist())
        with warnings.catch_warnings():  # "may differ even with fixed seed if workers != 1": so it may
            warnings.simplefilter("ignore")
            lda.train(0, workers=os.cpu_count())  # its initial topics, as the others' are untimed

    def counts():
        ids = np.array([int(word) for word in lda.used_vocabs])
        b = np.zeros((train.vocabulary, train.topics), np.int64)
        for k in range(train.topics):
            b[ids, k] = np.rint(lda.get_topic_word_dist(k, normalize=False) - lda.eta).astype(np.int64)
        return b

    def sweeps(count: int) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lda.train(count, workers=os.cpu_count())

    _evaluated_runs(work, ctx, sweeps, counts)


SUITE = SaberFitSuite()
