"""The workload of results/<gpu>/logs/admodel-ncu-*.txt and a quick timing of the kernels
by block size: sim at scale 1/4 (8.4M observations), float64, shuffled, and bucketed.

    ncu --kernel-name regex:admodel_ --launch-skip 5 --launch-count 5 --section SpeedOfLight \\
        --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \\
        python3 impls/admodel/profile_kernels.py --profile
"""

import sys

import cupy

from bench.timing import CudaClock
from impls.admodel import data, gpu
from impls.admodel.suite import evaluation_theta

d = data.generate("sim", 0.25, "shuffled")
dev = gpu.upload(d)
bucketed = gpu.bucket(dev)
theta = cupy.asarray(evaluation_theta(d))
runs = {"objective": lambda block: gpu.objective(dev, theta, block=block),
        "grad-atomic": lambda block: gpu.gradient("grad-atomic", dev, theta, block=block),
        "grad-warp": lambda block: gpu.gradient("grad-warp", dev, theta, block=block),
        "fused": lambda block: gpu.fused(dev, theta, block=block),
        "fused-bucketed": lambda block: gpu.fused(bucketed, theta, block=block)}
if "--profile" in sys.argv:
    for _ in range(2):
        for run in runs.values():
            run(256)
    cupy.cuda.Device().synchronize()
    sys.exit()
clock = CudaClock()
for block in (128, 256, 512):
    for name, run in runs.items():
        run(block)
        start = clock.mark()
        for _ in range(10):
            run(block)
        stop = clock.mark()
        clock.wait(stop)
        print(f"block {block:4d} {name:15s} {clock.between(start, stop) / 10 * 1e3:8.3f} ms")
