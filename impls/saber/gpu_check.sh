#!/usr/bin/env bash
# The saber suite's check on a GPU machine, in one device call (from the repository root,
# $OUT set): the GPU tests, bench verify on the GPU, compute-sanitizer memcheck and
# racecheck on the verification, then the sweep of the stages built on the GPU
# ($SWEEP_ARGS: bench options). Results go to $OUT/<gpu>/, seeded with the committed ones.
source impls/gpu_check_setup.sh saber-gpu-check.log saber.csv saber.json saber-series.csv
VERIFY="python3 -m bench verify saber --backend gpu"

step nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv
step python3 -m pytest -q -ra tests/test_saber_gpu.py
step $VERIFY
step $VERIFY --K 1,32,33,4097,32768 --iterations 1
for tool in memcheck racecheck; do
  step compute-sanitizer --tool $tool --error-exitcode 9 $VERIFY --K 33,1000 --iterations 1
done
step python3 -m bench sweep saber --backend gpu --out $DIR ${SWEEP_ARGS:-}
rm -f "$DIR"/.*.lock
echo "exit status $status" | tee -a "$LOG"
exit $status
