"""The catalogue of corpora (datasets/catalogue.toml), name/path resolution and checksummed fetch.

Reading the catalogue itself lives in entries.py, which synth.py imports too.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import zlib
from pathlib import Path

from bench.errors import brief

from . import entries
from .entries import catalogue, entry
from .formats import read_ldac, read_uci
from .model import Corpus, CorpusError
from .synth import synthesize

ROLES = ("docword", "vocab")
RECORD_SUFFIX = ".sha256"  # beside a file downloaded without a known hash: its sha256, recorded then

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

    Searched in order: the cache (entries.CACHE_DIR: ./datasets/cache or $BENCH_CACHE), then each
    directory of $BENCH_DATA_PATH; else downloaded into the cache. A file is checked against the
    catalogue's sha256 where it has one; otherwise against the sha256 recorded beside it when it
    was downloaded (FILE.sha256), or, where there is no record, against the counts the catalogue
    gives (the docword header's D, W and NNZ, the vocab's lines). A file downloaded without a
    known sha256 is checked so, and its sha256 recorded.
    """
    item = entry(name, "uci")
    directory = locate(name)
    if directory is not None:
        for role in ROLES:
            _check_local(directory / item[role], item, role)
        return directory
    for role in ROLES:
        _download(name, item, role)
    return entries.CACHE_DIR


def locate(name: str) -> Path | None:
    """The directory holding a real corpus' files here (cache or BENCH_DATA_PATH), or None;
    nothing is downloaded or hashed."""
    item = entry(name, "uci")
    return next((d for d in search_path() if all((d / item[role]).is_file() for role in ROLES)), None)


def search_path() -> list[Path]:
    """Where real corpora are looked for: the cache, then each directory of $BENCH_DATA_PATH."""
    extra = [Path(p) for p in os.environ.get("BENCH_DATA_PATH", "").split(os.pathsep) if p]
    for directory in extra:  # a typo would otherwise start a download (gigabytes, for some corpora)
        if not directory.is_dir():
            raise CorpusError(f"BENCH_DATA_PATH: {directory} is not a directory")
    return [entries.CACHE_DIR, *extra]


def _check_local(path: Path, item: dict, role: str) -> None:
    if item[f"{role}_sha256"]:
        _verify(path, item[f"{role}_sha256"], "the catalogue's")
    elif (record := _record_path(path)).is_file():
        _verify(path, _read_record(record), f"the one recorded in {record.name} at download")
    else:
        _check_counts(path, item, role)


def _download(name: str, item: dict, role: str) -> None:
    """Download one file into the cache (pooch: a temporary file, moved into place when whole),
    checked against the catalogue's sha256, or against its counts and its sha256 then recorded."""
    import pooch  # only needed to download

    cache, url, fname, sha256 = entries.CACHE_DIR, item[f"{role}_url"], item[role], item[f"{role}_sha256"]
    path, made = cache / fname, not cache.exists()
    try:
        cache.mkdir(parents=True, exist_ok=True)
        pooch.retrieve(url, known_hash=f"sha256:{sha256}" if sha256 else None, fname=fname, path=cache,
                       progressbar=False)
    except Exception as exc:  # network, HTTP and checksum errors alike end up as one line for the user
        if made and not any(cache.iterdir()):
            cache.rmdir()  # made for this download alone: not left behind empty
        detail = f"{type(exc).__name__}: {brief(exc)}"
        where = f"{cache.absolute()} or a directory on BENCH_DATA_PATH"
        raise CorpusError(f"{name}: could not download {url} into {cache.absolute()} ({detail}); download "
                          f"{' and '.join(item[r] for r in ROLES)} from {url.rsplit('/', 1)[0]}/ yourself and "
                          f"put them in {where}") from None
    if sha256:
        return
    record = _record_path(path)
    if record.is_file():  # downloaded earlier, the other file missing then
        _verify(path, _read_record(record), f"the one recorded in {record.name} at download")
        return
    try:
        _check_counts(path, item, role)
    except CorpusError as error:
        path.unlink(missing_ok=True)  # not the corpus the catalogue describes: not kept to be found again
        raise CorpusError(f"{error} (downloaded from {url}; deleted)") from None
    digest = _sha256(path)
    tmp = record.with_name(f"{record.name}.{os.getpid()}.tmp")
    tmp.write_text(f"{digest}  {fname}\n")  # sha256sum's format: `sha256sum -c` checks it too
    os.replace(tmp, record)


def _record_path(path: Path) -> Path:
    return path.with_name(path.name + RECORD_SUFFIX)


def _read_record(record: Path) -> str:
    digest = record.read_text().split(maxsplit=1)[0] if record.stat().st_size else ""
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise CorpusError(f"{record}: expected a sha256 (64 hex digits) and the file name; delete it and the file "
                          "it describes to download them again")
    return digest


def _check_counts(path: Path, item: dict, role: str) -> None:
    """The counts UCI publishes, against the catalogue's: a docword file's header (its first three
    lines, D, W and NNZ; nothing more is read), a vocab file's number of lines."""
    if role == "vocab":
        with open(path, "rb") as f:
            lines = sum(1 for _ in f)
        if lines != item["vocabulary"]:
            raise CorpusError(f"{path}: {lines} lines, the catalogue's vocabulary has {item['vocabulary']}")
        return
    try:
        with (gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")) as f:
            header = [f.readline().strip() for _ in range(3)]
    except (OSError, EOFError, zlib.error) as exc:
        raise CorpusError(f"{path}: cannot read its header ({' '.join(str(exc).split())})") from None
    expected = [item["documents"], item["vocabulary"], item["nnz"]]
    if not all(line.isdigit() for line in header) or [int(line) for line in header] != expected:
        got = ", ".join(line.decode(errors="replace")[:20] for line in header)
        raise CorpusError(f"{path}: header D, W, NNZ = {got}, the catalogue's are {', '.join(map(str, expected))}")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            digest.update(block)
    return digest.hexdigest()


def _verify(path: Path, sha256: str, whose: str) -> None:
    """Raise CorpusError if the file's sha256 differs from a known one."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, sha256)
    if key in _verified:
        return
    digest = _sha256(path)
    if digest != sha256:
        raise CorpusError(f"{path}: sha256 {digest} differs from {whose} {sha256}; delete or replace the file")
    _verified.add(key)


def _check_unscaled(name: str, scale: float) -> None:
    if scale != 1:
        raise CorpusError(f"{name}: scale={scale} applies only to synthetic corpora; a real corpus has scale 1")
