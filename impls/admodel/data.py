"""Seeded generators of the thesis's two data shapes (its Table 3) and the parameter layout.

An observation is (Y, five covariates, w): advertiser d, impression frequency f, material
m, order r, placement p. The parameters, in one flat vector:

    intercept | D levels | F | M | R | P | MP (M x N) | PM (P x N)

log mu = intercept + th_D[d] + th_F[f] + th_M[m] + th_R[r] + th_P[p] + <th_MP[m], th_PM[p]>.

sim:       2^25 observations, covariates uniform over 5,000 levels each, N = 10: 1 +
           5 x 5,000 + 2 x 10 x 5,000 = 125,001 parameters, all active; intercept -1.5
           (mean mu 0.26: clipping Y at 3 changes 0.01% of the counts); weights 1.
real-like: 13,619,739 observations, level counts giving 1,475,051 parameter slots of
           which 32,601 are active (the thesis: 1,482,799 and 32,587): each class uses a
           random subset of its levels, Zipf-skewed (exponent 1.1); a material appears
           with 1 + Poisson(2) placements only (the sparse allowed pairs); intercept -2
           so that clicks are rare, and zeros kept at rate 1/4 with weight 4 (int16), the
           importance sampling of the thesis's Section 2.2.

Parameters (but the intercept) are drawn from the prior N(0, psi) (psi = 0.05 for every class) and
Y ~ Poisson(mu) clipped to {0..3}. The same (dataset, scale, seed) gives the same bytes
on every machine. Structure of arrays as the thesis: five int32 covariates, int8 Y,
int16 w (23 bytes per observation).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from bench.errors import BenchError

PSI = 0.05  # prior variance of every parameter class
BYTES_PER_OBSERVATION = 5 * 4 + 1 + 2
CLASSES = ("d", "f", "m", "r", "p")  # covariate order in `covariates`
MATERIAL, PLACEMENT = 2, 4
LAYOUTS = ("shuffled", "sorted")
CHUNK = 1 << 22  # observations drawn at a time


@dataclass(frozen=True)
class Shape:
    observations: int  # at scale 1
    levels: tuple[int, int, int, int, int]  # slots per class d, f, m, r, p
    active: tuple[int, int, int, int, int]  # levels that occur in the data
    factors: int  # N, the length of the matrix-factorisation vectors
    zipf: float | None  # None: uniform covariates
    intercept: float  # fixed: sets how rare clicks are
    zero_rate: float  # zeros kept at this rate, with weight 1 / rate

    @property
    def offsets(self) -> np.ndarray:
        """Start of each class in the parameter vector: d, f, m, r, p, MP, PM (int64)."""
        starts = np.cumsum((1, *self.levels, self.levels[MATERIAL] * self.factors))
        return starts.astype(np.int64)

    @property
    def parameters(self) -> int:
        return int(self.offsets[-1] + self.levels[PLACEMENT] * self.factors)

    @property
    def active_parameters(self) -> int:
        return 1 + sum(self.active) + self.factors * (self.active[MATERIAL] + self.active[PLACEMENT])


SHAPES = {
    "sim": Shape(1 << 25, (5000,) * 5, (5000,) * 5, 10, None, -1.5, 1.0),
    "real-like": Shape(13_619_739, (20_000, 50, 90_000, 25_000, 40_000), (4_400, 50, 1_400, 4_500, 750), 10,
                       1.1, -2.0, 0.25),
}


@dataclass
class Data:
    name: str
    shape: Shape
    covariates: np.ndarray  # int32 [5, observations]: d, f, m, r, p
    y: np.ndarray  # int8
    w: np.ndarray  # int16
    theta_true: np.ndarray  # float64 [parameters], zero where inactive
    active: np.ndarray  # bool [parameters]: touched by some observation (or the intercept)

    @property
    def observations(self) -> int:
        return self.y.size

    @property
    def nbytes(self) -> int:
        return self.covariates.nbytes + self.y.nbytes + self.w.nbytes


def observations(dataset: str, scale: float) -> int:
    return max(1, round(SHAPES[dataset].observations * scale))


def _class_levels(rng, shape: Shape, cls: int) -> tuple[np.ndarray, np.ndarray]:
    """(levels, probabilities) of a class: its active levels, a random subset of the
    slots, with uniform or Zipf probabilities assigned in a random order."""
    count = shape.active[cls]
    levels = rng.choice(shape.levels[cls], count, replace=False) if count < shape.levels[cls] \
        else np.arange(count)
    if shape.zipf is None:
        return levels, np.full(count, 1 / count)
    weights = 1 / np.arange(1, count + 1) ** shape.zipf
    return levels, weights[rng.permutation(count)] / weights.sum()


def _draw(rng, probabilities: np.ndarray, size: int) -> np.ndarray:
    """Ranks (indices into a class's active levels) drawn with these probabilities."""
    if np.all(probabilities == probabilities[0]):
        return rng.integers(0, probabilities.size, size)
    cdf = np.cumsum(probabilities)
    return np.minimum(np.searchsorted(cdf, rng.random(size) * cdf[-1]), probabilities.size - 1)


def log_mu(theta: np.ndarray, covariates: np.ndarray, shape: Shape) -> np.ndarray:
    """log mu of every observation (numpy, float64)."""
    offsets, n = shape.offsets, shape.factors
    eta = np.full(covariates.shape[1], theta[0])
    for cls in range(5):
        eta += theta[offsets[cls] + covariates[cls]]
    mp = theta[offsets[5]:offsets[6]].reshape(-1, n)
    pm = theta[offsets[6]:].reshape(-1, n)
    return eta + np.einsum("ik,ik->i", mp[covariates[MATERIAL]], pm[covariates[PLACEMENT]])


def generate(dataset: str, scale: float, layout: str, seed: int = 0) -> Data:
    """The observations of a dataset at a scale (a fraction of the thesis's count),
    shuffled or sorted by material, then placement."""
    if dataset not in SHAPES:
        raise BenchError(f"unknown dataset {dataset!r}; known: {', '.join(SHAPES)}")
    if layout not in LAYOUTS:
        raise BenchError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
    data = _shuffled(dataset, scale, seed)
    if layout == "shuffled":
        return data
    order = np.lexsort((data.covariates[PLACEMENT], data.covariates[MATERIAL]))
    return replace(data, covariates=np.ascontiguousarray(data.covariates[:, order]), y=data.y[order], w=data.w[order])


@lru_cache(maxsize=2)  # a sweep visits both layouts of a dataset in turn
def _shuffled(dataset: str, scale: float, seed: int) -> Data:
    shape = SHAPES[dataset]
    rng = np.random.default_rng([seed, list(SHAPES).index(dataset)])
    theta = np.zeros(shape.parameters)
    active = np.zeros(shape.parameters, bool)
    active[0] = True
    theta[0] = shape.intercept
    offsets, n = shape.offsets, shape.factors
    classes = [_class_levels(rng, shape, cls) for cls in range(5)]
    for cls, (levels, _) in enumerate(classes):
        active[offsets[cls] + levels] = True
    for cls, factor_start in ((MATERIAL, offsets[5]), (PLACEMENT, offsets[6])):
        rows = factor_start + classes[cls][0][:, None] * n + np.arange(n)
        active[rows.ravel()] = True
    theta[active[1:].nonzero()[0] + 1] = rng.normal(0, PSI ** 0.5, int(active[1:].sum()))
    # Allowed (material, placement) pairs: a material is shown on 1 + Poisson(2) placements
    # (uniform data: every pair is allowed).
    allowed = None
    if shape.zipf is not None:
        per_material = 1 + rng.poisson(2, shape.active[MATERIAL])
        allowed = (np.cumsum(per_material) - per_material, per_material,
                   _draw(rng, classes[PLACEMENT][1], int(per_material.sum())))
    wanted = observations(dataset, scale)
    parts, kept = [], 0
    while kept < wanted:
        # Chunks of at most 2^22 keep the temporaries of log_mu (chunk x N x 16 bytes) small.
        size = min(CHUNK, max(1 << 16, int((wanted - kept) / (shape.zero_rate + 0.15 * (1 - shape.zero_rate)))))
        ranks = [_draw(rng, probs, size) for _, probs in classes]
        if allowed is not None:  # the placement among the material's allowed ones
            start, count, pairs = allowed
            material = ranks[MATERIAL]
            ranks[PLACEMENT] = pairs[start[material] + (rng.random(size) * count[material]).astype(np.int64)]
        covariates = np.stack([levels[rank] for (levels, _), rank in zip(classes, ranks)]).astype(np.int32)
        y = np.minimum(rng.poisson(np.exp(log_mu(theta, covariates, shape))), 3).astype(np.int8)
        keep = (y > 0) | (rng.random(size) < shape.zero_rate)
        parts.append((covariates[:, keep], y[keep]))
        kept += int(keep.sum())
    covariates = np.concatenate([c for c, _ in parts], axis=1)[:, :wanted]
    y = np.concatenate([y for _, y in parts])[:wanted]
    w = np.where(y > 0, 1, round(1 / shape.zero_rate)).astype(np.int16)
    return Data(dataset, shape, np.ascontiguousarray(covariates), y, w, theta, active)
