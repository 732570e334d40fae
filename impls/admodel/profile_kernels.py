"""The kernels' workload for ncu, and the scan of registers per thread behind the caps in
kernels/admodel.cu: sim, float64 and float32, shuffled and bucketed.

    python3 impls/admodel/profile_kernels.py [--scale 1]        # ms per call by cap and block
    ncu --kernel-name regex:admodel_ --launch-skip 5 --launch-count 5 --section SpeedOfLight \\
        --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \\
        python3 impls/admodel/profile_kernels.py --profile --scale 0.25
"""

import argparse
import functools

import cupy
import numpy as np

from bench.timing import CudaClock
from bench import backend
from impls.admodel import data, gpu
from impls.admodel.suite import evaluation_theta

CAPS = (56, 64, 72, 80, 96, 128)
BLOCKS = (256, 512)

parser = argparse.ArgumentParser()
parser.add_argument("--scale", type=float, default=1.0)
parser.add_argument("--profile", action="store_true", help="run each kernel a few times, for ncu")
args = parser.parse_args()

d = data.generate("sim", args.scale, "shuffled")
dev = gpu.upload(d)
bucketed = gpu.bucket(dev)


def runs(theta, block):
    return {"objective": lambda: gpu.objective(dev, theta, block=block),
            "grad-atomic": lambda: gpu.gradient("grad-atomic", dev, theta, block=block),
            "grad-warp": lambda: gpu.gradient("grad-warp", dev, theta, block=block),
            "fused": lambda: gpu.fused(dev, theta, block=block),
            "fused-bucketed": lambda: gpu.fused(bucketed, theta, block=block)}


if args.profile:
    theta = cupy.asarray(evaluation_theta(d))
    for _ in range(2):
        for run in runs(theta, 256).values():
            run()
    cupy.cuda.Device().synchronize()
    raise SystemExit

clock = CudaClock()


def milliseconds(run, repeats=10):
    run()
    start = clock.mark()
    for _ in range(repeats):
        run()
    stop = clock.mark()
    clock.wait(stop)
    return clock.between(start, stop) / repeats * 1e3


rows = []
for precision in (np.float64, np.float32):
    theta = cupy.asarray(evaluation_theta(d)).astype(precision)
    for cap in (None, *CAPS):
        options = ("-std=c++17",) if cap is None else ("-std=c++17", f"-DREGISTERS={cap}")
        gpu.raw_kernel = functools.partial(backend.raw_kernel, options=options)
        for block in BLOCKS:
            times = {name: milliseconds(run) for name, run in runs(theta, block).items()}
            rows.append({"precision": np.dtype(precision).name, "cap": cap or "source", "block": block, **times})
            print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in rows[-1].items()),
                  flush=True)
import pandas as pd  # noqa: E402

table = pd.DataFrame(rows).set_index(["precision", "cap", "block"])
print("\nms per call; the fastest cap per kernel and precision:")
print(table.round(3).to_string())
print(table.groupby("precision").idxmin().to_string())
