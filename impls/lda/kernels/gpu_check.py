"""Everything the draw-z kernels need checked on a GPU, in one device call.

Run from the repository root on the GPU machine:

    PYTHONPATH=. python impls/lda/kernels/gpu_check.py --out "$OUT"

It prints (and writes to OUT/gpu_check.log) the environment (nvidia-smi, CuPy,
CUDA), the result of tests/test_drawz_gpu.py, each kernel's resources as the
driver loaded it, a device-to-device copy bandwidth, and the draw-z kernels'
times on the wiki-synth corpus (padded to a multiple of 32) with random
normalised theta and phi: median of --repeats launches after --warmup, each
timed with CUDA events.  Effective bandwidth counts the floor T*K*sizeof(value)
bytes (one phi row per token) and is also given as a fraction of the copy
bandwidth (bytes read + written) measured in the same run.  The table also
goes to OUT/drawz_timings.csv.
"""

import argparse
import csv
import datetime
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from bench.timing import CudaEventTimer, copy_bandwidth_gbps  # noqa: E402  (after the path is set)
from impls.lda import drawz_gpu  # noqa: E402

CONFIGS = [("alg1", "local"), ("alg1-linear", "local"), ("alg4", "local"), ("alg7", "local"), ("warpscan", "local"),
           ("alg4", "global"), ("alg7", "global")]


class Tee:
    """Print to the terminal and to the log file."""

    def __init__(self, path):
        self.file = open(path, "w", buffering=1)

    def __call__(self, *args):
        text = " ".join(str(a) for a in args)
        print(text, flush=True)
        self.file.write(text + "\n")


def section(log, title):
    log("")
    log(f"==== {title} " + "=" * max(0, 70 - len(title)))


def run_command(log, command, **kwargs):
    """Run a command, logging its output as it comes; return its exit status."""
    log("$ " + " ".join(command))
    try:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs)
    except OSError as exc:
        log(f"cannot run: {exc}")
        return -1
    for line in proc.stdout:
        log(line.rstrip("\n"))
    return proc.wait()


def environment(log):
    import cupy

    section(log, "environment")
    log("date (UTC):", datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    log("python:", platform.python_version(), "numpy:", np.__version__, "cupy:", cupy.__version__)
    runtime = cupy.cuda.runtime
    try:
        nvrtc = cupy.cuda.nvrtc.getVersion()
    except Exception as exc:  # only informative
        nvrtc = f"unknown ({exc})"
    log("CUDA runtime:", runtime.runtimeGetVersion(), "driver:", runtime.driverGetVersion(), "NVRTC:", nvrtc)
    props = runtime.getDeviceProperties(0)
    log("device:", props["name"].decode(), f"SMs {props['multiProcessorCount']},",
        f"L2 {props['l2CacheSize'] / 2**20:.0f} MiB, memory {props['totalGlobalMem'] / 2**30:.1f} GiB,",
        f"cc {props['major']}.{props['minor']}")
    run_command(log, ["nvidia-smi"])
    run_command(log, ["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,"
                      "temperature.gpu,power.draw,power.limit", "--format=csv"])
    return props["name"].decode()


def tests(log):
    section(log, "tests/test_drawz_gpu.py")
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    command = [sys.executable, "-m", "pytest", "tests/test_drawz_gpu.py", "-q", "-ra", "--durations=8"]
    return run_command(log, command, cwd=REPO, env=env)


def resources(log):
    """Registers and local memory of each kernel as NVRTC built it for this GPU."""
    section(log, "kernel resources (NVRTC build for this device)")
    log(f"{'kernel':32s} {'regs':>5s} {'local B':>8s} {'shared B':>9s} {'max threads':>12s}")
    for name in drawz_gpu.kernel_names():
        try:
            f = drawz_gpu.kernel(name)
            log(f"{name:32s} {f.num_regs:5d} {f.local_size_bytes:8d} {f.shared_size_bytes:9d} "
                f"{f.max_threads_per_block:12d}")
        except Exception as exc:  # informative only: go on to the timings
            log(f"{name:32s} attributes unavailable: {exc!r}")


def event_times(launch, warmup, repeats):
    """Seconds per launch: each of `repeats` launches timed with CUDA events."""
    for _ in range(warmup):
        launch()
    times = []
    for _ in range(repeats):
        timer = CudaEventTimer()
        with timer.run():
            launch()
        times.append(timer.seconds)
    return np.array(times)


def copy_bandwidth(log, repeats):
    """The device-to-device copy bandwidth the suite records with every GPU row."""
    section(log, "device-to-device copy")
    bandwidth = copy_bandwidth_gbps(repeats=repeats)
    log(f"copy of 2 GiB, median of {repeats} (bench.timing.copy_bandwidth_gbps): {bandwidth:.0f} GB/s read+write")
    return bandwidth


def timings(log, device_name, ks, precisions, warmup, repeats, copy_gbs, out):
    import cupy

    from bench.corpus import load_corpus

    section(log, "draw-z timings")
    corpus = load_corpus("wiki-synth").padded(32)
    M, T, V = corpus.num_docs, corpus.num_tokens, corpus.vocab_size
    log(f"corpus wiki-synth padded to 32: M = {M} documents, T = {T} tokens, V = {V} words, "
        f"longest document {corpus.max_length}; block {drawz_gpu.BLOCK} threads; "
        f"median of {repeats} launches after {warmup} warm-up")
    doc_ptr = cupy.asarray(corpus.doc_ptr)
    words = cupy.asarray(corpus.words)
    cupy.random.seed(12345)
    rows = []
    header = (f"{'precision':9s} {'K':>5s} {'variant':12s} {'storage':7s} {'ms':>9s} {'spread %':>8s} "
              f"{'GB/s':>8s} {'of copy':>8s} {'z != alg1':>10s}")
    log(header)
    for precision in precisions:
        dtype = np.float32 if precision == "f32" else np.float64
        for K in ks:
            # Random, normalised weights: theta rows and phi columns (topics) sum to 1.
            theta = cupy.random.random_sample((M, K), dtype=dtype) + dtype(1e-3)
            theta /= theta.sum(axis=1, keepdims=True)
            phi = cupy.random.random_sample((V, K), dtype=dtype) + dtype(1e-3)
            phi /= phi.sum(axis=0, keepdims=True)
            u = cupy.random.random_sample(T, dtype=dtype)
            z = cupy.empty(T, dtype=cupy.int32)
            reference = None
            for variant, storage in CONFIGS:
                def launch():
                    drawz_gpu.draw_z_gpu(variant, doc_ptr, words, theta, phi, u, z, 32, storage=storage)

                z.fill(-1)
                launch()
                cupy.cuda.get_current_stream().synchronize()
                if not bool(((z >= 0) & (z < K)).all()):
                    raise AssertionError(f"{variant}/{storage} K={K} {precision}: z not fully written")
                if reference is None:
                    reference = z.copy()
                differ = int((z != reference).sum())
                times = event_times(launch, warmup, repeats)
                t = float(np.median(times))
                gbs = T * K * np.dtype(dtype).itemsize / t / 1e9
                spread = 100 * (times.max() - times.min()) / t
                row = {"device": device_name, "precision": precision, "K": K, "variant": variant,
                       "storage": storage, "ms": t * 1e3, "min_ms": times.min() * 1e3,
                       "max_ms": times.max() * 1e3, "gbs": gbs, "copy_gbs": copy_gbs,
                       "fraction": gbs / copy_gbs, "z_differs_from_alg1": differ, "tokens": T}
                rows.append(row)
                log(f"{precision:9s} {K:5d} {variant:12s} {storage:7s} {t * 1e3:9.3f} {spread:8.1f} "
                    f"{gbs:8.0f} {gbs / copy_gbs:8.3f} {differ:10d}")
            del theta, phi, u, z, reference
            cupy.get_default_memory_pool().free_all_blocks()
    with open(out / "drawz_timings.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return rows


def summary(log, rows, copy_gbs, test_status):
    section(log, "summary")
    log(f"tests: {'passed' if test_status == 0 else f'FAILED (exit status {test_status})'}; "
        f"copy bandwidth {copy_gbs:.0f} GB/s (read+write)")
    log("| precision | K | variant | storage | ms | GB/s | of copy |")
    log("| --- | ---: | --- | --- | ---: | ---: | ---: |")
    for r in rows:
        log(f"| {r['precision']} | {r['K']} | {r['variant']} | {r['storage']} | {r['ms']:.3f} | "
            f"{r['gbs']:.0f} | {r['fraction']:.3f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for the log and the CSV")
    parser.add_argument("--k", default="256,512,1024", help="comma-separated K values to time")
    parser.add_argument("--precision", default="f32,f64")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--skip-tests", action="store_true")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = Tee(out / "gpu_check.log")
    device_name = environment(log)
    test_status = 0 if args.skip_tests else tests(log)
    resources(log)
    copy_gbs = copy_bandwidth(log, args.repeats)
    rows = timings(log, device_name, [int(k) for k in args.k.split(",")], args.precision.split(","),
                   args.warmup, args.repeats, copy_gbs, out)
    summary(log, rows, copy_gbs, test_status)
    return 0 if test_status == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
