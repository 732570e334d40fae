import pytest

from bench.errors import BenchError
from bench.specs import parse_choices, parse_floats, parse_ints


def test_paper_grid_is_step_four():
    ks = parse_ints("4..1024", "K", default_step=4)
    assert ks[:3] == [4, 8, 12] and ks[-1] == 1024 and len(ks) == 256


@pytest.mark.parametrize("spec, expected", [
    ("480..544:1", list(range(480, 545))),
    ("16,48,80", [16, 48, 80]),
    ("4..12:4,100,8", [4, 8, 12, 100]),
    ("7", [7]),
    ("1..3:1, 10..20:5", [1, 2, 3, 10, 15, 20]),
    ("16..4096:*2", [16, 32, 64, 128, 256, 512, 1024, 2048, 4096]),
    ("16..100:*3", [16, 48]),
    ("2^3..2^6", [8, 16, 32, 64]),
    ("2^0..2^1,10^2..10^3", [1, 2, 100, 1000]),
])
def test_specs(spec, expected):
    assert parse_ints(spec, "K") == expected


@pytest.mark.parametrize("spec", ["", "abc", "4..", "..8", "8..4", "4..8:0", "0", "4-8", "1.5", "4..8:*1",
                                  "0..8:*2", "2^3..3^4", "2^5..2^3", "1^1..1^4", "1,,2", "4,"])
def test_bad_specs_name_the_spec(spec):
    with pytest.raises(BenchError, match="bad K spec|empty spec|bad spec .*empty value"):
        parse_ints(spec, "K")


def test_whole_warps():
    assert parse_ints("0,32..96:32", "threads", minimum=0, multiple_of=32) == [0, 32, 64, 96]
    with pytest.raises(BenchError, match="bad threads spec '48': threads must be a multiple of 32"):
        parse_ints("48", "threads", multiple_of=32)


def test_floats_and_choices():
    assert parse_floats("0.5,1", "scale", 0, 1) == [0.5, 1.0]
    with pytest.raises(BenchError, match="bad scale 2: must be in"):
        parse_floats("2", "scale", 0, 1)
    with pytest.raises(BenchError, match="'x' is not a number"):
        parse_floats("x", "scale")
    assert parse_choices("f32,f64,f32", ["f32", "f64"], "precision") == ["f32", "f64"]
    with pytest.raises(BenchError, match="unknown variant 'alg9'; known: alg1, alg7"):
        parse_choices("alg9", ["alg1", "alg7"], "variant")
