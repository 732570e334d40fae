"""The synthetic corpora generated with the GPU doing the per-token searches and sorts are
byte for byte the ones the CPU generates (needs CuPy and a GPU)."""

import numpy as np
import pytest

from bench.corpus.entries import entry
from bench.corpus.synth import generate, targets

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")


@pytest.mark.parametrize("name, scale", [("tiny", 1.0), ("nytimes-synth", 0.01), ("pubmed-synth", 0.003)])
def test_the_gpu_generates_the_cpus_bytes(name, scale):
    item = entry(name)
    t = targets(item, scale)
    on_cpu, on_gpu = (generate(name, t, item.get("seed", 0), xp) for xp in (np, cupy))
    for field in ("doc_ptr", "words", "true_theta", "true_phi"):
        expected, got = getattr(on_cpu, field), getattr(on_gpu, field)
        assert isinstance(got, np.ndarray) and got.dtype == expected.dtype, field
        np.testing.assert_array_equal(got, expected, err_msg=field)
