"""Reading datasets/catalogue.toml, and where corpora are cached.

Kept apart from catalogue.py, which resolves names to corpora (and so imports synth), so
that synth can look up its own entry without importing catalogue.py back.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from .model import CorpusError

REPO_ROOT = Path(__file__).resolve().parents[2]
CATALOGUE_PATH = REPO_ROOT / "datasets" / "catalogue.toml"
CACHE_DIR = REPO_ROOT / "datasets" / "cache"  # git-ignored
_KINDS = ("uci", "synthetic")


def catalogue() -> dict[str, dict]:
    """datasets/catalogue.toml parsed: name -> entry (a fresh dict on every call)."""
    try:
        with open(CATALOGUE_PATH, "rb") as f:
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
