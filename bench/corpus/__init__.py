"""Corpora for the benchmarks: real UCI bag-of-words corpora, LDA-C files and synthetic corpora.

Every Corpus returned here has its documents sorted longest first.
"""

from .catalogue import catalogue, fetch, load_corpus, locate
from .formats import read_ldac, read_uci, write_uci
from .model import Corpus, CorpusError, HeldOut
from .select import cached_corpus, is_synthetic, parse_datasets
from .synth import synthesize

__all__ = [
    "Corpus",
    "CorpusError",
    "HeldOut",
    "cached_corpus",
    "catalogue",
    "fetch",
    "is_synthetic",
    "load_corpus",
    "locate",
    "parse_datasets",
    "read_ldac",
    "read_uci",
    "synthesize",
    "write_uci",
]
