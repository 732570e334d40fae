"""The in-memory corpus: documents as a CSR-like pair (doc_ptr, words)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property

import numpy as np


ZIPF_FIRST_RANK, ZIPF_POINTS = 10, 50
PAIR_SAMPLE_TOKENS = 1 << 24  # tokens of the documents Corpus.tokens_per_pair counts


class CorpusError(Exception):
    """Bad input data or an unknown dataset; the one-line message says what to fix.

    The CLI prints it on one line, with no traceback, and exits with exit_code.
    """

    exit_code = 2


@dataclass(frozen=True)
class Corpus:
    """Documents sorted longest first; tokens of document d are words[doc_ptr[d]:doc_ptr[d+1]]."""

    name: str
    doc_ptr: np.ndarray
    words: np.ndarray
    vocab_size: int
    vocab: tuple[str, ...] | None = None
    true_theta: np.ndarray | None = None  # (D, K_true), synthetic corpora only
    true_phi: np.ndarray | None = None  # (V, K_true), columns are topics

    def __post_init__(self):
        # Coerce (without copying when already right) so every consumer can rely on dtypes.
        object.__setattr__(self, "doc_ptr", np.ascontiguousarray(self.doc_ptr, dtype=np.int64))
        object.__setattr__(self, "words", np.ascontiguousarray(self.words, dtype=np.int32))
        object.__setattr__(self, "vocab_size", int(self.vocab_size))
        ptr, words = self.doc_ptr, self.words
        if ptr.ndim != 1 or ptr.size == 0 or ptr[0] != 0 or ptr[-1] != words.size:
            raise ValueError(f"{self.name}: doc_ptr must start at 0 and end at len(words)={words.size}")
        if np.any(ptr[1:] < ptr[:-1]):
            raise ValueError(f"{self.name}: doc_ptr must be nondecreasing")
        if words.size and (words.min() < 0 or words.max() >= self.vocab_size):
            raise ValueError(f"{self.name}: word ids must lie in [0, {self.vocab_size})")
        if self.vocab is not None and len(self.vocab) != self.vocab_size:
            raise ValueError(f"{self.name}: {len(self.vocab)} vocab words for vocab_size {self.vocab_size}")
        if self.true_theta is not None and self.true_theta.shape[0] != self.num_docs:
            raise ValueError(f"{self.name}: true_theta has {self.true_theta.shape[0]} rows for {self.num_docs} documents")
        if self.true_phi is not None and self.true_phi.shape[0] != self.vocab_size:
            raise ValueError(f"{self.name}: true_phi has {self.true_phi.shape[0]} rows for {self.vocab_size} words")

    @property
    def num_docs(self) -> int:
        return self.doc_ptr.size - 1

    @property
    def num_tokens(self) -> int:
        return self.words.size

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.doc_ptr)

    @property
    def max_length(self) -> int:
        return int(self.lengths.max()) if self.num_docs else 0

    def pair_ids(self) -> np.ndarray:
        """Each token's (document, word) as one int64, document x V + word: ascending by
        document, so a sort of them keeps each document's pairs together."""
        pairs = np.repeat(np.arange(self.num_docs, dtype=np.int64) * self.vocab_size, self.lengths)
        pairs += self.words  # in place: one array of 8 bytes a token, not two
        return pairs

    @cached_property
    def nnz(self) -> int:
        """Number of distinct (document, word) pairs."""
        pairs = self.pair_ids()
        pairs.sort()  # then counted: numpy 2's hashing np.unique took 40x a sort's time (9M pairs)
        return int(pairs.size and 1 + np.count_nonzero(pairs[1:] != pairs[:-1]))

    def padded(self, multiple: int) -> Corpus:
        """Append empty documents so that num_docs is a multiple of `multiple`."""
        if multiple < 1:
            raise ValueError(f"multiple must be >= 1, got {multiple}")
        extra = -self.num_docs % multiple
        if extra == 0:
            return self
        doc_ptr = np.concatenate([self.doc_ptr, np.full(extra, self.doc_ptr[-1])])
        theta = self.true_theta
        if theta is not None:
            k = theta.shape[1]
            theta = np.vstack([theta, np.full((extra, k), 1.0 / k)])
        return dataclasses.replace(self, doc_ptr=doc_ptr, true_theta=theta)

    def heldout_split(self, fraction: float = 0.1, seed: int = 0) -> HeldOut:
        """Hold out round(fraction*D) random documents and split each one's shuffled tokens in half.

        observed gets the first floor(n/2) tokens of a held-out document, evaluated the rest;
        all three corpora keep the longest-first order.
        """
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"fraction must lie in [0, 1], got {fraction}")
        rng = np.random.Generator(np.random.PCG64(seed))
        held = np.sort(rng.choice(self.num_docs, round(fraction * self.num_docs), replace=False))
        train = self.without(held, f"{self.name}:train")

        ptr, idx = segment_index(self.doc_ptr, held)
        lengths = np.diff(ptr)
        doc = np.repeat(np.arange(held.size), lengths)
        tokens = self.words[idx][np.lexsort((rng.random(idx.size), doc))]  # shuffle within each doc
        half = lengths // 2
        first = np.arange(idx.size) - ptr[doc] < half[doc]
        theta = None if self.true_theta is None else self.true_theta[held]

        def part(mask, part_lengths, suffix):
            part_ptr = np.concatenate([[0], np.cumsum(part_lengths)])
            return dataclasses.replace(self, name=f"{self.name}:{suffix}", doc_ptr=part_ptr,
                                       words=tokens[mask], true_theta=theta)

        return HeldOut(train, part(first, half, "observed"), part(~first, lengths - half, "evaluated"))

    def stats(self) -> dict:
        lengths = self.lengths
        return {
            "documents": self.num_docs,
            "vocabulary": self.vocab_size,
            "tokens": self.num_tokens,
            "nnz": self.nnz,
            "max_length": self.max_length,
            "empty_documents": int(np.count_nonzero(lengths == 0)),
            **self.text_stats(),
        }

    def text_stats(self) -> dict:
        """What a synthetic corpus imitates of a real one's text (bench/corpus/synth.py): the
        mean and the spread (standard deviation over mean) of document lengths, the Zipf
        exponent of word frequencies and the burstiness of words (tokens per distinct word of
        a document)."""
        lengths = self.lengths
        return {"mean_length": self.num_tokens / self.num_docs if self.num_docs else 0.0,
                "length_cv": float(lengths.std() / lengths.mean()) if self.num_tokens else 0.0,
                "zipf_exponent": self.zipf_exponent(), "tokens_per_pair": self.tokens_per_pair()}

    def tokens_per_pair(self) -> float:
        """Tokens per distinct (document, word) pair, over every document of a corpus of up to
        PAIR_SAMPLE_TOKENS tokens, else over documents evenly spaced through it (a sort of
        billions of pairs would take minutes); 0 for an empty corpus."""
        step = max(1, -(-self.num_tokens // PAIR_SAMPLE_TOKENS))
        sample = self if step == 1 else self.select(np.arange(0, self.num_docs, step), self.name)
        return sample.num_tokens / sample.nnz if sample.nnz else 0.0

    def zipf_exponent(self) -> float:
        """The slope of log frequency against log rank, least squares over ZIPF_POINTS ranks
        spaced evenly in log rank from ZIPF_FIRST_RANK to a tenth of the words used (the head's
        few function words and the tail's ones and twos left out); nan with too few words."""
        counts = np.sort(np.bincount(self.words, minlength=self.vocab_size))[::-1]
        used = int(np.count_nonzero(counts))
        last = used // 10
        if last < 4 * ZIPF_FIRST_RANK:
            return float("nan")
        ranks = np.unique(np.geomspace(ZIPF_FIRST_RANK, last, ZIPF_POINTS).round().astype(np.int64))
        slope = np.polyfit(np.log(ranks), np.log(counts[ranks - 1]), 1)[0]
        return float(-slope)

    def without(self, docs: np.ndarray, name: str) -> Corpus:
        """The corpus less the documents `docs`, the others in their order: the runs of tokens
        between them copied whole (a slice a document left out: meant for a few, as a held-out
        split's), where select would gather through an index of every token kept (16 GB for 2
        billion tokens, minutes to build)."""
        docs = np.unique(docs)
        keep = np.ones(self.num_docs, dtype=bool)
        keep[docs] = False
        lengths = self.lengths[keep]
        doc_ptr = np.zeros(lengths.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=doc_ptr[1:])
        starts, ends = self.doc_ptr[np.append(0, docs + 1)], self.doc_ptr[np.append(docs, self.num_docs)]
        words = np.concatenate([self.words[a:b] for a, b in zip(starts, ends)])
        theta = None if self.true_theta is None else self.true_theta[keep]
        return dataclasses.replace(self, name=name, doc_ptr=doc_ptr, words=words, true_theta=theta)

    def select(self, docs: np.ndarray, name: str) -> Corpus:
        """The documents `docs` (indices, in that order) as a corpus of their own."""
        ptr, idx = segment_index(self.doc_ptr, docs)
        theta = None if self.true_theta is None else self.true_theta[docs]
        return dataclasses.replace(self, name=name, doc_ptr=ptr, words=self.words[idx], true_theta=theta)


@dataclass(frozen=True)
class HeldOut:
    train: Corpus  # documents not held out
    observed: Corpus  # held-out documents, first half of each one's shuffled tokens
    evaluated: Corpus  # the other half, same document order as observed


def segment_index(ptr: np.ndarray, segments: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate the segments ptr[s]:ptr[s+1] for s in `segments`, without a Python loop.

    Returns the new pointer array and the gather index into the old data.
    """
    lengths = ptr[segments + 1] - ptr[segments]
    new_ptr = np.zeros(segments.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_ptr[1:])
    idx = np.arange(new_ptr[-1], dtype=np.int64) + np.repeat(ptr[segments] - new_ptr[:-1], lengths)
    return new_ptr, idx


def from_entries(name: str, doc: np.ndarray, word: np.ndarray, count: np.ndarray, num_docs: int,
                 vocab_size: int, vocab: tuple[str, ...] | None = None) -> Corpus:
    """Build a corpus from 0-based (doc, word, count) entries, sorting documents longest first.

    Tokens of a document are its entries in input order, each repeated count times.
    """
    if np.any(doc[1:] < doc[:-1]):
        order = np.argsort(doc, kind="stable")
        doc, word, count = doc[order], word[order], count[order]
    entry_ptr = np.zeros(num_docs + 1, dtype=np.int64)
    np.cumsum(np.bincount(doc, minlength=num_docs), out=entry_ptr[1:])
    lengths = np.bincount(doc, weights=count, minlength=num_docs).astype(np.int64)
    order = np.argsort(-lengths, kind="stable")  # longest first, ties keep file order
    _, idx = segment_index(entry_ptr, order)
    words = np.repeat(word[idx].astype(np.int32, copy=False), count[idx])
    doc_ptr = np.concatenate([[0], np.cumsum(lengths[order])])
    return Corpus(name, doc_ptr, words, vocab_size, vocab)
