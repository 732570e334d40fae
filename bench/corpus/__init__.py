"""Corpora for the benchmarks: real UCI bag-of-words corpora, LDA-C files and synthetic corpora.

Every Corpus returned here has its documents sorted longest first.
"""

from .catalogue import catalogue, fetch, load_corpus
from .formats import read_ldac, read_uci, write_uci
from .model import Corpus, CorpusError, HeldOut
from .synth import synthesize

__all__ = [
    "Corpus",
    "CorpusError",
    "HeldOut",
    "catalogue",
    "fetch",
    "load_corpus",
    "read_ldac",
    "read_uci",
    "synthesize",
    "write_uci",
]
