"""The workload of results/nvidia-h200/logs/sumrv-strip-ncu-*.txt: the strip kernel at
m = n = 1024 (batch 4096) and 4096 (batch 1024), f32, two launches each, for

    ncu --kernel-name regex:sumrv_strip --launch-skip 1 --launch-count 2 \\
        --section SpeedOfLight --section Occupancy --section WarpStateStats \\
        --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis python3 impls/sumrv/profile_strip.py
"""

import cupy

from impls.sumrv import gpu
from impls.sumrv.suite import make_inputs

for size, batch in ((1024, 4096), (4096, 1024)):
    p, q = make_inputs(batch, size, size, "f32", "random", 0)
    p, q = cupy.asarray(p), cupy.asarray(q)
    for _ in range(2):
        gpu.convolve("strip", p, q, False)
    cupy.cuda.Device().synchronize()
