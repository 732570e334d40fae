"""`bench verify --sanitizer TOOL`: the verification run under NVIDIA compute-sanitizer,
its error reports grouped by kernel."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections import Counter

from bench.errors import BenchError
from bench.specs import parse_choices

TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
PREFIX = "========="
# Lines of the sanitizer's own that are not the start of an error report.
_NOT_REPORTS = re.compile(r"^(COMPUTE-SANITIZER|ERROR SUMMARY|RACECHECK SUMMARY|Saved host backtrace|Host Frame|"
                          r"Program hit|Target application returned|No .*error|LEAK SUMMARY)")
_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) error|RACECHECK SUMMARY: .*?\((\d+) error")
# The kernel of a report: a name followed by its arguments or an offset ("k(int *)+0x90", "k+0x90", "in k(...)").
_KERNEL = re.compile(r"\b([A-Za-z_]\w*)(?:<[^>]*>)?(?:\(|\+0x)")
_NOISE = {"at", "in", "and", "by"}


def executable() -> str:
    path = shutil.which("compute-sanitizer")
    if path is None:
        raise BenchError("compute-sanitizer not found on PATH: it comes with the CUDA toolkit (its bin/ folder)")
    return path


def reports(lines: list[str]) -> list[tuple[str, str]]:
    """(kernel, what) of every error report in the sanitizer's output: a report's first
    line is "========= WHAT", its details "=========     at ..." name the kernel ("?"
    where none does)."""
    found: list[list[str]] = []
    for line in lines:
        body = line[len(PREFIX):] if line.startswith(PREFIX) else ""
        text = body.strip()
        if not text or _NOT_REPORTS.match(text):
            continue
        if not body.startswith("  "):
            if text.startswith("Warning"):  # racecheck's warnings (hazards it does not count as errors)
                continue
            found.append(["?", text])
        if found and found[-1][0] == "?" and " at " in f" {text}":
            names = [n for n in _KERNEL.findall(f" {text}".split(" at ", 1)[1]) if n not in _NOISE]
            if names:
                found[-1][0] = names[0]
    return [(kernel, what) for kernel, what in found]


def run(suite, tool: str, command: list[str], echo=print) -> int:
    """Run `bench <command>` under the sanitizer; print the errors by kernel; 1 on any error
    or failed check, the verification's own status otherwise."""
    parse_choices(tool, TOOLS, "sanitizer tool")
    argv = [executable(), "--tool", tool, "--error-exitcode", "9", "--print-limit", "10000"]
    if suite.sanitizer_kernels:  # the suite's own kernels, not the libraries' (CuPy's scans race by design)
        argv += ["--kernel-name", f"kns={suite.sanitizer_kernels}"]
    argv += [sys.executable, "-m", "bench", *command]
    echo(f"compute-sanitizer --tool {tool}: bench {' '.join(command)}")
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines = []
    for line in process.stdout:
        lines.append(line.rstrip("\n"))
        if not line.startswith(PREFIX):
            echo(line.rstrip("\n"))
    status = process.wait()
    found = reports(lines)
    totals = [int(m.group(1) or m.group(2)) for line in lines if (m := _SUMMARY.search(line))]
    errors = max(len(found), sum(totals))
    for (kernel, what), n in sorted(Counter(found).items()):
        echo(f"  {n} x {kernel}: {what}")
    echo(f"compute-sanitizer {tool}: {errors} errors" + (f" in {len({k for k, _ in found})} kernels" if found else ""))
    if errors or status == 9:
        return 1
    return status
