#!/usr/bin/env bash
# The saber suite on a GPU machine, one device call per mode (from the repository root,
# $OUT set); results go to $OUT/<gpu>/, seeded with the committed ones.
#   bash impls/saber/gpu_check.sh check    # GPU tests, bench verify (resident, and streamed
#                                          # through a memory budget), memcheck and racecheck
#   bash impls/saber/gpu_check.sh sweep    # a bench sweep per line of $SWEEPS (bench options)
#   bash impls/saber/gpu_check.sh profile  # Table 4: Nsight Compute on the sampling kernels ($PROFILE_K)
# With no mode: all three.
source impls/gpu_check_setup.sh saber-gpu-check.log saber.csv saber.json saber-series.csv
VERIFY="python3 -m bench verify saber --backend gpu"
# 100,000 tokens, their model and 60% of their chunks' bytes: 7 chunks through 3 slots (a tighter
# budget can run out under compute-sanitizer: the pool caches freed blocks per stream)
STREAMED="--dataset nytimes-synth --scale 0.001 --K 33 --memory 0.006 --workers 3"
MODE=${1:-all}

if [ "$MODE" = check ] || [ "$MODE" = all ]; then
  step nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv
  step python3 -m pytest -q -ra tests/test_saber_gpu.py
  step $VERIFY
  step $VERIFY --K 1,32,33,4097,32768 --iterations 1
  step $VERIFY $STREAMED
  for tool in memcheck racecheck; do
    # the suite's kernels only: CuPy's own scans report racecheck hazards of their design
    step compute-sanitizer --tool $tool --kernel-name kns=saber_ --error-exitcode 9 $VERIFY --K 33,1000 --iterations 1
    step compute-sanitizer --tool $tool --kernel-name kns=saber_ --error-exitcode 9 $VERIFY $STREAMED --iterations 1
  done
fi
if [ "$MODE" = sweep ] || [ "$MODE" = all ]; then
  while read -r options; do
    [ -n "$options" ] && step python3 -m bench sweep saber --backend gpu --out $DIR $options < /dev/null
  done <<< "${SWEEPS:-}"
fi
if [ "$MODE" = profile ] || [ "$MODE" = all ]; then
  # The paper's Table 4: nytimes-synth within the first 10 iterations, at K = $PROFILE_K
  # (1000 as the paper's; a comma list): G3's sampling kernel (tree, by word) at iteration 5,
  # its first chunk; G0's beside it.
  mkdir -p "$DIR/logs"
  for K in ${PROFILE_K:-1000}; do
    for stage in G3:saber_sample_tree_by_word G0:saber_sample_alias; do
      name=saber-ncu-${stage%%:*}-K$K
      step ncu --kernel-name "${stage#*:}" --launch-skip 16 --launch-count 1 --section SpeedOfLight \
        --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats \
        --section Occupancy --section LaunchStats -f -o /tmp/$name python3 -m bench sweep saber --backend gpu \
        --out /tmp/saber-profile-sweep --K $K --iterations 6 --chunks 4 --variant ${stage%%:*} --repeats 1 --warmup 0
      ncu --import /tmp/$name.ncu-rep --page details --csv > "$DIR/logs/$name-details.csv"
      ncu --import /tmp/$name.ncu-rep --page raw --csv > "$DIR/logs/$name-raw.csv"
    done
  done
fi
rm -f "$DIR"/.*.lock
echo "exit status $status" | tee -a "$LOG"
exit $status
