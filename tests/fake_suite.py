"""A suite shaped unlike lda, to show bench/ serves any suite: axes other than K
(a geometric size, a choice, a tunable setting), a higher-is-better metric gated by
a tolerance, a per-iteration series, an invalid combination, a peer whose package
is missing and a GPU-only variant. Registered in tests with BENCH_SUITES=fake=fake_suite."""

import os
import time

import numpy as np

from bench.errors import BenchError
from bench.recipes import Claim, Measured, Recipe, Sweep, gate, size
from bench.specs import parse_choices, parse_ints
from bench.suite import Axis, Defaults, Label, Metric, Plot, Suite, Variant

ITERATIONS = 3
UNLUCKY = 13  # a size whose workload fails: a recipe that fails beside one that does not
REFUSED = 7  # a size the suite's check refuses before anything is measured


def _twice_over_plain(results):
    """Ours for claim F1: the median time of `twice` over `plain`."""
    df = results.frame("fake")
    if df.empty or not {"plain", "twice"} <= set(df["variant"]):
        return None
    ratio = df[df["variant"] == "twice"]["seconds"].median() / df[df["variant"] == "plain"]["seconds"].median()
    return Measured(ratio, f"twice takes {ratio:.2f}x plain's time")


RECIPES = (
    Recipe("fig1", "Figure 1: time against n", figures=("fake-time-vs-n",), sweeps=(
        Sweep("fake", {"method": "vector"}, variants=("plain", "twice"), cpu=size(n="64,128", repeats=2),
              quick=size(n="2^6..2^10"), paper=size(n="2^6..2^16", repeats=5)),
        Sweep("fake", {"method": "loop"}, cpu=size(n="64"), paper=size(n="64,128")),
    )),
    Recipe("unlucky", "Figure 2: a size that fails", sweeps=(Sweep("fake", cpu=size(n=UNLUCKY, method="vector")),)),
    gate(Sweep("fake", {"method": "vector"}, variants=("plain", "twice"), ci_cpu=size(n="64", repeats=3),
               ci_gpu=size(n="2^12", repeats=5))),
)
CLAIMS = (
    Claim("F1", "twice does the work twice: 2x slower", _twice_over_plain, holds=lambda ratio: ratio > 1.5,
          rule="twice/plain > 1.5", why="the loop body is repeated", recipe="fig1"),
    Claim("F2", "plain is 10x faster than itself", lambda results: None, holds=lambda value: False,
          rule="never", recipe="fig1"),
)


class FakeSuite(Suite):
    name = "fake"
    description = "a test suite: sums of squares by two methods"
    axes = (
        Axis("n", "2^6..2^8", lambda s: parse_ints(s, "n"), "problem size"),
        Axis("method", "loop,vector", lambda s: parse_choices(s, ("loop", "vector"), "method")),
        Axis("block", "8", lambda s: parse_ints(s, "block"), "a tunable setting", tune=True),
    )
    variants = (
        Variant("plain", "the reference"),
        Variant("twice", "does the work twice"),
        Variant("peerlib", "a peer library that is not installed", peer=True, needs=("no_such_package_xyz",)),
        Variant("gpuonly", "a GPU kernel", devices=("gpu",)),
    )
    reference = "plain"
    phases = ("work",)
    metrics = (
        Metric("quality", "", better="higher", gate="tolerance", tolerance=0.05),
        Metric("final_objective", "", help="a name that once made a key column"),
        Metric("objective", "", better="higher", per="iteration"),
    )
    labels = (Label("path", help="the way the run went: the method's name"),)
    plots = (Plot("fake-time-vs-n", "time against n", x="n", panel="method", logx=True),
             Plot("fake-convergence", "objective against time", x="wall_s", y="objective", series=True))
    sources = ("tests/fake_suite.py",)
    paper = "A Fake Paper, A. Author, Proceedings of Tests 2026"
    recipes = RECIPES
    claims = CLAIMS

    def defaults(self, backend):
        return Defaults(repeats=2, warmup=1)

    def skip(self, point):
        if point["method"] == "loop" and point["n"] > 128:
            return "the loop method is too slow beyond n = 128"
        return None

    def check(self, points):
        if any(point["n"] == REFUSED for point in points):
            raise BenchError(f"n = {REFUSED} does not fit this machine")

    def prepare(self, point):
        time.sleep(float(os.environ.get("FAKE_SUITE_SLEEP", 0)))  # a slow point: concurrent sweeps overlap
        if point["n"] == UNLUCKY:
            raise RuntimeError(f"n = {UNLUCKY} is unlucky")
        return np.arange(point["n"], dtype=np.float64), point["method"]

    def run(self, workload, variant, ctx):
        values, method = workload
        total = 0.0
        for iteration in range(ITERATIONS):
            with ctx.phase("work"):
                for _ in range(2 if variant == "twice" else 1):
                    total = sum(v * v for v in values) if method == "loop" else float(values @ values)
            with ctx.untimed():
                objective = -1.0 / (iteration + 1)
            ctx.record(iteration, objective=objective)
        return {"quality": total / len(values), "final_objective": objective, "path": method}


SUITE = FakeSuite()
