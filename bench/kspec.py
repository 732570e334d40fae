"""K specifications: `A..B` (step 4, the butterfly paper's grid), `A..B:S`,
single values and comma-separated mixes, e.g. `4..1024`, `480..544:1`, `16,48,80`."""

import re

from bench.errors import BenchError

_RANGE = re.compile(r"^(\d+)\.\.(\d+)(?::(\d+))?$")


def parse_k(spec: str, default_step: int = 4) -> list[int]:
    """The K values of a spec, in order, without duplicates; BenchError naming
    the spec when it is malformed or a K is below 1."""
    values: list[int] = []
    for part in str(spec).replace(" ", "").split(","):
        match = _RANGE.match(part)
        if match:
            lo, hi = int(match[1]), int(match[2])
            step = int(match[3]) if match[3] else default_step
            if step < 1 or lo > hi:
                raise BenchError(f"bad K spec {spec!r}: in {part!r} need A <= B and step >= 1")
            values.extend(range(lo, hi + 1, step))
        elif part.isdigit():
            values.append(int(part))
        else:
            raise BenchError(
                f"bad K spec {spec!r}: {part!r} is not K, A..B, or A..B:S (e.g. 4..1024, 480..544:1, 16,48)"
            )
    if any(k < 1 for k in values):
        raise BenchError(f"bad K spec {spec!r}: K must be >= 1")
    return list(dict.fromkeys(values))


def parse_list(spec: str, known, what: str) -> list[str]:
    """A comma-separated choice list, each item checked against `known`."""
    items = [s for s in str(spec).replace(" ", "").split(",") if s]
    for item in items:
        if item not in known:
            raise BenchError(f"unknown {what} {item!r}; known: {', '.join(known)}")
    if not items:
        raise BenchError(f"empty {what} list")
    return list(dict.fromkeys(items))
