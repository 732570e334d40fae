"""The catalogue of corpora (datasets/catalogue.toml), name/path resolution and checksummed fetch.

Reading the catalogue itself lives in entries.py, which synth.py imports too.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from .entries import CACHE_DIR, REPO_ROOT, catalogue, entry
from .formats import read_ldac, read_uci
from .model import Corpus, CorpusError
from .synth import synthesize

SHARED_UCI_DIR = REPO_ROOT.parent / "shared" / "datasets" / "uci"

_verified: set[tuple] = set()  # (path, size, mtime_ns, sha256) of files whose hash matched


def load_corpus(name_or_path: str, scale: float = 1.0, seed: int = 0) -> Corpus:
    """A catalogue name, or a path to a docword file, an .ldac file or a directory holding one docword file.

    scale and seed apply to synthetic corpora only.
    """
    entries = catalogue()
    if name_or_path in entries:
        if entries[name_or_path]["kind"] == "synthetic":
            return synthesize(name_or_path, scale, seed)
        _check_unscaled(name_or_path, scale)
        item = entries[name_or_path]
        directory = fetch(name_or_path)
        return read_uci(directory / item["docword"], directory / item["vocab"], name=name_or_path)

    path = Path(name_or_path)
    if not path.exists():
        raise CorpusError(f"unknown dataset {name_or_path!r} (and no such file); known: {', '.join(entries)}")
    _check_unscaled(name_or_path, scale)
    if path.is_dir():
        found = sorted(path.glob("docword.*.txt")) + sorted(path.glob("docword.*.txt.gz"))
        if len(found) != 1:
            raise CorpusError(f"{path}: expected exactly one docword.NAME.txt[.gz] in the directory, found {len(found)}")
        path = found[0]
    if path.name.startswith("docword."):
        stem = path.name.removesuffix(".gz").removesuffix(".txt").removeprefix("docword.")
        vocab = path.with_name(f"vocab.{stem}.txt")
        return read_uci(path, vocab if vocab.exists() else None)
    if path.suffix == ".ldac":
        vocab = next((v for v in (path.with_suffix(".tokens"), path.with_suffix(".vocab")) if v.exists()), None)
        return read_ldac(path, vocab)
    raise CorpusError(f"{path}: cannot tell the format; expected docword.NAME.txt[.gz], NAME.ldac or a directory")


def fetch(name: str) -> Path:
    """The directory holding a real corpus' docword and vocab files, downloading them if needed.

    Searched in order: datasets/cache, each directory of $BENCH_DATA_PATH, ../shared/datasets/uci.
    Local files are checked against the catalogue's sha256 where one is known.
    """
    item = entry(name, "uci")
    roles = ("docword", "vocab")
    for directory in search_path():
        if all((directory / item[role]).is_file() for role in roles):
            for role in roles:
                _verify(directory / item[role], item[f"{role}_sha256"])
            return directory

    unhashed = [item[role] for role in roles if not item[f"{role}_sha256"]]
    if unhashed:
        looked = os.pathsep.join(str(d) for d in search_path())
        raise CorpusError(f"{name}: {' and '.join(item[r] for r in roles)} not found in {looked}, and the catalogue "
                          f"has no sha256 for {', '.join(unhashed)}, so they are not downloaded; get them from "
                          f"{item['docword_url'].rsplit('/', 1)[0]}/ and put them in {CACHE_DIR} or on BENCH_DATA_PATH")
    for role in roles:
        _download(item[f"{role}_url"], item[role], item[f"{role}_sha256"])
    return CACHE_DIR


def locate(name: str) -> Path | None:
    """The directory holding a real corpus' files here (cache or BENCH_DATA_PATH), or None;
    nothing is downloaded or hashed."""
    item = entry(name, "uci")
    return next((d for d in search_path() if all((d / item[role]).is_file() for role in ("docword", "vocab"))),
                None)


def search_path() -> list[Path]:
    extra = [Path(p) for p in os.environ.get("BENCH_DATA_PATH", "").split(os.pathsep) if p]
    return [CACHE_DIR, *extra, SHARED_UCI_DIR]


def _download(url: str, fname: str, sha256: str) -> None:
    import pooch  # only needed to download

    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    try:
        pooch.retrieve(url, known_hash=f"sha256:{sha256}", fname=fname, path=CACHE_DIR, progressbar=False)
    except Exception as exc:  # network, HTTP and checksum errors alike end up as one line for the user
        detail = " ".join(str(exc).split())
        raise CorpusError(f"could not download {url} into {CACHE_DIR}: {detail}") from None


def _verify(path: Path, sha256: str) -> None:
    """Raise CorpusError if the file's sha256 differs from a known one."""
    if not sha256:
        return
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, sha256)
    if key in _verified:
        return
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            digest.update(block)
    if digest.hexdigest() != sha256:
        raise CorpusError(f"{path}: sha256 {digest.hexdigest()} differs from the catalogue's {sha256}; "
                          "delete or replace the file")
    _verified.add(key)


def _check_unscaled(name: str, scale: float) -> None:
    if scale != 1:
        raise CorpusError(f"{name}: scale={scale} applies only to synthetic corpora; a real corpus has scale 1")
