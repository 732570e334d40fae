"""The sweep loop: every point of a sweep, all variants measured interleaved,
repeat by repeat, so that drift on a busy machine hits them alike; rows
appended a point at a time, so an interrupted sweep keeps every finished point
and a rerun resumes where it stopped."""

import signal
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from bench import envinfo, results
from bench.suite import Suite
from bench.timing import make_timer

console = Console(stderr=True)


@dataclass
class SweepSettings:
    variants: list[str]
    repeats: int
    warmup: int
    backend: str
    out_dir: Path
    fresh: bool = False


def describe(point: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in point.items() if k not in ("suite", "backend"))


def measure_point(suite: Suite, point: dict, settings: SweepSettings):
    """Yield one row per (repeat, variant) of a point; warm-up runs first."""
    workload = suite.prepare(point)
    for variant in settings.variants:
        for _ in range(settings.warmup):
            suite.measure(workload, variant, make_timer(settings.backend))
    for repeat in range(settings.repeats):
        for variant in settings.variants:
            timer = make_timer(settings.backend)
            extra = suite.measure(workload, variant, timer)
            row = {**point, "variant": variant, "repeat": repeat, "seconds": timer.seconds}
            row.update({f"{name}_s": timer.phases.get(name, 0.0) for name in suite.phases})
            row.update(extra)
            yield row


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def sweep(suite: Suite, points: list[dict], settings: SweepSettings) -> int:
    """Measure every point not yet measured with this code; return an exit status."""
    csv_path = settings.out_dir / f"{suite.name}.csv"
    sidecar = settings.out_dir / f"{suite.name}.json"
    code = envinfo.code_version()
    run_id = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ-") + uuid.uuid4().hex[:6]
    env = envinfo.collect_env(sys.argv)
    machine = envinfo.machine_slug(env, settings.backend)

    todo = points
    if not settings.fresh and csv_path.exists():
        index = results.measured_index(csv_path, code)
        todo = [p for p in points if not results.is_measured(index, p, settings.variants)]
        if len(todo) < len(points):
            console.print(f"resuming: {len(points) - len(todo)} of {len(points)} points already in {csv_path} "
                          "(same code and settings; --fresh re-measures them)")
    info = {**env, "suite": suite.name, "code_version": code, "backend": settings.backend,
            "variants": settings.variants, "repeats": settings.repeats, "warmup": settings.warmup,
            "points": len(todo), "status": "running"}
    results.update_sidecar(sidecar, run_id, info)

    done = 0
    started = last_note = time.monotonic()
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
    try:
        with Progress(*columns, console=console) as progress:
            task = progress.add_task("starting", total=len(todo))
            for point in todo:
                progress.update(task, description=describe(point))
                group = uuid.uuid4().hex[:12]
                rows = [{**row, "group": group, "run_id": run_id, "code_version": code,
                         "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                         "machine": machine}
                        for row in measure_point(suite, point, settings)]
                results.append_rows(csv_path, rows)
                done += 1
                progress.advance(task)
                if not console.is_terminal and (time.monotonic() - last_note > 30 or done == len(todo)):
                    # No live bar in a log: a line every 30 s instead.
                    last_note = time.monotonic()
                    eta = (last_note - started) / done * (len(todo) - done)
                    console.print(f"[{done}/{len(todo)}] {describe(point)}; ETA {eta:.0f} s")
    except KeyboardInterrupt:
        results.update_sidecar(sidecar, run_id, {**info, "status": "interrupted", "points_done": done,
                                                 "finished": datetime.now(timezone.utc).isoformat()})
        console.print(f"[yellow]interrupted[/]: {done} of {len(todo)} points measured and kept in {csv_path}; "
                      "run the same command again to resume.")
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    results.update_sidecar(sidecar, run_id, {**info, "status": "complete", "points_done": done,
                                             "finished": datetime.now(timezone.utc).isoformat()})
    console.print(f"{done} points measured; results in {csv_path}")
    return 0
