"""Reading datasets/catalogue.toml (package data: bench/corpus/catalogue.toml, a link to it in a
checkout, a copy in a wheel), and where corpora are cached.

Kept apart from catalogue.py, which resolves names to corpora (and so imports synth), so
that synth can look up its own entry without importing catalogue.py back.
"""

from __future__ import annotations

import os
import tomllib
from importlib.resources import files
from pathlib import Path

from .model import CorpusError

# Read through importlib.resources, so it is found wherever the package is (checkout, editable
# install, wheel); bench/corpus/catalogue.toml links to datasets/catalogue.toml, and the wheel
# holds a copy.
CATALOGUE_PATH = files("bench.corpus") / "catalogue.toml"
# Downloads and generated corpora: under the current directory (git-ignored in a checkout) or
# $BENCH_CACHE, never in the installed package. The one definition; other modules read it
# as entries.CACHE_DIR when they use it.
CACHE_DIR = Path(os.environ.get("BENCH_CACHE") or Path("datasets") / "cache")
_KINDS = ("uci", "synthetic")


def catalogue() -> dict[str, dict]:
    """datasets/catalogue.toml parsed: name -> entry (a fresh dict on every call)."""
    try:
        with CATALOGUE_PATH.open("rb") as f:
            entries = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CorpusError(f"{CATALOGUE_PATH}: {exc}") from None
    for name, item in entries.items():
        if item.get("kind") not in _KINDS:
            raise CorpusError(f"{CATALOGUE_PATH}: [{name}] needs kind = one of {', '.join(_KINDS)}")
    return entries


def entry(name: str, kind: str | None = None) -> dict:
    """One catalogue entry, optionally of a given kind."""
    entries = catalogue()
    if name not in entries:
        raise CorpusError(f"unknown dataset {name!r}; known: {', '.join(entries)}")
    if kind is not None and entries[name]["kind"] != kind:
        raise CorpusError(f"dataset {name!r} is {entries[name]['kind']}, not {kind}")
    return entries[name]
