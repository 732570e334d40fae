"""A suite shaped unlike lda, to show bench/ serves any suite: axes other than K
(a geometric size, a choice, a tunable setting), a higher-is-better metric gated by
a tolerance, a per-iteration series, an invalid combination, a peer whose package
is missing and a GPU-only variant. Registered in tests with BENCH_SUITES=fake=fake_suite."""

import numpy as np

from bench.specs import parse_choices, parse_ints
from bench.suite import Axis, Defaults, Metric, Plot, Suite, Variant

ITERATIONS = 3


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
    plots = (Plot("fake-time-vs-n", "time against n", x="n", panel="method", logx=True),
             Plot("fake-convergence", "objective against time", x="wall_s", y="objective", series=True))
    sources = ("tests/fake_suite.py",)

    def defaults(self, backend):
        return Defaults(repeats=2, warmup=1)

    def skip(self, point):
        if point["method"] == "loop" and point["n"] > 128:
            return "the loop method is too slow beyond n = 128"
        return None

    def prepare(self, point):
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
        return {"quality": total / len(values), "final_objective": objective}


SUITE = FakeSuite()
