import pytest

from bench.errors import BenchError
from bench.kspec import parse_k, parse_list


def test_paper_grid_is_step_four():
    ks = parse_k("4..1024")
    assert ks[:3] == [4, 8, 12] and ks[-1] == 1024 and len(ks) == 256


@pytest.mark.parametrize("spec, expected", [
    ("480..544:1", list(range(480, 545))),
    ("16,48,80", [16, 48, 80]),
    ("4..12,100,8", [4, 8, 12, 100]),
    ("7", [7]),
    ("1..3:1, 10..20:5", [1, 2, 3, 10, 15, 20]),
])
def test_specs(spec, expected):
    assert parse_k(spec) == expected


@pytest.mark.parametrize("spec", ["", "abc", "4..", "..8", "8..4", "4..8:0", "0", "4-8", "1.5"])
def test_bad_specs_name_the_spec(spec):
    with pytest.raises(BenchError, match="bad K spec"):
        parse_k(spec)


def test_choice_lists():
    assert parse_list("f32,f64,f32", ["f32", "f64"], "precision") == ["f32", "f64"]
    with pytest.raises(BenchError, match="unknown variant 'alg9'; known: alg1, alg7"):
        parse_list("alg9", ["alg1", "alg7"], "variant")
