"""The GPU variants of the admodel suite: the kernels of kernels/admodel.cu on CuPy arrays,
with the prior part added as the thesis's prior kernel does (an elementwise th / psi,
and th . th / (2 psi) plus a constant). f is a float64 device scalar (the partial sums
of the blocks are added in float64), the gradient has the precision of theta.

CuPy is imported inside the functions: importing this module needs no GPU.
"""

from dataclasses import dataclass
from importlib.resources import files

import numpy as np

from impls.admodel.cpu import prior_constant
from impls.admodel.data import BYTES_PER_OBSERVATION, MATERIAL, PLACEMENT, PSI, Data
from bench.backend import NULL, allow_shared_memory, multiprocessors, raw_kernel

KERNEL_SOURCE = files("impls.admodel") / "kernels" / "admodel.cu"  # package data (pyproject.toml)
FACTORS = 10  # N: the kernels are compiled for it
PRECISION = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
GRADIENTS = {"grad-atomic": "grad_atomic", "grad-block": "grad_block", "grad-warp": "grad_warp"}
THREADS_PER_SM = 2048
WARP_KERNELS = ("grad_warp", "fused", "fused_pairs")  # with a skewed path
# Data whose most popular level is in more than this share of the warps take the skewed
# path (kernels/NOTES.md: on an H200 it made real-like's calls faster, its popular levels
# in every warp, and sim's slower, no level in 1% of the warps).
SKEWED_FROM = 0.1
PAIR_ROWS_WARPS = 4  # pair_rows' warps a material (placement): sim has 5,000 of 3,700 pairs each


@dataclass
class Pairs:
    """The (material, placement) pairs of bucketed observations, for fused_pairs and pair_rows
    (kernels/admodel.cu): each observation's pair, each pair's placement, and the pairs grouped
    by material (in their order: a pair's material is its group's key) and by placement
    (through `by_placement`)."""
    of: object  # int32 [n], non-decreasing
    placement: object  # int32 [pairs]
    material_groups: tuple  # (ptr int32 [groups + 1], key int32 [groups])
    placement_groups: tuple
    by_placement: object  # int32 [pairs]: the pairs in placement order
    material_by_placement: object  # int32 [pairs]: material[by_placement], which pair_rows reads in sequence

    @property
    def count(self) -> int:
        return int(self.placement.size)


@dataclass
class DeviceData:
    covariates: object  # cupy int32 [5, n]
    y: object  # int8
    w: object  # int16
    offsets: tuple[int, ...]  # d, f, m, r, p, MP, PM
    parameters: int
    skewed: bool  # hottest_share above SKEWED_FROM: grad_warp and fused take their skewed path
    pairs: Pairs | None = None  # bucketed: fused goes by pairs

    @property
    def observations(self) -> int:
        return int(self.y.size)


def upload(data: Data) -> DeviceData:
    import cupy

    if data.shape.factors != FACTORS:
        raise ValueError(f"the kernels are compiled for N = {FACTORS} factors, not {data.shape.factors}")
    covariates = cupy.asarray(data.covariates)
    return DeviceData(covariates, cupy.asarray(data.y), cupy.asarray(data.w), tuple(int(o) for o in data.shape.offsets),
                      data.shape.parameters, hottest_share(covariates, cupy) > SKEWED_FROM)


def hottest_share(covariates, xp=np) -> float:
    """The largest share of warps (tiles of 32 consecutive observations) that one level of
    one class occurs in: the warps whose atomics meet on that gradient entry. covariates
    [5, observations], an array of xp (numpy or cupy)."""
    tiles = covariates.shape[1] // 32
    share = 0.0
    for keys in covariates[:, :tiles * 32]:
        ordered = xp.sort(keys.reshape(tiles, 32), axis=1)
        first = xp.ones(ordered.shape, bool)
        first[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
        share = max(share, int(xp.bincount(ordered[first]).max()) / tiles) if tiles else share
    return share


def bucket(dev: DeviceData) -> DeviceData:
    """The observations sorted by material, then placement, on the GPU (once per dataset), and
    their pairs: a pair's observations are then consecutive, and fused sums their residuals
    once a warp, not a factor row an observation."""
    import cupy

    order = cupy.lexsort(cupy.stack([dev.covariates[PLACEMENT], dev.covariates[MATERIAL]]))
    covariates = cupy.ascontiguousarray(dev.covariates[:, order])
    starts = _run_starts(covariates[MATERIAL], covariates[PLACEMENT])
    first = cupy.flatnonzero(starts)
    material, placement = covariates[MATERIAL, first], covariates[PLACEMENT, first]  # each pair's
    by_placement = cupy.argsort(placement).astype(cupy.int32)
    pairs = Pairs(cupy.cumsum(starts, dtype=cupy.int32) - 1, placement, _groups(material),
                  _groups(placement[by_placement]), by_placement, material[by_placement])
    return DeviceData(covariates, dev.y[order], dev.w[order], dev.offsets, dev.parameters,
                      hottest_share(covariates, cupy) > SKEWED_FROM, pairs)


def _run_starts(*keys):
    """Where a run of equal values (in every one of the equally long `keys`) starts: a bool each."""
    import cupy

    starts = cupy.zeros(keys[0].size, bool)
    starts[:1] = True
    for key in keys:
        starts[1:] |= key[1:] != key[:-1]
    return starts


def _groups(keys) -> tuple:
    """(ptr, key) of the runs of equal values of sorted `keys`: run g is keys[ptr[g]:ptr[g + 1]]."""
    import cupy

    first = cupy.flatnonzero(_run_starts(keys))
    ptr = cupy.concatenate([first, cupy.array([keys.size])]).astype(cupy.int32)
    return ptr, keys[first]


def device_bytes(observations: int, parameters: int, itemsize: int) -> int:
    """What a point holds on the GPU: the observations twice (as given and bucketed), the
    sort's keys and order, the pairs (an index an observation; at most a pair an observation,
    each with its placement, its material in placement order, groups, order and sum), theta, the
    gradient and the optimiser's history (2 x 10 vectors), with 10% to spare."""
    return int(1.1 * (observations * (2 * BYTES_PER_OBSERVATION + 24 + 4 + 24 + itemsize)
                      + 24 * parameters * itemsize))


def _grid(observations: int, block: int) -> int:
    """Blocks of a launch: as many as the SMs' threads hold at once (fewer are resident where
    registers or shared memory limit), no more than needed."""
    return max(1, min(-(-observations // block), multiprocessors() * (THREADS_PER_SM // block)))


def _shared_bytes(name: str, block: int, itemsize: int, skewed: bool, cache_policy: str) -> int:
    """Dynamic shared memory of a launch: grad_block keeps a key and N values per thread;
    grad_warp and fused two stages per warp of 32 rows of N + 1 values (fused_pairs through L1
    none: its lanes read their rows themselves), and on the skewed path a cache (an index and a
    sum per slot: GradientCache::SLOTS) and, but for fused_pairs, two runs of N values per warp."""
    if name == "grad_block":
        return block * (4 + FACTORS * itemsize)
    if name not in WARP_KERNELS:
        return 0
    stages = (0 if name == "fused_pairs" and cache_policy == "ldg" else 2) * block * (FACTORS + 1) * itemsize
    if not skewed:
        return stages
    cache_slots = 512 if itemsize == 8 else 1024
    runs = 0 if name == "fused_pairs" else 2 * (block // 32) * FACTORS * itemsize
    return stages + cache_slots * (4 + itemsize) + runs


def _launch(name: str, dev: DeviceData, theta, cache_policy: str, block: int, *outputs):
    skewed = dev.skewed and name in WARP_KERNELS
    kernel = raw_kernel(KERNEL_SOURCE, _kernel_name(name, PRECISION[theta.dtype], cache_policy, skewed))
    grid = _grid(dev.observations, block)
    shared = _shared_bytes(name, block, theta.itemsize, skewed, cache_policy)
    allow_shared_memory(kernel, shared)
    args = (theta, dev.covariates, dev.y, dev.w, np.int64(dev.observations), *(np.int32(o) for o in dev.offsets))
    kernel((grid,), (block,), (*args, *outputs), shared_mem=shared)


def _partials(dev: DeviceData, theta, block: int):
    import cupy

    return cupy.empty(_grid(dev.observations, block), theta.dtype)


def _prior(theta, psi: float):
    """The prior's part of f, float64."""
    import cupy

    return cupy.dot(theta, theta).astype(cupy.float64) / (2 * psi) + prior_constant(theta.size, psi)


def objective(dev: DeviceData, theta, cache_policy: str = "ldg", block: int = 256, psi: float = PSI):
    """f at theta (a float64 device scalar): the thesis's objective kernel."""
    partials = _partials(dev, theta, block)
    _launch("objective", dev, theta, cache_policy, block, partials)
    return partials.sum(dtype=np.float64) + _prior(theta, psi)


def gradient(variant: str, dev: DeviceData, theta, cache_policy: str = "ldg", block: int = 256, psi: float = PSI):
    """The gradient at theta: the prior part, then the data part by one of GRADIENTS."""
    grad = theta / theta.dtype.type(psi)
    _launch(GRADIENTS[variant], dev, theta, cache_policy, block, grad)
    return grad


def fused(dev: DeviceData, theta, cache_policy: str = "ldg", block: int = 256, psi: float = PSI):
    """(f, gradient) in one pass over the observations (ours); bucketed observations by their
    pairs, then the material's and placement's effects and rows from the pairs."""
    import cupy

    grad = theta / theta.dtype.type(psi)
    partials = _partials(dev, theta, block)
    if dev.pairs is None:
        _launch("fused", dev, theta, cache_policy, block, grad, partials)
    else:
        pairs, sums = dev.pairs, cupy.zeros(dev.pairs.count, theta.dtype)
        _launch("fused_pairs", dev, theta, cache_policy, block, grad, partials, pairs.of, sums)
        mp, pm = dev.offsets[5:]  # the rows of th_MP and th_PM
        kernel = raw_kernel(KERNEL_SOURCE, _pair_rows_name(PRECISION[theta.dtype]))
        for (ptr, key), order, other, rows, other_rows, effects in (
                (pairs.material_groups, NULL, pairs.placement, mp, pm, dev.offsets[MATERIAL]),
                (pairs.placement_groups, pairs.by_placement, pairs.material_by_placement, pm, mp,
                 dev.offsets[PLACEMENT])):
            groups = int(key.size)
            kernel((_grid(groups * 32 * PAIR_ROWS_WARPS, block),), (block,), (
                theta, sums, ptr, key, np.int32(groups), np.int32(PAIR_ROWS_WARPS), order, other, np.int32(rows),
                np.int32(other_rows), np.int32(effects), grad))
    return partials.sum(dtype=np.float64) + _prior(theta, psi), grad


def two_pass(dev: DeviceData, theta, cache_policy: str = "ldg", block: int = 256, psi: float = PSI):
    """(f, gradient) as the thesis gets both: the objective kernel, then the naive gradient."""
    return objective(dev, theta, cache_policy, block, psi), gradient("grad-atomic", dev, theta, cache_policy, block,
                                                                     psi)


def _kernel_name(name: str, precision: str, cache_policy: str, skewed: bool) -> str:
    return f"admodel_{name}{'_skewed' if skewed else ''}_{precision}_n{FACTORS}_{cache_policy}"


def _pair_rows_name(precision: str) -> str:
    return f"admodel_pair_rows_{precision}_n{FACTORS}"  # its loads through L1 whatever the policy


def kernel_names() -> list[str]:
    kernels = [(name, False) for name in ("objective", *GRADIENTS.values(), "fused", "fused_pairs")]
    kernels += [(name, True) for name in WARP_KERNELS]
    return [_kernel_name(name, prec, cache_policy, skewed) for name, skewed in kernels for prec in ("f32", "f64")
            for cache_policy in ("ldg", "ldcg")] + [_pair_rows_name(prec) for prec in ("f32", "f64")]


def kernel_resources() -> dict[str, dict]:
    """Registers, spills (local bytes) and static shared memory of every kernel."""
    resources = {}
    for name in kernel_names():
        attributes = raw_kernel(KERNEL_SOURCE, name).attributes
        resources[name] = {"registers": attributes["num_regs"], "local_bytes": attributes["local_size_bytes"],
                           "shared_bytes": attributes["shared_size_bytes"]}
    return resources
