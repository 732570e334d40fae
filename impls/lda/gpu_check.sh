#!/usr/bin/env bash
# The lda suites' whole check on a GPU machine, in stages, for one device call each:
#
#   bash impls/lda/gpu_check.sh check fig6 kernels   # tests, verify, sanitizers, Figure 6, draw-z alone
#   bash impls/lda/gpu_check.sh fig7-f32             # Figure 7(a) with warpscan on the whole grid
#   bash impls/lda/gpu_check.sh fig7-f64 fig8        # Figure 7(b), Figure 8
#   bash impls/lda/gpu_check.sh profile registers    # bench profile of the draw-z kernels (every counter
#                                                    # set, the roofline's peaks); ST1/ST2's test: alg4 and
#                                                    # alg7 with their registers capped, on nytimes-synth
#                                                    # (300,000 documents: registers, not the grid, bind)
#   bash impls/lda/gpu_check.sh loads iterations     # warpscan's scalar and vector loads by K; the paper's
#                                                    # 100 iterations beside 3 at K = 512, 1020, 1024
#   bash impls/lda/gpu_check.sh loads warpscan       # another GPU: warpscan against the copy floor at
#                                                    # K = 256..1024 beside the paper's kernels, its profile
#   bash impls/lda/gpu_check.sh sawtooth             # ST4: alg4 and alg7 profiled across one period of K mod 32
#
# Run from the repository root with $OUT set (the device tool's output folder). Results
# are appended to $OUT/<gpu>/ starting from the committed results/<gpu>/ files, so a
# stage resumes what an earlier call measured; a summary table is printed last.
source impls/gpu_check_setup.sh gpu-check.log lda.csv lda.json lda-kernels.csv lda-kernels.json lda-profile.csv \
  lda-profile.json lda-kernels-profile.csv lda-kernels-profile.json
SWEEP="python3 -m bench sweep lda --backend gpu --out $DIR"

for stage in "$@"; do
  case $stage in
    check)
      step nvidia-smi
      step python3 -m bench env
      step python3 -m pytest -q -ra -m gpu tests
      step python3 -m bench verify lda --backend gpu --k 1..130,480..544,1000..1030
      # The whole GPU iteration (the new counts kernels among its kernels) under the
      # sanitizers, on a small workload.
      for tool in memcheck racecheck; do
        step compute-sanitizer --tool $tool --error-exitcode 9 \
          python3 -m bench run lda --backend gpu --dataset tiny --k 40 --iterations 2 --variant alg1,warpscan
        for precision in f32 f64; do  # warpscan's vector loads (K = 40 loads scalars)
          step compute-sanitizer --tool $tool --error-exitcode 9 python3 -m bench run lda-kernels --backend gpu \
            --dataset tiny --k 1024 --precision $precision --loads vector --variant warpscan
        done
      done
      ;;
    fig6) step $SWEEP --iterations 3 --k 16..240:32 --variant alg1,alg7 --update mfm,dirichlet --repeats 3 ;;
    kernels) step python3 -m bench sweep lda-kernels --backend gpu --k 64,256,512,1024 --out "$DIR" ;;
    loads) step python3 -m bench sweep lda-kernels --backend gpu --k 64,128,256,384,512,768,1024 --variant warpscan \
             --precision f32,f64 --loads scalar,vector --out "$DIR" ;;
    iterations) step $SWEEP --iterations 3,100 --k 512,1020,1024 --precision f32,f64 \
                  --variant alg1,alg4,alg7,warpscan --repeats 3 ;;
    warpscan)
      step $SWEEP --iterations 3 --k 256,512,1024 --precision f32,f64 --variant alg1,alg4,alg7,warpscan --repeats 3
      step python3 -m bench profile lda --k 1024 --precision f32,f64 --iterations 1 --variant warpscan \
        --kernels drawz --out "$DIR" ;;
    sawtooth) step python3 -m bench profile lda --k 993,994,996,1000,1008,1016,1023,1024 --precision f32,f64 \
                --iterations 1 --variant alg4,alg7 --kernels drawz --metrics time,memory,local,global,issue,stalls --out "$DIR" ;;
    fig7-f32) step $SWEEP --iterations 3 --k 4..1024 --precision f32 --variant alg1,alg4,alg7,warpscan --repeats 3 ;;
    fig7-f64) step $SWEEP --iterations 3 --k 4..1024 --precision f64 --variant alg1,alg4,alg7,warpscan --repeats 3 ;;
    fig8) step $SWEEP --iterations 3 --k 480..544:1 --variant alg4,alg7 --repeats 5 ;;
    profile) step python3 -m bench profile lda --k 1024 --precision f32,f64 --iterations 1 \
               --variant alg1,alg4,alg7,warpscan --kernels drawz --out "$DIR" ;;
    registers)
      CAPPED="--dataset nytimes-synth --k 1024 --precision f32,f64 --variant alg4,alg7 --registers 0,64,96,128"
      step python3 -m bench sweep lda-kernels --backend gpu --out "$DIR" $CAPPED
      step python3 -m bench profile lda-kernels $CAPPED --metrics time,occupancy,local,issue,stalls --out "$DIR" ;;
    *) echo "unknown stage $stage"; exit 2 ;;
  esac
done

echo; echo "==== summary" | tee -a "$LOG"
python3 - "$DIR" <<'EOF' 2>&1 | tee -a "$LOG"
import sys
from pathlib import Path

import pandas as pd

from bench.results import latest_code, load

for suite, index, columns in (("lda", ["update", "precision", "K", "iterations"], "seconds"),
                              ("lda-kernels", ["dataset", "precision", "K", "storage", "registers", "loads"], "seconds")):
    path = Path(sys.argv[1]) / f"{suite}.csv"
    if not path.exists():
        continue
    df, schema, _ = load(path)
    df = latest_code(df, schema)
    df = df[df["code_version"] == df.sort_values("timestamp")["code_version"].iloc[-1]]
    ks = [k for k in (64, 256, 512, 1024) if k in set(df["K"])]
    table = df[df["K"].isin(ks)].pivot_table(index=index, columns="variant", values=columns, aggfunc="median")
    print(f"{suite}: median seconds, newest code only ({len(df)} rows); copy "
          f"{df['copy_gbps'].median():.0f} GB/s; SM clock {df['sm_clock_mhz_min'].min()}-"
          f"{df['sm_clock_mhz_max'].max()} MHz; throttled points: "
          f"{df.loc[df['throttled'].astype(str) == 'True', 'group'].nunique()}")
    print(table.to_string(float_format=lambda x: f"{x * 1e3:.3f} ms"))
EOF
echo "exit status $status" | tee -a "$LOG"
exit $status
