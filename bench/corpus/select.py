"""Choosing corpora on the command line: the values of a topic-model suite's dataset axis,
and the corpora loaded once per process."""

from functools import lru_cache
from pathlib import Path

from bench.errors import BenchError

from .catalogue import catalogue, load_corpus
from .model import Corpus, CorpusError


def parse_datasets(spec) -> list[str]:
    """Catalogue names or paths, comma separated (BenchError on an unknown one)."""
    names = [part for part in str(spec).replace(" ", "").split(",") if part]
    known = catalogue()
    for name in names:
        if name not in known and not Path(name).exists():
            raise BenchError(f"unknown dataset {name!r}; known: {', '.join(known)} (or a path)")
    if not names:
        raise BenchError("empty dataset spec")
    return names


def is_synthetic(dataset: str) -> bool:
    return catalogue().get(dataset, {}).get("kind") == "synthetic"


@lru_cache(maxsize=4)
def cached_corpus(dataset: str, scale: float) -> Corpus:
    """load_corpus, once per (dataset, scale) and process, its errors as BenchError."""
    try:
        return load_corpus(dataset, scale=scale)
    except CorpusError as error:
        raise BenchError(str(error)) from error
