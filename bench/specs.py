"""Axis value specifications, as typed on the command line.

Integers: `A..B` (the axis' default step), `A..B:S` (step S), `A..B:*F` (times F),
`2^A..2^B` (every power of two between), single values, and comma-separated mixes,
e.g. `4..1024`, `480..544:1`, `16..4096:*2`, `2^3..2^14`, `16,48,80`.
Numbers and choices: comma lists. Every error is a BenchError naming the spec."""

import re

from bench.errors import BenchError

_RANGE = re.compile(r"^(\d+)\.\.(\d+)(?::(\*?)(\d+))?$")
_POWERS = re.compile(r"^(\d+)\^(\d+)\.\.(\d+)\^(\d+)$")


def _parts(spec) -> list[str]:
    parts = str(spec).replace(" ", "").split(",")
    if parts == [""]:
        raise BenchError(f"empty spec {spec!r}")
    if "" in parts:
        raise BenchError(f"bad spec {spec!r}: an empty value between commas")
    return parts


def parse_ints(spec, what: str = "value", default_step: int = 1, minimum: int = 1,
               maximum: int | None = None, multiple_of: int = 1) -> list[int]:
    """The integers of a spec, in order, without duplicates (each a multiple of `multiple_of`:
    a GPU's threads in whole warps)."""
    values: list[int] = []
    for part in _parts(spec):
        if match := _RANGE.match(part):
            lo, hi, times, step = int(match[1]), int(match[2]), match[3], match[4]
            step = int(step) if step else default_step
            if lo > hi or step < (2 if times else 1) or (times and lo < 1):
                raise BenchError(f"bad {what} spec {spec!r}: in {part!r} need A <= B, a step >= 1 "
                                 f"(a factor >= 2 and A >= 1 with :*F)")
            if times:
                value = lo
                while value <= hi:
                    values.append(value)
                    value *= step
            else:
                values.extend(range(lo, hi + 1, step))
        elif match := _POWERS.match(part):
            base, lo, base2, hi = (int(g) for g in match.groups())
            if base != base2 or base < 2 or lo > hi:
                raise BenchError(f"bad {what} spec {spec!r}: in {part!r} need one base >= 2 and A <= B (e.g. 2^3..2^14)")
            values.extend(base**e for e in range(lo, hi + 1))
        elif part.isdigit():
            values.append(int(part))
        else:
            raise BenchError(f"bad {what} spec {spec!r}: {part!r} is not N, A..B, A..B:S, A..B:*F or 2^A..2^B "
                             f"(e.g. 4..1024, 480..544:1, 16..4096:*2, 16,48)")
    if any(v < minimum for v in values):
        raise BenchError(f"bad {what} spec {spec!r}: {what} must be >= {minimum}")
    if maximum is not None and any(v > maximum for v in values):
        raise BenchError(f"bad {what} spec {spec!r}: {what} must be <= {maximum}")
    if any(v % multiple_of for v in values):
        raise BenchError(f"bad {what} spec {spec!r}: {what} must be a multiple of {multiple_of}")
    return list(dict.fromkeys(values))


def parse_floats(spec, what: str = "value", low: float = float("-inf"), high: float = float("inf")) -> list[float]:
    """A comma list of numbers in [low, high]."""
    values = []
    for part in _parts(spec):
        try:
            value = float(part)
        except ValueError:
            raise BenchError(f"bad {what} spec {spec!r}: {part!r} is not a number") from None
        if not low <= value <= high:
            raise BenchError(f"bad {what} {value:g}: must be in [{low:g}, {high:g}]")
        values.append(value)
    return list(dict.fromkeys(values))


def parse_choices(spec, known, what: str) -> list[str]:
    """A comma list of names, each one of `known`."""
    if not str(spec).strip():
        raise BenchError(f"no {what} given (an empty list); known: {', '.join(map(str, known))}")
    items = _parts(spec)
    for item in items:
        if item not in known:
            raise BenchError(f"unknown {what} {item!r}; known: {', '.join(map(str, known))}")
    return list(dict.fromkeys(items))
