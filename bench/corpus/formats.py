"""UCI bag-of-words reader and writer, LDA-C reader.

Each reader has a fast vectorised path and, when that path finds anything wrong, a slow
line-by-line scan whose only job is to name the first bad line in a CorpusError.
"""

from __future__ import annotations

import gzip
import io
import re
import warnings
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from .model import Corpus, CorpusError, from_entries

_INT = re.compile(rb"-?[0-9]+")
_PAIR = re.compile(rb"(-?[0-9]+):(-?[0-9]+)")
# At most 18 significant digits a number, so that none can overflow int64 in the fast path's
# np.fromstring (which saturates silently); longer ones go to the slow scan, which has Python ints.
_LDAC_LINE = re.compile(rb"[ \t]*0*[0-9]{1,18}(?:[ \t]+0*[0-9]{1,18}:0*[0-9]{1,18})*[ \t]*\r?")
_UCI_BYTES = b"0123456789 \t\r\n-"  # any other byte sends the data section to the slow scan
_HEADER = ("the number of documents D", "the vocabulary size W", "the number of entries NNZ")
# Word ids are stored as int32 (Corpus.words), and UCI docIDs and counts are read as int32:
# D, W and every count are at most this, LDA-C word ids less than it.
_INT32_MAX = int(np.iinfo(np.int32).max)
_HEADER_MAX = ((_INT32_MAX, "int32"), (_INT32_MAX, "int32"), (int(np.iinfo(np.int64).max), "int64"))
_CLAMP = 10**30  # a larger magnitude is only ever compared with the limits above; see _int


def read_uci(docword_path, vocab_path=None, name=None) -> Corpus:
    """Read docword.NAME.txt[.gz] (and optionally vocab.NAME.txt); documents sorted longest first."""
    path = Path(docword_path)
    data = _read_bytes(path)
    head = data.split(b"\n", 3)
    if head[-1] == b"":
        head.pop()  # nothing after the final newline
    sizes = []
    for i, what in enumerate(_HEADER):
        field = head[i].strip() if i < len(head) else None
        if field is None or not re.fullmatch(rb"[0-9]+", field):
            got = "end of file" if field is None else _show(head[i])
            raise CorpusError(f"{path}:{i + 1}: expected header line {i + 1} to be {what} (one integer), got {got}")
        size = _int(field)
        limit, dtype = _HEADER_MAX[i]
        if size > limit:
            raise CorpusError(f"{path}:{i + 1}: expected {what} to be at most {limit} ({dtype}), got {_digits(field)}")
        sizes.append(size)
    num_docs, vocab_size, nnz = sizes
    body = head[3] if len(head) > 3 else b""
    del data, head

    entries = _parse_uci_body(body, num_docs, vocab_size, nnz)
    if isinstance(entries, str):
        _scan_uci(path, body, num_docs, vocab_size, nnz)
        raise CorpusError(f"{path}: could not parse the data lines ({entries})")
    doc, word, count = entries
    vocab = read_vocab(vocab_path, vocab_size, path) if vocab_path is not None else None
    return from_entries(name or _uci_name(path), doc - 1, word - 1, count, num_docs, vocab_size, vocab)


def _parse_uci_body(body: bytes, num_docs: int, vocab_size: int, nnz: int):
    """The entry columns (1-based), or a string saying why the fast path gave up."""
    if not body:
        empty = np.zeros(0, dtype=np.int32)
        return (empty, empty, empty) if nnz == 0 else "no data lines"
    if body.translate(None, _UCI_BYTES):
        return "unexpected characters"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # pandas warns, instead of failing, on some malformed lines
            table = pd.read_csv(io.BytesIO(body), sep=r"\s+", header=None, names=["d", "w", "c"],
                                dtype=np.int32, engine="c", index_col=False, skip_blank_lines=False)
    except (ValueError, OverflowError, pd.errors.ParserError, Warning) as exc:
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    doc, word, count = (table[c].to_numpy() for c in "dwc")
    if doc.size != nnz:
        return f"{doc.size} data lines"
    if doc.min() < 1 or doc.max() > num_docs or word.min() < 1 or word.max() > vocab_size or count.min() < 1:
        return "value out of range"
    return doc, word, count


def _scan_uci(path: Path, body: bytes, num_docs: int, vocab_size: int, nnz: int) -> None:
    """Raise CorpusError naming the first bad data line (line numbers count the 3 header lines)."""
    seen = 0
    for lineno, line in enumerate(io.BytesIO(body), start=4):
        if seen == nnz:
            raise CorpusError(f"{path}:{lineno}: expected only NNZ={nnz} data lines (header line 3), "
                              f"got another: {_show(line)}")
        fields = line.split()
        if len(fields) != 3 or not all(_INT.fullmatch(f) for f in fields):
            raise CorpusError(f"{path}:{lineno}: expected 3 integers 'docID wordID count', got {_show(line)}")
        doc, word, count = map(_int, fields)
        if not 1 <= doc <= num_docs:
            raise CorpusError(f"{path}:{lineno}: docID {_digits(fields[0])} out of range 1..{num_docs} "
                              "(D, header line 1)")
        if not 1 <= word <= vocab_size:
            raise CorpusError(f"{path}:{lineno}: wordID {_digits(fields[1])} out of range 1..{vocab_size} "
                              "(W, header line 2)")
        if count < 1:
            raise CorpusError(f"{path}:{lineno}: expected a count of at least 1, got {_digits(fields[2])}")
        if count > _INT32_MAX:
            raise CorpusError(f"{path}:{lineno}: expected a count of at most {_INT32_MAX} (int32), "
                              f"got {_digits(fields[2])}")
        seen += 1
    if seen < nnz:
        raise CorpusError(f"{path}:{4 + seen}: expected NNZ={nnz} data lines (header line 3), "
                          f"but the file ends after {seen}")


def read_vocab(path, expected: int | None = None, docword: Path | None = None) -> tuple[str, ...]:
    """One word per line; with `expected`, the file must have exactly that many lines."""
    path = Path(path)
    data = _read_bytes(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise CorpusError(f"{path}:{line}: expected UTF-8 text ({exc.reason})") from None
    words = text.split("\n")
    if words[-1] == "":
        words.pop()  # the final newline ends the last line; it does not start a new one
    if expected is not None and len(words) != expected:
        source = f"W in header line 2 of {docword.name}" if docword else "the vocabulary size"
        lineno = min(len(words), expected) + 1
        raise CorpusError(f"{path}:{lineno}: expected {expected} lines, one word each ({source}), "
                          f"but the file has {len(words)}")
    return tuple(w.strip() for w in words)


def read_ldac(path, vocab_path=None, name=None) -> Corpus:
    """Read an LDA-C file: one document per line, 'n id:count id:count ...', ids 0-based.

    Without a vocabulary file the vocabulary size is the largest id + 1.
    """
    path = Path(path)
    data = _read_bytes(path)
    vocab = read_vocab(vocab_path) if vocab_path is not None else None
    vocab_size = len(vocab) if vocab is not None else None
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    entries = _parse_ldac(data, lines, vocab_size)
    if isinstance(entries, str):
        _scan_ldac(path, lines, vocab_size)
        raise CorpusError(f"{path}: could not parse the documents ({entries})")
    pairs, per_line = entries
    if vocab_size is None:
        vocab_size = int(pairs[:, 0].max()) + 1 if pairs.size else 0
    doc = np.repeat(np.arange(len(lines)), per_line)
    return from_entries(name or path.stem, doc, pairs[:, 0], pairs[:, 1], len(lines), vocab_size, vocab)


def _parse_ldac(data: bytes, lines: list[bytes], vocab_size: int | None):
    """(pairs as an (NNZ, 2) array, pairs per line), or a string saying why the fast path gave up."""
    if not all(_LDAC_LINE.fullmatch(line) for line in lines):
        return "malformed line"
    per_line = np.array([line.count(b":") for line in lines], dtype=np.int64)
    # Every line is well formed, so the flat list of integers is n, id, count, id, count, ... per line.
    flat = np.fromstring(data.replace(b":", b" "), dtype=np.int64, sep=" ") if lines else np.zeros(0, np.int64)
    starts = np.cumsum(1 + 2 * per_line) - (1 + 2 * per_line)
    if not np.array_equal(flat[starts], per_line):
        return "n does not match the pairs"
    keep = np.ones(flat.size, dtype=bool)
    keep[starts] = False
    pairs = flat[keep].reshape(-1, 2)
    if pairs.size:
        ids, counts = pairs[:, 0], pairs[:, 1]
        id_limit = _INT32_MAX if vocab_size is None else min(vocab_size, _INT32_MAX)
        if ids.max() >= id_limit or counts.min() < 1 or counts.max() > _INT32_MAX:
            return "value out of range"
    return pairs, per_line


def _scan_ldac(path: Path, lines: list[bytes], vocab_size: int | None) -> None:
    """Raise CorpusError naming the first bad line."""
    for lineno, line in enumerate(lines, start=1):
        fields = line.split()
        if not fields or not _INT.fullmatch(fields[0]):
            raise CorpusError(f"{path}:{lineno}: expected a document 'n id:count id:count ...', got {_show(line)}")
        pairs = [_PAIR.fullmatch(f) for f in fields[1:]]
        for field, pair in zip(fields[1:], pairs):
            if not pair:
                raise CorpusError(f"{path}:{lineno}: expected 'id:count' (two integers), got {_show(field)}")
        if _int(fields[0]) != len(pairs):
            raise CorpusError(f"{path}:{lineno}: n={_digits(fields[0])} at the start of the line, "
                              f"but the line has {len(pairs)} id:count pairs")
        for pair in pairs:
            word, count = _int(pair[1]), _int(pair[2])
            shown = _digits(pair[1])
            if word < 0:
                raise CorpusError(f"{path}:{lineno}: expected a word id of at least 0, got {shown}")
            if vocab_size is not None and word >= vocab_size:
                raise CorpusError(f"{path}:{lineno}: word id {shown} out of range 0..{vocab_size - 1} (vocabulary file)")
            if word >= _INT32_MAX:
                raise CorpusError(f"{path}:{lineno}: expected a word id of at most {_INT32_MAX - 1} (word ids are "
                                  f"stored as int32), got {shown}")
            if count < 1:
                raise CorpusError(f"{path}:{lineno}: expected a count of at least 1, got {_digits(pair[2])} "
                                  f"for word id {shown}")
            if count > _INT32_MAX:
                raise CorpusError(f"{path}:{lineno}: expected a count of at most {_INT32_MAX} (int32), "
                                  f"got {_digits(pair[2])} for word id {shown}")


def write_uci(corpus: Corpus, directory, name: str) -> tuple[Path, Path]:
    """Write docword.NAME.txt (gzip-compressed as docword.NAME.txt.gz when name ends in '.gz') and vocab.NAME.txt.

    Entries are sorted by (docID, wordID), as UCI's files are. A corpus without a vocabulary
    gets placeholder words 'word<id>'.
    """
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise CorpusError(f"{directory}: not a directory; give a directory (new or existing) for the "
                          "docword and vocab files")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CorpusError(f"{directory}: not a directory, and it cannot be created ({exc.strerror or exc})") from None
    compress = name.endswith(".gz")
    stem = name.removesuffix(".gz")
    docword_path = directory / f"docword.{stem}.txt{'.gz' if compress else ''}"
    vocab_path = directory / f"vocab.{stem}.txt"

    v = max(corpus.vocab_size, 1)
    doc = np.repeat(np.arange(corpus.num_docs, dtype=np.int64), corpus.lengths)
    keys, counts = np.unique(doc * v + corpus.words, return_counts=True)
    table = pd.DataFrame({"d": keys // v + 1, "w": keys % v + 1, "c": counts})
    header = f"{corpus.num_docs}\n{corpus.vocab_size}\n{len(keys)}\n"
    words = corpus.vocab if corpus.vocab is not None else [f"word{i}" for i in range(corpus.vocab_size)]
    path = docword_path
    try:
        # mtime=0 keeps the gzip bytes reproducible.
        raw = gzip.GzipFile(docword_path, "wb", compresslevel=6, mtime=0) if compress else open(docword_path, "wb")
        with io.TextIOWrapper(raw, encoding="ascii", newline="\n") as out:
            out.write(header)
            table.to_csv(out, sep=" ", header=False, index=False, lineterminator="\n")
        path = vocab_path
        vocab_path.write_text("".join(f"{w}\n" for w in words), encoding="utf-8")
    except OSError as exc:
        raise CorpusError(f"{path}: cannot write the file ({exc.strerror or exc})") from None
    return docword_path, vocab_path


def _read_bytes(path: Path) -> bytes:
    """The file's bytes, decompressed when the name ends in .gz."""
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as f:
                return f.read()
        return path.read_bytes()
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise CorpusError(f"{path}: truncated or corrupt gzip ({exc}); fetch or copy the file again") from None
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read the file ({exc.strerror or exc})") from None


def _uci_name(path: Path) -> str:
    """docword.kos.txt.gz -> kos."""
    name = path.name.removesuffix(".gz").removesuffix(".txt")
    return name.removeprefix("docword.")


def _int(field: bytes) -> int:
    """An integer field (matched by _INT) as an int, its magnitude clamped to _CLAMP.

    Clamping keeps int() away from Python's limit on the digits it converts; a clamped value
    lies beyond every limit it is checked against, so it is reported, never used.
    """
    digits = field.lstrip(b"-").lstrip(b"0")
    if len(digits) < len(str(_CLAMP)):
        return int(field)
    return -_CLAMP if field.startswith(b"-") else _CLAMP


def _digits(field: bytes) -> str:
    """An integer field as written in the file, shortened to keep a message on one line."""
    text = field.decode("ascii", "replace").strip()
    return text if len(text) <= 24 else f"{text[:12]}...{text[-4:]} ({len(text)} characters)"


def _show(text: bytes) -> str:
    """A bad line as it appears in the file, shortened to keep messages on one line."""
    text = text.rstrip(b"\r\n").decode("utf-8", "replace")
    return repr(text if len(text) <= 60 else text[:57] + "...")
