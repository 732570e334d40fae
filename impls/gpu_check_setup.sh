# Sourced by the suites' gpu_check.sh scripts (from the repository root, $OUT set):
#   source impls/gpu_check_setup.sh LOG_NAME RESULT_FILE...
# Sets GPU (the machine slug), DIR ($OUT/<gpu>/, seeded with the committed
# results/<gpu>/ RESULT_FILEs, so a stage resumes what earlier calls measured), LOG,
# status (0; 1 once a step fails) and step (runs a command, logged with a header).
set -uo pipefail
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1  # and what the caller adds (carried wheels)
OUT=${OUT:?set OUT to the output folder}
GPU=$(python3 -c "from bench import envinfo; print(envinfo.machine_slug(envinfo.collect_env([]), 'gpu'))")
DIR=$OUT/$GPU
mkdir -p "$DIR"
LOG=$DIR/$1
shift
for f in "$@"; do
  [ -f "results/$GPU/$f" ] && [ ! -f "$DIR/$f" ] && cp "results/$GPU/$f" "$DIR/$f"
done
status=0
step() { echo; echo "==== $* ($(date -u +%H:%M:%S))" | tee -a "$LOG"; "$@" 2>&1 | tee -a "$LOG"; local rc=${PIPESTATUS[0]}; [ "$rc" = 0 ] || { echo "FAILED ($rc): $*" | tee -a "$LOG"; status=1; }; }
trap 'rm -f "$DIR"/.*.lock' EXIT  # bench.results' lock files: the device returns 8 files at most
