#!/usr/bin/env bash
# The sumrv suite's whole check on a GPU machine, in stages, for one device call each:
#
#   bash impls/sumrv/gpu_check.sh check      # GPU tests, bench verify, compute-sanitizer, registers and spills
#   bash impls/sumrv/gpu_check.sh sweep      # the benchmark: m = n, batch 1 and 4096, both spaces; (m, n) grid
#   bash impls/sumrv/gpu_check.sh profile    # bench profile of strip at m = n = 256, 1024, 4096, batch 1024
#                                            # (every counter set and the peaks: what keeps it below 50% of FMA)
#
# Run from the repository root with $OUT set (the device tool's output folder). Results
# are appended to $OUT/<gpu>/ starting from the committed results/<gpu>/ files; a summary
# table is printed last.
source impls/gpu_check_setup.sh sumrv-gpu-check.log sumrv.csv sumrv.json sumrv-profile.csv sumrv-profile.json
VERIFY="python3 -m bench verify sumrv --backend gpu"
SWEEP="python3 -m bench sweep sumrv --backend gpu --out $DIR"
KERNELS=naive,skewdiag,skewdiag-det,strip

for stage in "$@"; do
  case $stage in
    check)
      step nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv
      step python3 -m pytest -q -ra tests/test_sumrv_gpu.py
      # Exactness on dyadic inputs for every m, n in 1..70 (every variant, peers with their
      # normwise bound); random and tiny inputs on a coarser grid; a sample up to 2^14.
      step $VERIFY -a m=1..70 -a n=1..70 --space lin --inputs dyadic
      step $VERIFY -a m=1..70:3 -a n=1..70:4 --inputs random,tiny
      step $VERIFY -a m=1,33,1000,4096,16384 -a n=1,63,1000,16384 -a batch=2
      for tool in memcheck racecheck; do
        step compute-sanitizer --tool $tool --error-exitcode 9 $VERIFY -a m=1,33,300 -a n=40,1000 \
          --inputs random,tiny --variant $KERNELS
        # strip's shift per pair in log space (verify's small cases take the per-output path)
        step compute-sanitizer --tool $tool --error-exitcode 9 python3 -m pytest -q tests/test_sumrv_gpu.py -k by_shift
      done
      step python3 -c "
import pandas as pd
from impls.sumrv import gpu
print(pd.DataFrame(gpu.kernel_resources()).to_string(index=False))"
      ;;
    quick)  # after a kernel change: the GPU tests and the kernels' exactness and sanitizers
      step python3 -m pytest -q -ra tests/test_sumrv_gpu.py
      step $VERIFY -a m=1..70 -a n=1..70 --space lin --inputs dyadic --variant $KERNELS
      step $VERIFY -a m=1,33,1000,4096,16384 -a n=1,63,1000,16384 -a batch=2 --variant $KERNELS
      for tool in memcheck racecheck; do
        step compute-sanitizer --tool $tool --error-exitcode 9 $VERIFY -a m=1,33,300 -a n=40,1000 \
          --inputs random,tiny --variant strip
      done
      ;;
    profile)
      for size in 256 1024 4096; do
        step python3 -m bench profile sumrv -a m=$size -a n=$size -a batch=1024 --precision f32,f64 --space lin \
          --variant strip --kernels strip --out "$DIR"
      done
      ;;
    sweep)
      for size in 1 32 33 256 1000 1024 4096 16384; do
        step $SWEEP -a m=$size -a n=$size -a batch=1 --space lin,log
      done
      for size in 32 256 1024 4096; do  # the slow variants take up to seconds a call here
        step $SWEEP -a m=$size -a n=$size -a batch=4096 --space lin,log --repeats 3 --warmup 1
      done
      step $SWEEP -a m=32,256,1024,4096 -a n=32,256,1024,4096 -a batch=1024 --precision f32 --space lin \
        --variant strip,fft,naive
      step $SWEEP -a m=256 -a n=256 -a batch=1,16,256,4096,65536 --precision f32 --variant strip,fft,naive
      ;;
    *) echo "unknown stage $stage"; exit 2 ;;
  esac
done
rm -f "$DIR"/.*.lock

echo; echo "==== summary" | tee -a "$LOG"
python3 - "$DIR" <<'EOF' 2>&1 | tee -a "$LOG"
import sys
from pathlib import Path

import pandas as pd

from bench.results import latest_code, load
from impls.sumrv.figures import summary

path = Path(sys.argv[1]) / "sumrv.csv"
if path.exists():
    df, schema, _ = load(path)
    df = latest_code(df, schema)
    pd.set_option("display.width", 200)
    print(f"sumrv: copy {df['copy_gbps'].median():.0f} GB/s; FMA peak f32/f64 "
          f"{df.groupby('precision')['fma_peak_gflops'].median().round(0).to_dict()} GFLOP/s; exp "
          f"{df.groupby('precision')['exp_peak_gterms'].median().round(1).to_dict()} Gterms/s; SM clock "
          f"{df['sm_clock_mhz_min'].min()}-{df['sm_clock_mhz_max'].max()} MHz")
    print(summary(df).to_string(index=False, float_format=lambda x: f"{x:.4g}"))
EOF
echo "exit status $status" | tee -a "$LOG"
exit $status
