#!/usr/bin/env bash
# The admodel suites' whole check on a GPU machine, in stages, for one device call each:
#
#   bash impls/admodel/gpu_check.sh check   # GPU tests, bench verify, compute-sanitizer, registers
#   bash impls/admodel/gpu_check.sh sweep   # the benchmark: every op, layout, precision, L1 policy
#   bash impls/admodel/gpu_check.sh fit     # L-BFGS to the optimum, four routes ($FIT_ARGS: bench options)
#   bash impls/admodel/gpu_check.sh profile # ncu on the kernels (profile_kernels.py's workload)
#
# Run from the repository root with $OUT set (the device tool's output folder). Results
# are appended to $OUT/<gpu>/ starting from the committed results/<gpu>/ files; a summary
# table is printed last.
source impls/gpu_check_setup.sh admodel-gpu-check.log admodel.csv admodel.json admodel-series.csv \
  admodel-fit.csv admodel-fit.json admodel-fit-series.csv
VERIFY="python3 -m bench verify admodel --backend gpu"

for stage in "$@"; do
  case $stage in
    check)
      step nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv
      step python3 -m pytest -q -ra tests/test_admodel_gpu.py
      step $VERIFY
      step $VERIFY --scale 0.02 --block 256 --l1 ldg
      for tool in memcheck racecheck; do
        step compute-sanitizer --tool $tool --error-exitcode 9 $VERIFY --scale 0.0002 --l1 ldg --block 32,96
      done
      step python3 -c "
import pandas as pd
from impls.admodel import gpu
print(pd.DataFrame(gpu.kernel_resources()).T.to_string())"
      ;;
    sweep)
      step python3 -m bench sweep admodel --backend gpu --out $DIR
      ;;
    fit)
      step python3 -m bench sweep admodel-fit --backend gpu --out $DIR ${FIT_ARGS:-}
      ;;
    profile)
      mkdir -p "$DIR/logs"
      step python3 impls/admodel/profile_kernels.py
      ncu --kernel-name regex:admodel_ --launch-skip 5 --launch-count 5 --section SpeedOfLight --section Occupancy \
        --section WarpStateStats --section MemoryWorkloadAnalysis python3 impls/admodel/profile_kernels.py --profile \
        > "$DIR/logs/admodel-ncu-$(date -u +%Y-%m-%d).txt" 2>&1 || status=1
      grep -E "^  admodel_|Duration|L1/TEX Cache|L2 Cache Throughput|Compute \(SM\)|L1/TEX Hit|L2 Hit|Achieved Occ" \
        "$DIR/logs/admodel-ncu-$(date -u +%Y-%m-%d).txt" | tee -a "$LOG"
      ;;
    *) echo "unknown stage $stage"; exit 2 ;;
  esac
done
rm -f "$DIR"/.*.lock

echo; echo "==== summary" | tee -a "$LOG"
python3 - "$DIR" <<'PY' 2>&1 | tee -a "$LOG"
import sys
from pathlib import Path

import pandas as pd

from bench.results import latest_code, load
from impls.admodel.figures import fit_markdown, markdown_tables

pd.set_option("display.width", 250)
for name, show in (("admodel", markdown_tables), ("admodel-fit", fit_markdown)):
    path = Path(sys.argv[1]) / f"{name}.csv"
    if path.exists():
        df, schema, _ = load(path)
        df = latest_code(df, schema)
        print(f"== {name}: copy {df['copy_gbps'].median():.0f} GB/s")
        print(show(df))
PY
echo "exit status $status" | tee -a "$LOG"
exit $status
