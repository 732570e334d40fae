"""Tests of bench.corpus: readers, writer, synthetic generator, catalogue resolution."""

import ast
import gzip
import hashlib
import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.corpus import (Corpus, CorpusError, catalogue, fetch, load_corpus, locate, read_ldac, read_uci,
                          synthesize, write_uci)
from bench.corpus import entries, synth

catalogue_module = importlib.import_module("bench.corpus.catalogue")  # the name bench.corpus.catalogue is the function


def docs_of(corpus):
    return [corpus.words[a:b].tolist() for a, b in zip(corpus.doc_ptr[:-1], corpus.doc_ptr[1:])]


def assert_sorted_longest_first(corpus):
    assert np.all(np.diff(corpus.lengths) <= 0)


def assert_same_corpus(a, b):
    assert a.vocab_size == b.vocab_size
    np.testing.assert_array_equal(a.doc_ptr, b.doc_ptr)
    np.testing.assert_array_equal(a.words, b.words)


# ---------------------------------------------------------------- UCI and LDA-C


@pytest.mark.parametrize("name", ["tiny", "tiny.gz"])
def test_uci_round_trip_of_synthetic_corpus_is_exact(tmp_path, name):
    corpus = synthesize("tiny")
    docword, vocab = write_uci(corpus, tmp_path, name)
    assert docword.name == ("docword.tiny.txt.gz" if name.endswith(".gz") else "docword.tiny.txt")
    assert vocab.name == "vocab.tiny.txt"
    back = read_uci(docword, vocab)
    assert back.name == "tiny"
    assert_same_corpus(back, corpus)  # synthetic tokens are sorted by word id within a document, as UCI's are
    assert back.nnz == corpus.nnz
    assert len(back.vocab) == corpus.vocab_size


def test_write_uci_is_sorted_by_doc_and_word_with_vocab(tmp_path):
    corpus = Corpus("c", np.array([0, 3, 4, 4]), np.array([2, 0, 2, 1]), 3, ("a", "b", "c"))
    docword, vocab = write_uci(corpus, tmp_path, "c")
    assert docword.read_text() == "3\n3\n3\n1 1 1\n1 3 2\n2 2 1\n"
    assert vocab.read_text() == "a\nb\nc\n"
    back = read_uci(docword, vocab)
    assert docs_of(back) == [[0, 2, 2], [1], []]
    assert back.vocab == ("a", "b", "c")
    assert back.stats()["empty_documents"] == 1


@st.composite
def small_corpora(draw):
    vocab_size = draw(st.integers(1, 30))
    docs = draw(st.lists(st.lists(st.integers(0, vocab_size - 1), max_size=12), max_size=15))
    lengths = [len(d) for d in docs]
    doc_ptr = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
    words = np.array([w for d in docs for w in d], dtype=np.int32)
    return Corpus("h", doc_ptr, words, vocab_size), docs


@settings(max_examples=40, deadline=None)
@given(small_corpora(), st.booleans())
def test_uci_round_trip_of_random_corpora(tmp_path_factory, corpus_and_docs, compress):
    corpus, docs = corpus_and_docs
    directory = tmp_path_factory.mktemp("rt")
    docword, vocab = write_uci(corpus, directory, "h.gz" if compress else "h")
    back = read_uci(docword, vocab)
    # Documents come back longest first (ties in order), each one's tokens sorted by word id.
    expected = sorted((sorted(d) for d in docs), key=len, reverse=True)
    assert docs_of(back) == expected
    assert back.vocab_size == corpus.vocab_size
    assert back.nnz == corpus.nnz
    assert_sorted_longest_first(back)


def test_read_uci_sorts_longest_first_and_keeps_file_order(tmp_path):
    path = tmp_path / "docword.x.txt"
    # doc 1: 2 tokens, doc 2: 3 tokens (entries out of word order), doc 3: 2 tokens, doc 4: empty.
    path.write_text("4\n9\n5\n1 5 1\n1 2 1\n2 9 1\n2 1 2\n3 3 2\n")
    corpus = read_uci(path)
    assert corpus.name == "x"
    assert docs_of(corpus) == [[8, 0, 0], [4, 1], [2, 2], []]
    assert corpus.vocab is None


def test_read_ldac(tmp_path):
    path = tmp_path / "r.ldac"
    path.write_text("2 0:1 3:2\n0\n1 2:5\n")
    corpus = read_ldac(path)
    assert corpus.name == "r"
    assert corpus.vocab_size == 4  # largest id + 1 without a vocabulary
    assert docs_of(corpus) == [[2] * 5, [0, 3, 3], []]
    (tmp_path / "r.tokens").write_text("a\nb\nc\nd\ne\n")
    with_vocab = load_corpus(str(path))  # finds r.tokens beside it
    assert with_vocab.vocab == ("a", "b", "c", "d", "e")
    assert with_vocab.vocab_size == 5


# ---------------------------------------------------------------- malformed input

UCI_BAD = [
    ("3\nx\n5\n", 2, "header line 2"),
    ("3\n5\n", 3, "end of file"),
    ("", 1, "header line 1"),
    ("2\n5\n3\n1 1 1\n1 2 1\n", 6, "NNZ=3"),
    ("2\n5\n2\n1 1 1\n1 2 1\n2 1 1\n", 6, "only NNZ=2"),
    ("2\n5\n2\n1 1 1\n3 2 1\n", 5, "docID 3 out of range"),
    ("2\n5\n2\n0 1 1\n2 2 1\n", 4, "docID 0 out of range"),
    ("2\n5\n2\n1 1 1\n2 6 1\n", 5, "wordID 6 out of range"),
    ("2\n5\n2\n1 1 0\n2 2 1\n", 4, "count of at least 1"),
    ("2\n5\n2\n1 1 1\n2 2 -1\n", 5, "count of at least 1"),
    ("2\n5\n2\n1 1 1\na b c\n", 5, "expected 3 integers"),
    ("2\n5\n2\n1 1 1\n2 2 1.0\n", 5, "expected 3 integers"),
    ("2\n5\n2\n1 1 1\n2 2 1e3\n", 5, "expected 3 integers"),
    ("2\n5\n2\n1 1\n2 2 1\n", 4, "expected 3 integers"),
    ("2\n5\n2\n1 1 1 1\n2 2 1\n", 4, "expected 3 integers"),
    ("2\n5\n2\n1 1 1\n\n2 2 1\n", 5, "expected 3 integers"),
    # Numbers too large for int32 or int64, which the fast path's int32 columns cannot hold.
    ("2\n5\n2\n1 1 1\n2 99999999999999999999 1\n", 5, "wordID 99999999999999999999 out of range 1..5"),
    ("2\n5\n2\n1 1 1\n2 3000000000 1\n", 5, "wordID 3000000000 out of range 1..5"),
    ("2\n5\n2\n1 1 1\n99999999999999999999 2 1\n", 5, "docID 99999999999999999999 out of range 1..2"),
    ("2\n5\n2\n1 1 1\n-99999999999999999999 2 1\n", 5, "docID -99999999999999999999 out of range"),
    ("2\n5\n2\n1 1 99999999999999999999\n2 2 1\n", 4, "count of at most 2147483647"),
    ("2\n5\n2\n1 1 1\n2 2 3000000000\n", 5, "count of at most 2147483647"),
    ("2\n5\n2\n1 1 1\n2 2 " + "9" * 5000 + "\n", 5, "count of at most 2147483647"),  # beyond int()'s digits
    ("99999999999999999999\n5\n0\n", 1, "documents D to be at most 2147483647"),
    ("1099511627776\n5\n0\n", 1, "documents D to be at most 2147483647"),  # would allocate 8 TiB
    ("2\n99999999999999999999\n1\n1 1 1\n", 2, "vocabulary size W to be at most 2147483647"),
    ("2\n3000000000\n1\n1 2999999999 1\n", 2, "vocabulary size W to be at most 2147483647"),
    ("2\n5\n99999999999999999999\n1 1 1\n", 3, "NNZ to be at most 9223372036854775807"),
]


def assert_one_line_error(excinfo, filename, line, fragment):
    message = str(excinfo.value)
    assert "\n" not in message
    assert f"{filename}:{line}:" in message
    assert fragment in message


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("text,line,fragment", UCI_BAD)
def test_malformed_uci_names_file_and_line(tmp_path, text, line, fragment, gz):
    path = tmp_path / f"docword.bad.txt{'.gz' if gz else ''}"
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    with pytest.raises(CorpusError) as excinfo:
        read_uci(path)
    assert_one_line_error(excinfo, path.name, line, fragment)


def test_bad_line_far_into_a_large_file(tmp_path):
    lines = [f"{d} {w} 1" for d in range(1, 1001) for w in range(1, 51)]
    lines[31_234] = "7 8 x"
    path = tmp_path / "docword.big.txt"
    path.write_text(f"1000\n50\n{len(lines)}\n" + "\n".join(lines) + "\n")
    with pytest.raises(CorpusError) as excinfo:
        read_uci(path)
    assert_one_line_error(excinfo, path.name, 31_234 + 4, "'7 8 x'")


@pytest.mark.parametrize("vocab_text,line", [("a\nb\n", 3), ("a\nb\nc\nd\n", 4), ("", 1)])
def test_vocab_with_wrong_number_of_lines(tmp_path, vocab_text, line):
    docword = tmp_path / "docword.v.txt"
    docword.write_text("1\n3\n1\n1 3 1\n")
    vocab = tmp_path / "vocab.v.txt"
    vocab.write_text(vocab_text)
    with pytest.raises(CorpusError) as excinfo:
        read_uci(docword, vocab)
    assert_one_line_error(excinfo, vocab.name, line, "expected 3 lines")


def test_truncated_gzip(tmp_path):
    data = gzip.compress(("3\n5\n2\n1 1 1\n2 2 3\n" * 2000).encode())
    path = tmp_path / "docword.t.txt.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorpusError, match=r"docword\.t\.txt\.gz: truncated or corrupt gzip") as excinfo:
        read_uci(path)
    assert "\n" not in str(excinfo.value)


LDAC_BAD = [
    ("2 0:1\n", 1, "n=2"),
    ("1 0:1\n3 0:1 1:1\n", 2, "n=3"),
    ("1 0-1\n", 1, "expected 'id:count'"),
    ("1 0:1:2\n", 1, "expected 'id:count'"),
    ("1 0:1\n1 2:0\n", 2, "count of at least 1"),
    ("1 0:1\n\n1 1:1\n", 2, "expected a document"),
    ("x 0:1\n", 1, "expected a document"),
    ("1 -1:2\n", 1, "word id of at least 0"),
    ("1 0:1\n1 5\n", 2, "expected 'id:count'"),  # no colon
    ("1 0:1\n1 5:-3\n", 2, "count of at least 1, got -3 for word id 5"),
    ("1 5:0\n", 1, "count of at least 1, got 0"),
    # Word ids and counts beyond int64, beyond anything sensible, or just beyond int32.
    ("1 0:1\n1 99999999999999999999:1\n", 2, "word id of at most 2147483646"),
    ("1 1099511627776:1\n", 1, "word id of at most 2147483646"),
    ("1 3000000000:1\n", 1, "word id of at most 2147483646"),
    ("1 2147483647:1\n", 1, "stored as int32), got 2147483647"),
    ("1 -99999999999999999999:1\n", 1, "word id of at least 0"),
    ("1 " + "9" * 5000 + ":1\n", 1, "word id of at most 2147483646"),  # beyond int()'s digits
    ("1 0:1\n1 5:99999999999999999999\n", 2, "count of at most 2147483647"),
    ("1 5:3000000000\n", 1, "count of at most 2147483647"),
    ("99999999999999999999 5:1\n", 1, "n=99999999999999999999"),
]


@pytest.mark.parametrize("text,line,fragment", LDAC_BAD)
def test_malformed_ldac_names_file_and_line(tmp_path, text, line, fragment):
    path = tmp_path / "bad.ldac"
    path.write_text(text)
    with pytest.raises(CorpusError) as excinfo:
        read_ldac(path)
    assert_one_line_error(excinfo, path.name, line, fragment)


def test_ldac_accepts_the_largest_int32_word_id_and_leading_zeros(tmp_path):
    path = tmp_path / "edge.ldac"
    path.write_text("1 2147483646:1\n1 " + "0" * 40 + "3:" + "0" * 40 + "2\n")
    corpus = read_ldac(path)
    assert corpus.vocab_size == 2**31 - 1
    assert docs_of(corpus) == [[3, 3], [2**31 - 2]]


@pytest.mark.parametrize("text, word", [("1 0:1\n1 3000000000:1\n", 3000000000),  # beyond int32 too
                                        ("1 0:1\n2 1:1 2:1\n", 2)])
def test_ldac_word_id_beyond_vocabulary(tmp_path, text, word):
    path = tmp_path / "bad.ldac"
    path.write_text(text)
    vocab = tmp_path / "bad.tokens"
    vocab.write_text("a\nb\n")
    with pytest.raises(CorpusError) as excinfo:
        read_ldac(path, vocab)
    assert_one_line_error(excinfo, path.name, 2, f"word id {word} out of range 0..1")


# ---------------------------------------------------------------- writing


def test_write_uci_to_an_existing_file_says_not_a_directory(tmp_path):
    target = tmp_path / "taken"
    target.write_text("keep me\n")
    with pytest.raises(CorpusError) as excinfo:
        write_uci(synthesize("tiny"), target, "tiny")
    message = str(excinfo.value)
    assert "\n" not in message
    assert message.startswith(f"{target}: not a directory")
    assert target.read_text() == "keep me\n"


def test_write_uci_to_a_directory_that_cannot_be_created(tmp_path):
    (tmp_path / "file").write_text("")
    target = tmp_path / "file" / "sub"
    with pytest.raises(CorpusError) as excinfo:
        write_uci(synthesize("tiny"), target, "tiny")
    message = str(excinfo.value)
    assert "\n" not in message
    assert message.startswith(f"{target}: not a directory, and it cannot be created")


def test_cli_synth_out_to_an_existing_file_is_a_one_line_error(tmp_path):
    target = tmp_path / "taken"
    target.write_text("")
    result = subprocess.run([sys.executable, "-m", "bench", "data", "synth", "tiny", "--out", str(target)],
                            capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == CorpusError.exit_code == 2
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "not a directory" in lines[0], result.stderr


# ---------------------------------------------------------------- module structure


def test_corpus_modules_import_each_other_only_at_top_level_and_without_a_cycle():
    """No import of a bench.corpus module inside a function (a dodge of an import cycle), and no cycle."""
    package = Path(catalogue_module.__file__).parent
    graph = {}
    for path in sorted(package.glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        top = set(tree.body)
        graph[path.stem] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                targets = [node.module] if node.module else [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bench.corpus"):
                targets = [node.module.removeprefix("bench.corpus").lstrip(".") or "__init__"]
            elif isinstance(node, ast.Import):
                targets = [a.name.removeprefix("bench.corpus.") for a in node.names if a.name.startswith("bench.corpus")]
            else:
                continue
            for target in targets:
                assert node in top, f"{path.name}:{node.lineno}: imports {target} inside a function or block"
                graph[path.stem].add(target.split(".")[0])

    done, active = set(), []

    def visit(module):
        assert module not in active, f"import cycle: {' -> '.join(active[active.index(module):] + [module])}"
        if module in done or module == "__init__":
            return
        active.append(module)
        for target in sorted(graph.get(module, ())):
            visit(target)
        active.pop()
        done.add(module)

    for module in graph:
        visit(module)
    assert "catalogue" not in graph["synth"]


def test_synth_imports_on_its_own():
    code = "import bench.corpus.synth as s; print(s.synthesize('tiny').num_docs)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(catalogue()["tiny"]["documents"])


# ---------------------------------------------------------------- real corpora and the catalogue


@pytest.mark.real_corpus("kos")
def test_kos_matches_published_statistics():
    corpus = load_corpus("kos")
    stats = corpus.stats()
    assert {name: stats.pop(name) for name in ("length_cv", "zipf_exponent")} == pytest.approx(
        {"length_cv": 0.7098, "zipf_exponent": 0.6369}, abs=1e-4)
    assert stats.pop("tokens_per_pair") == pytest.approx(467714 / 353160)  # UCI's nnz: the distinct pairs
    assert stats == {
        "documents": 3430, "vocabulary": 6906, "tokens": 467714, "nnz": 353160,
        "mean_length": 467714 / 3430, "max_length": 670, "empty_documents": 0,
    }
    assert len(corpus.vocab) == 6906
    assert corpus.lengths.min() == 25
    assert_sorted_longest_first(corpus)
    entry = catalogue()["kos"]
    assert (entry["documents"], entry["vocabulary"], entry["tokens"], entry["nnz"]) == (3430, 6906, 467714, 353160)


@pytest.mark.real_corpus("kos")
def test_load_corpus_from_directory_and_path(tmp_path):
    for f in ("docword.kos.txt.gz", "vocab.kos.txt"):
        shutil.copy(locate("kos") / f, tmp_path / f)
    from_dir = load_corpus(str(tmp_path))
    from_file = load_corpus(str(tmp_path / "docword.kos.txt.gz"))
    assert from_dir.name == from_file.name == "kos"
    assert from_dir.vocab is not None
    assert_same_corpus(from_dir, from_file)


def test_checksum_mismatch_is_refused(tmp_path, monkeypatch):
    (tmp_path / "docword.kos.txt.gz").write_bytes(gzip.compress(b"1\n1\n1\n1 1 1\n"))
    (tmp_path / "vocab.kos.txt").write_text("a\n")
    monkeypatch.setattr(entries, "CACHE_DIR", tmp_path / "empty-cache")
    monkeypatch.setenv("BENCH_DATA_PATH", str(tmp_path))
    with pytest.raises(CorpusError, match="sha256 .* differs from the catalogue's"):
        fetch("kos")


# ---------------------------------------------------------------- finding and downloading real corpora


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache, no BENCH_DATA_PATH, and pooch.retrieve copying from tmp_path/"server"
    (the calls it got in .calls)."""
    pytest.importorskip("pooch")  # the GPU machines have none
    directory = tmp_path / "cache"
    server = tmp_path / "server"
    server.mkdir()
    monkeypatch.setattr(entries, "CACHE_DIR", directory)
    monkeypatch.delenv("BENCH_DATA_PATH", raising=False)
    calls = []

    def retrieve(url, known_hash, fname, path, progressbar):
        calls.append((url, known_hash))
        source = server / url.rsplit("/", 1)[1]
        if not source.exists():
            raise ValueError(f"404 Client Error: Not Found for url: {url}")
        target = Path(path) / fname
        if not target.exists():
            shutil.copy(source, target)
        return str(target)

    monkeypatch.setattr("pooch.retrieve", retrieve)
    return directory, server, calls


def serve_uci(server, name, header, vocabulary, body=b"1 1 1\n"):
    """A docword file with the given header (D, W, NNZ) and a short body, and a vocab file."""
    (server / f"docword.{name}.txt.gz").write_bytes(gzip.compress("\n".join(map(str, header)).encode() + b"\n" + body))
    (server / f"vocab.{name}.txt").write_text("".join(f"w{i}\n" for i in range(vocabulary)))


def test_search_path_is_the_cache_then_bench_data_path(tmp_path, monkeypatch):
    monkeypatch.setattr(entries, "CACHE_DIR", tmp_path / "cache")
    monkeypatch.setenv("BENCH_DATA_PATH", f"{tmp_path / 'a'}{os.pathsep}{os.pathsep}{tmp_path / 'b'}")
    (tmp_path / "a").mkdir()
    with pytest.raises(CorpusError, match=f"^BENCH_DATA_PATH: {tmp_path / 'b'} is not a directory$"):
        locate("kos")  # a typo must not read as "not here" and start a download
    (tmp_path / "b").mkdir()
    assert catalogue_module.search_path() == [tmp_path / "cache", tmp_path / "a", tmp_path / "b"]
    assert locate("kos") is None
    for f in ("docword.kos.txt.gz", "vocab.kos.txt"):
        (tmp_path / "b" / f).write_bytes(b"")
    assert locate("kos") == tmp_path / "b"  # found, not read
    assert "shared" not in Path(catalogue_module.__file__).read_text()  # nothing beside the checkout is searched


def test_the_cache_is_under_the_current_directory_or_bench_cache(tmp_path):
    code = "from bench.corpus import entries; print(entries.CACHE_DIR.absolute())"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    env.pop("BENCH_CACHE", None)
    here = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert here.stdout.strip() == str(tmp_path / "datasets" / "cache"), here.stderr
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                           env={**env, "BENCH_CACHE": str(tmp_path / "elsewhere")})
    assert there.stdout.strip() == str(tmp_path / "elsewhere"), there.stderr


def test_a_download_with_a_known_hash_is_handed_to_pooch_with_it(cache):
    directory, server, calls = cache
    serve_uci(server, "kos", (3430, 6906, 353160), 6906)
    assert fetch("kos") == directory
    item = catalogue()["kos"]
    assert calls == [(item["docword_url"], f"sha256:{item['docword_sha256']}"),
                     (item["vocab_url"], f"sha256:{item['vocab_sha256']}")]
    assert not list(directory.glob("*.sha256"))  # the catalogue holds these hashes


def test_a_download_without_a_known_hash_is_checked_by_its_header_and_its_sha256_recorded(cache):
    directory, server, calls = cache
    item = catalogue()["enron"]
    assert not item["docword_sha256"] and not item["vocab_sha256"]
    serve_uci(server, "enron", (item["documents"], item["vocabulary"], item["nnz"]), item["vocabulary"])
    assert fetch("enron") == locate("enron") == directory
    assert [known for _, known in calls] == [None, None]
    for role in ("docword", "vocab"):
        record = directory / f"{item[role]}.sha256"
        digest = hashlib.sha256((directory / item[role]).read_bytes()).hexdigest()
        assert record.read_text() == f"{digest}  {item[role]}\n"  # sha256sum -c reads it
    calls.clear()
    assert fetch("enron") == directory and calls == []  # found in the cache: nothing downloaded


def test_the_recorded_sha256_is_checked_on_the_next_use(cache):
    directory, server, calls = cache
    item = catalogue()["enron"]
    serve_uci(server, "enron", (item["documents"], item["vocabulary"], item["nnz"]), item["vocabulary"])
    fetch("enron")
    docword = directory / item["docword"]
    # The same header (the counts agree), another body: only the recorded sha256 can tell.
    docword.write_bytes(gzip.compress(f"{item['documents']}\n{item['vocabulary']}\n{item['nnz']}\n2 2 2\n".encode()))
    with pytest.raises(CorpusError, match=r"sha256 .* differs from the one recorded in docword.enron.txt.gz.sha256"):
        fetch("enron")
    with pytest.raises(CorpusError, match="differs from the one recorded"):
        load_corpus("enron")


def test_a_download_whose_header_differs_from_the_catalogue_is_refused_and_deleted(cache):
    directory, server, calls = cache
    item = catalogue()["nytimes"]
    serve_uci(server, "nytimes", (item["documents"], item["vocabulary"], item["nnz"] + 1), item["vocabulary"])
    with pytest.raises(CorpusError) as excinfo:
        fetch("nytimes")
    message = str(excinfo.value)
    assert "\n" not in message
    assert f"header D, W, NNZ = 300000, 102660, {item['nnz'] + 1}" in message
    assert f"the catalogue's are 300000, 102660, {item['nnz']}" in message
    assert not (directory / item["docword"]).exists() and not list(directory.glob("*.sha256"))
    assert locate("nytimes") is None


def test_a_vocab_with_another_number_of_words_is_refused(cache):
    directory, server, calls = cache
    item = catalogue()["enron"]
    serve_uci(server, "enron", (item["documents"], item["vocabulary"], item["nnz"]), item["vocabulary"] - 1)
    with pytest.raises(CorpusError, match=f"{item['vocabulary'] - 1} lines, the catalogue's vocabulary has"):
        fetch("enron")


def test_files_without_a_hash_on_bench_data_path_are_checked_by_their_counts(cache, tmp_path, monkeypatch):
    directory, server, calls = cache
    item = catalogue()["enron"]
    serve_uci(server, "enron", (item["documents"], 1, item["nnz"]), item["vocabulary"])
    monkeypatch.setenv("BENCH_DATA_PATH", str(server))
    with pytest.raises(CorpusError, match=r"docword.enron.txt.gz: header D, W, NNZ = 39861, 1, "):
        fetch("enron")
    serve_uci(server, "enron", (item["documents"], item["vocabulary"], item["nnz"]), item["vocabulary"])
    assert fetch("enron") == server and calls == []
    assert not list(server.glob("*.sha256"))  # BENCH_DATA_PATH is read, never written


def test_a_failed_download_is_one_line_saying_where_to_put_the_files(cache):
    directory, server, calls = cache
    with pytest.raises(CorpusError) as excinfo:
        fetch("pubmed")  # not on the server: 404
    message = str(excinfo.value)
    assert "\n" not in message
    assert message.startswith("pubmed: could not download https://archive.ics.uci.edu/")
    assert "404" in message
    assert (f"docword.pubmed.txt.gz and vocab.pubmed.txt from https://archive.ics.uci.edu/ml/machine-learning-databases/"
            f"bag-of-words/ yourself and put them in {directory} or a directory on BENCH_DATA_PATH") in message
    assert not directory.exists()  # made for the download: not left behind empty


def test_a_network_error_is_cut_short_and_the_advice_kept_whole(cache, monkeypatch):
    directory, _, _ = cache

    def unreachable(url, **_):
        raise ConnectionError("HTTPSConnectionPool(host='archive.ics.uci.edu', port=443): Max retries exceeded "
                              + "caused by NameResolutionError(...) " * 20)

    monkeypatch.setattr("pooch.retrieve", unreachable)
    with pytest.raises(CorpusError) as excinfo:
        fetch("kos")
    message = str(excinfo.value)
    assert "(ConnectionError: HTTPSConnectionPool(host='archive.ics.uci.edu'" in message and "...)" in message
    cause = message.split(f"into {directory} (", 1)[1].split("); download", 1)[0]
    assert len(cause) < 200 and message.endswith(f"put them in {directory} or a directory on BENCH_DATA_PATH")


def test_unknown_name_and_scaled_real_corpus():
    with pytest.raises(CorpusError, match=r"unknown dataset 'xyz'.*known: kos, nips, enron, nytimes, pubmed"):
        load_corpus("xyz")
    with pytest.raises(CorpusError, match="scale"):
        load_corpus("kos", scale=0.5)


def test_catalogue_entries_are_complete():
    entries = catalogue()
    assert {"kos", "nips", "enron", "nytimes", "pubmed", "wiki-synth", "nytimes-synth", "pubmed-synth",
            "clueweb-synth", "tiny"} <= set(entries)
    for name, entry in entries.items():
        assert {"kind", "description", "source", "documents", "vocabulary"} <= set(entry), name
        if entry["kind"] == "uci":
            for role in ("docword", "vocab"):
                assert entry[f"{role}_url"].endswith("/bag-of-words/" + entry[role])
                assert len(entry[f"{role}_sha256"]) in (0, 64)
        else:
            assert {"tokens", "max_length"} <= set(entry)
            if "imitates" in entry:
                assert set(synth.CALIBRATED) <= set(entries[entry["imitates"]]["structure"]) | set(entry)
            else:
                assert set(synth.FIRST) <= set(entry)


# ---------------------------------------------------------------- synthetic corpora


def test_clueweb_synth_has_the_papers_vocabulary_and_mean_length_and_two_billion_tokens():
    entry = catalogue()["clueweb-synth"]
    assert (entry["vocabulary"], entry["tokens"]) == (100_000, 2_000_000_000)
    corpus = synthesize("clueweb-synth", scale=1e-5)  # 55 documents, 20,000 tokens
    assert corpus.num_tokens / corpus.num_docs == pytest.approx(365, rel=0.01)


def test_tiny_is_deterministic_and_hits_its_targets():
    a, b = synthesize("tiny"), synthesize("tiny")
    assert_same_corpus(a, b)
    np.testing.assert_array_equal(a.true_theta, b.true_theta)
    np.testing.assert_array_equal(a.true_phi, b.true_phi)
    entry = catalogue()["tiny"]
    assert a.num_docs == entry["documents"]
    assert a.vocab_size == entry["vocabulary"]
    assert a.num_tokens == entry["tokens"]
    assert 1 <= a.lengths.min() and a.max_length <= entry["max_length"]
    assert_sorted_longest_first(a)
    assert a.true_theta.shape == (entry["documents"], entry["topics"])
    assert a.true_phi.shape == (entry["vocabulary"], entry["topics"])
    np.testing.assert_allclose(a.true_theta.sum(axis=1), 1.0)
    np.testing.assert_allclose(a.true_phi.sum(axis=0), 1.0)
    assert np.count_nonzero(np.bincount(a.words, minlength=a.vocab_size)) > 0.8 * a.vocab_size
    assert not np.array_equal(synthesize("tiny", seed=1).words, a.words)


def test_tiny_has_the_same_bytes_everywhere():
    # The same digest came out with numpy 2.4 (Python 3.11) and numpy 2.5 (Python 3.12, GPU host).
    # A change means another numpy, platform or generator version gives other corpora, so results
    # measured on synthetic corpora would no longer be comparable.
    corpus = synthesize("tiny")
    digest = hashlib.sha256(corpus.doc_ptr.tobytes() + corpus.words.tobytes()).hexdigest()
    assert digest == "bc066ad6ad037fbf8ece1d185e78ac214ed3e3b026a63f591a750f972e13161f"


def test_a_calibrated_corpus_has_the_same_bytes_everywhere():
    # kos-synth's topics (the calibrated generator: a permutation per topic) and lengths (its cv).
    corpus = synthesize("kos-synth", 0.05)
    digest = hashlib.sha256(corpus.doc_ptr.tobytes() + corpus.words.tobytes()).hexdigest()
    assert digest == "1617b4f4dacbd99a50fe461801531a95476335777f972510e7e930c317ba8900"


def test_a_bursty_calibrated_corpus_has_the_same_bytes_everywhere():
    corpus = synthesize("nips-synth", 0.02)  # nips's structure: burstiness 0.4
    digest = hashlib.sha256(corpus.doc_ptr.tobytes() + corpus.words.tobytes()).hexdigest()
    assert digest == "9d2e4194ba3751faa04f22f27fe21d7dfaa0182251473b2c0d3ce14236565927"


def test_burstiness_repeats_a_documents_own_words_and_changes_nothing_else():
    """A bursty corpus: the same documents, each using only words its plain twin drew (a
    token repeats an earlier token's word of its document), and more tokens a distinct word."""
    import dataclasses

    t = synth.targets(catalogue()["nips-synth"], 0.02)
    assert t.burstiness == 0.4
    bursty = synth.generate("nips-synth", t, 0, np)
    plain = synth.generate("nips-synth", dataclasses.replace(t, burstiness=0.0), 0, np)
    np.testing.assert_array_equal(bursty.doc_ptr, plain.doc_ptr)
    np.testing.assert_array_equal(bursty.true_phi, plain.true_phi)
    for d in range(bursty.num_docs):
        words = slice(bursty.doc_ptr[d], bursty.doc_ptr[d + 1])
        assert set(bursty.words[words]) <= set(plain.words[words])
        assert bursty.words[words][0] == plain.words[words][0]  # a document's first token repeats nothing
    assert bursty.tokens_per_pair() > 1.1 * plain.tokens_per_pair()  # 6.6 against 5.8 (248 words at this scale)


def test_wiki_synth_at_one_percent_hits_exact_targets():
    corpus = load_corpus("wiki-synth", scale=0.01)
    assert (corpus.num_docs, corpus.vocab_size, corpus.num_tokens) == (436, 373, 30727)
    assert corpus.lengths.min() >= 1 and corpus.max_length <= 307
    assert_sorted_longest_first(corpus)


def test_scaled_down_max_length_stays_feasible():
    t = synth.targets(catalogue()["tiny"], 0.004)  # 1 document, 60 tokens
    assert (t.documents, t.tokens, t.max_length, t.vocabulary) == (1, 60, 150, 16)
    corpus = synthesize("tiny", scale=0.004)
    assert corpus.num_tokens == 60 and corpus.num_docs == 1


def test_large_synthetic_corpora_are_cached(tmp_path, monkeypatch):
    monkeypatch.setattr(synth, "CACHE_MIN_TOKENS", 0)
    monkeypatch.setattr(entries, "CACHE_DIR", tmp_path)
    first = synthesize("tiny")
    (cached,) = (tmp_path / "synth").glob("tiny-scale1-seed0-v*.npz")
    second = synthesize("tiny")
    assert_same_corpus(first, second)
    np.testing.assert_array_equal(first.true_theta, second.true_theta)
    assert cached.exists()


# ---------------------------------------------------------------- padding and held-out split


def test_padded():
    corpus = synthesize("tiny")
    assert corpus.padded(1) is corpus and corpus.padded(300) is corpus
    padded = corpus.padded(64)
    assert padded.num_docs == 320 and padded.num_tokens == corpus.num_tokens
    assert np.all(padded.lengths[300:] == 0)
    np.testing.assert_array_equal(padded.true_theta[:300], corpus.true_theta)
    np.testing.assert_allclose(padded.true_theta[300:], 1 / corpus.true_theta.shape[1])
    assert_sorted_longest_first(padded)


@pytest.mark.parametrize("dropped", [[], [0], [299], [0, 5, 6, 299], [6, 0, 6], list(range(0, 300, 2)), list(range(300))])
def test_without_is_select_of_the_others(dropped):
    corpus = synthesize("tiny")
    kept = np.setdiff1d(np.arange(corpus.num_docs), dropped)
    expected = corpus.select(kept, "kept")
    got = corpus.without(np.array(dropped, dtype=np.int64), "kept")
    assert_same_corpus(got, expected)
    np.testing.assert_array_equal(got.true_theta, expected.true_theta)


def test_nnz_counts_distinct_document_word_pairs():
    corpus = synthesize("tiny")
    pairs = {(d, int(w)) for d, doc in enumerate(docs_of(corpus)) for w in doc}
    assert corpus.nnz == len(pairs)
    assert corpus.select(np.array([], dtype=np.int64), "none").nnz == 0


@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.5, 1.0])
def test_heldout_split_partitions_tokens(fraction):
    corpus = synthesize("tiny")
    split = corpus.heldout_split(fraction, seed=3)
    train, observed, evaluated = split.train, split.observed, split.evaluated
    assert observed.num_docs == evaluated.num_docs == round(fraction * corpus.num_docs)
    assert train.num_docs + observed.num_docs == corpus.num_docs
    held = [sorted(o + e) for o, e in zip(docs_of(observed), docs_of(evaluated))]
    all_docs = sorted(map(sorted, docs_of(corpus)))
    assert sorted(held + [sorted(d) for d in docs_of(train)]) == all_docs
    np.testing.assert_array_equal(observed.lengths, (observed.lengths + evaluated.lengths) // 2)
    for part in (train, observed, evaluated):
        assert_sorted_longest_first(part)
    assert train.true_theta.shape[0] == train.num_docs and observed.true_theta.shape[0] == observed.num_docs
    again = corpus.heldout_split(fraction, seed=3)
    assert_same_corpus(again.observed, observed)
