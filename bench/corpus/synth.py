"""Deterministic synthetic corpora that look like text (DESIGN.md, "Synthetic corpora with the
structure of text").

Document lengths are a clipped lognormal scaled to an exact token total; each document
mixes topics with theta_d ~ Dirichlet(alpha), and each token draws a topic from theta_d and
then a word from that topic (the topic counts of a document are then multinomial(length,
theta_d)). The topics come in two kinds:
- calibrated (an entry that `imitates` a real corpus): the parameters of the real corpus's
  [NAME.structure], measured against it by impls/saber's calibration recipe. A share of
  each topic (1 - topic_share) is the Zipf law of the words' global ranks, the words every
  topic uses; the rest is a Zipf law (topic_zipf_exponent) of the topic's own ranking of the
  words (a random permutation), its head words. Lengths have the real corpus's spread
  (length_cv). With burstiness, a token may instead repeat the word of an earlier token of
  its document (_repeat_words), as words recur in text.
- the first generator's (wiki-synth and tiny): topics
  are Dirichlet draws of large concentration around one Zipf base over a hidden vocabulary,
  of which the V words with the largest total mass are kept; they share their head words and
  differ in the tail, which leaves little for a model to find. The lengths' spread follows
  from max_length.
Every random number comes from PCG64 streams seeded from (name, seed), and the discrete
draws are inverse-CDF searches on rng.random / rng.integers, whose bits numpy fixes. The
same arguments gave the same bytes with numpy 2.4 and 2.5 on different hosts; only the
gamma and lognormal draws go through the C math library, where a different libm could in
principle change a last bit. Where there is a GPU, the searches and sorts of the per-token
draws run on it (CuPy), on the same random numbers drawn on the host: integer keys and
float64 comparisons, so the same bytes.
"""

from __future__ import annotations

import json
import os
import statistics
import zlib
from dataclasses import dataclass

import numpy as np

from ..backend import gpu_array_module, to_host
from . import entries
from .entries import entry
from .model import Corpus, CorpusError

GENERATOR_VERSION = 1  # bump when the output for given arguments changes; it keys the disk cache
CACHE_MIN_TOKENS = 1 << 25  # corpora this large are kept in the cache's synth/ as .npz
_CHUNK_TOKENS = 1 << 23  # tokens generated at a time, to bound temporary memory


CALIBRATED = ("length_cv", "topics", "alpha", "zipf_exponent", "topic_share", "topic_zipf_exponent")
FIRST = ("topics", "alpha", "zipf_exponent", "hidden_vocabulary", "concentration")  # the first generator's


@dataclass(frozen=True)
class Targets:
    documents: int
    vocabulary: int
    tokens: int
    max_length: int
    topics: int
    alpha: float
    zipf_exponent: float
    length_cv: float | None = None  # calibrated corpora
    topic_share: float | None = None
    topic_zipf_exponent: float | None = None
    burstiness: float | None = None
    hidden_vocabulary: int | None = None  # the first generator's
    concentration: float | None = None


def targets(item: dict, scale: float = 1.0) -> Targets:
    """The generation targets of a catalogue entry at a scale: sizes scale, mean and max length do not."""
    if not scale > 0:
        raise CorpusError(f"scale must be positive, got {scale}")
    docs = max(1, round(item["documents"] * scale))
    tokens = max(docs, round(item["tokens"] * scale))  # every document gets at least one token
    vocab = max(16, round(item["vocabulary"] * scale))
    if "imitates" in item:  # the real corpus's structure, a key of the entry's own overriding it
        structure = {**entry(item["imitates"], "uci")["structure"], **item}
        topics = {name: structure[name] for name in CALIBRATED}
        topics["burstiness"] = structure.get("burstiness", 0.0)
    else:
        topics = {name: item[name] for name in FIRST}
        topics["hidden_vocabulary"] = max(item["hidden_vocabulary"], 2 * vocab)
    return Targets(
        documents=docs,
        vocabulary=vocab,
        tokens=tokens,
        max_length=max(item["max_length"], -(-tokens // docs)),  # raised only if the total would not fit
        **topics,
    )


def synthesize(name: str, scale: float = 1.0, seed: int = 0) -> Corpus:
    """The synthetic catalogue corpus `name`, documents sorted longest first, with true theta and phi."""
    item = entry(name, "synthetic")
    t = targets(item, scale)
    seed = item.get("seed", 0) + seed
    if t.tokens < CACHE_MIN_TOKENS:
        return generate(name, t, seed)

    # The key covers everything the output depends on, catalogue parameters included.
    params = zlib.crc32(json.dumps([t.__dict__, seed, GENERATOR_VERSION], sort_keys=True).encode())
    path = entries.CACHE_DIR / "synth" / f"{name}-scale{scale:g}-seed{seed}-v{GENERATOR_VERSION}-{params:08x}.npz"
    if path.exists():
        with np.load(path) as z:
            return Corpus(name, z["doc_ptr"], z["words"], t.vocabulary, None, z["true_theta"], z["true_phi"])
    corpus = generate(name, t, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")
    np.savez(tmp, doc_ptr=corpus.doc_ptr, words=corpus.words, true_theta=corpus.true_theta, true_phi=corpus.true_phi)
    os.replace(tmp, path)  # atomic: a concurrent reader sees the whole file or none
    return corpus


def generate(name: str, t: Targets, seed: int, xp=None) -> Corpus:
    """Generate a corpus with exactly t.documents, t.tokens and t.vocabulary from a seed; xp,
    the array module of the per-token searches and sorts, is CuPy where there is a GPU."""
    if xp is None:
        xp = gpu_array_module() or np
    # zlib.crc32, not hash(): Python salts str hashes per process.
    # A sixth stream leaves the first five (and corpora without burstiness) as they were.
    streams = np.random.SeedSequence([zlib.crc32(name.encode()), seed]).spawn(6)
    rng_phi, rng_len, rng_perm, rng_theta, rng_tok, rng_repeat = (np.random.Generator(np.random.PCG64(s))
                                                                  for s in streams)

    phi = _topics(rng_phi, t)  # (K, V), word ranks by total mass
    cdf = np.cumsum(phi, axis=1)
    cdf /= cdf[:, -1:]  # exactly 1 at the end, so a uniform in [0, 1) never falls off
    perm = rng_perm.permutation(t.vocabulary).astype(np.int32)  # rank -> word id
    on_device = (xp.asarray(cdf), xp.asarray(perm))

    lengths = np.sort(_lengths(rng_len, t))[::-1]
    doc_ptr = np.zeros(t.documents + 1, dtype=np.int64)
    np.cumsum(lengths, out=doc_ptr[1:])
    words = np.empty(t.tokens, dtype=np.int32)
    theta = np.empty((t.documents, t.topics))
    step = max(1, _CHUNK_TOKENS // t.max_length)
    for start in range(0, t.documents, step):
        stop = min(start + step, t.documents)
        gamma = rng_theta.standard_gamma(t.alpha, size=(stop - start, t.topics))
        theta[start:stop] = gamma / gamma.sum(axis=1, keepdims=True)
        topic = _draw_topics(rng_tok, theta[start:stop], lengths[start:stop], xp)
        drawn = to_host(_draw_words(rng_tok, topic, lengths[start:stop], *on_device, xp))
        if t.burstiness:
            drawn = _repeat_words(rng_repeat, drawn, lengths[start:stop], t.burstiness)
        words[doc_ptr[start]:doc_ptr[stop]] = drawn

    true_phi = np.empty((t.vocabulary, t.topics))
    true_phi[perm] = phi.T
    return Corpus(name, doc_ptr, words, t.vocabulary, None, theta, true_phi)


def _topics(rng: np.random.Generator, t: Targets) -> np.ndarray:
    """(K, V) topic-word distributions over words by global rank (calibrated): a share of
    the Zipf law of the global ranks and the rest a Zipf law of the topic's own ranking."""
    if t.topic_share is None:
        return _first_topics(rng, t)
    ranks = np.arange(1, t.vocabulary + 1, dtype=np.float64)
    common, own = ranks**-t.zipf_exponent, ranks**-t.topic_zipf_exponent
    own_rank = rng.permuted(np.tile(np.arange(t.vocabulary), (t.topics, 1)), axis=1)
    return (1 - t.topic_share) * common / common.sum() + t.topic_share * own[own_rank] / own.sum()


def _repeat_words(rng: np.random.Generator, words: np.ndarray, lengths: np.ndarray, burstiness: float) -> np.ndarray:
    """Text's burstiness (a word once used in a document is likelier there again): every token
    but a document's first takes, with probability `burstiness`, the word of an earlier token
    of its document drawn uniformly (a Polya urn over the document's tokens), the copies
    followed back to a token drawn from its topic."""
    tokens = words.size
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    position = np.arange(tokens) - starts
    repeats, earlier = rng.random(tokens) < burstiness, rng.random(tokens)
    source = np.where(repeats & (position > 0), starts + (earlier * position).astype(np.int64), np.arange(tokens))
    while True:  # pointer jumping: each pass halves the longest chain of copies
        further = source[source]
        if np.array_equal(further, source):
            return words[source]
        source = further


def _first_topics(rng: np.random.Generator, t: Targets) -> np.ndarray:
    """(K, V) topic-word distributions: Dirichlet around a hidden Zipf, restricted to the V heaviest words."""
    base = np.arange(1, t.hidden_vocabulary + 1, dtype=np.float64) ** -t.zipf_exponent
    base /= base.sum()
    # A large concentration keeps the head words shared by all topics; the tail is sparse and topic-specific.
    phi = rng.standard_gamma(t.concentration * base, size=(t.topics, t.hidden_vocabulary))
    phi /= phi.sum(axis=1, keepdims=True)
    keep = np.argsort(-phi.sum(axis=0), kind="stable")[: t.vocabulary]
    phi = phi[:, keep]
    return phi / phi.sum(axis=1, keepdims=True)


def _lengths(rng: np.random.Generator, t: Targets) -> np.ndarray:
    """Document lengths in [1, max_length] summing exactly to t.tokens.

    A lognormal whose mean is the target mean, and whose coefficient of variation is
    length_cv (calibrated) or whose 1 - 1/D quantile is the maximum (the first generator), is
    multiplied by the factor that brings the clipped, rounded total just under the target;
    the few missing tokens go to random documents that have room.
    """
    mean, top = t.tokens / t.documents, t.max_length
    if t.length_cv is not None:
        sigma = np.sqrt(np.log1p(t.length_cv**2))
    else:
        z = statistics.NormalDist().inv_cdf(1 - 1 / (t.documents + 1))
        # Solve log(top) = log(mean) - sigma^2/2 + z*sigma for the smaller root; no root: as wide as allowed.
        gap = np.log(top / mean) if top > mean else 0.0
        sigma = z - np.sqrt(z * z - 2 * gap) if z * z > 2 * gap else z
    x = rng.lognormal(np.log(mean) - sigma**2 / 2, sigma, t.documents)

    def clipped(c):
        return np.clip(np.rint(c * x), 1, top).astype(np.int64)

    lo, hi = 0.0, top / x.min()  # clipped(lo).sum() = D <= tokens <= D * top = clipped(hi).sum()
    for _ in range(100):
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        total = clipped(mid).sum()
        if total <= t.tokens:
            lo = mid
            if total == t.tokens:
                break
        else:
            hi = mid
    lengths = clipped(lo)
    missing = t.tokens - int(lengths.sum())
    lengths[rng.choice(np.flatnonzero(lengths < top), missing, replace=False)] += 1
    return lengths


def _draw_topics(rng: np.random.Generator, theta: np.ndarray, lengths: np.ndarray, xp):
    """Topic of every token of a block of documents, drawn from its document's theta row.

    Drawn token by token rather than with rng.multinomial, whose counts for these theta rows
    came out different under numpy 2.5 (GPU host) than under numpy 2.4 (here). The search runs
    on integers, cumulative theta in units of 2**-32 offset by the document, so that no
    rounding can move a token to another document.
    """
    docs, topics = theta.shape
    cum = np.cumsum(theta, axis=1)
    cum = np.floor(cum / cum[:, -1:] * 2.0**32).astype(np.int64)  # the last column is exactly 2**32
    table = (cum + (np.arange(docs, dtype=np.int64) << 32)[:, None]).ravel()
    doc = np.repeat(np.arange(docs, dtype=np.int64), lengths)
    key = xp.asarray((doc << 32) + rng.integers(0, 1 << 32, size=doc.size, dtype=np.int64))
    return (xp.searchsorted(xp.asarray(table), key, side="right") - (key >> 32) * topics).astype(np.int16)


def _draw_words(rng: np.random.Generator, topic, lengths: np.ndarray, cdf, perm, xp):
    """Word ids for tokens with given topics, sorted by word id within each document (arrays
    of xp, but for lengths and the host's generator)."""
    u = xp.asarray(rng.random(topic.size))
    by_topic = xp.argsort(topic, kind="stable")  # radix sort: int16 keys
    bounds = to_host(xp.searchsorted(topic[by_topic], xp.arange(cdf.shape[0] + 1)))
    rank = xp.empty(topic.size, dtype=np.int32)
    for k in range(cdf.shape[0]):  # inverse CDF, all tokens of one topic at once
        sel = by_topic[bounds[k]:bounds[k + 1]]
        rank[sel] = xp.searchsorted(cdf[k], u[sel], side="right")
    # Order a document's tokens by word id, as an expanded UCI file has them (write_uci/read_uci is then exact).
    doc = xp.asarray(np.repeat(np.arange(lengths.size, dtype=np.int64), lengths))
    key = doc * len(perm) + perm[rank]
    key.sort()
    return (key - doc * len(perm)).astype(np.int32)
