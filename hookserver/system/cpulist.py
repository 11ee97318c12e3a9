"""The kernel's CPU list format (`0-3,8,10-11`): cpuset.cpus, sysfs topology, node cpulists.

One parser and one formatter for every reader (topology, cgroup stats) and writer (the executor's
cpuset rules), so they cannot disagree about what a list means.
"""

from __future__ import annotations

import re

__all__ = ["MAX_CPUS", "format_cpu_list", "parse_cpu_list"]

MAX_CPUS = 1 << 16
_LIST = re.compile(r"\d+(-\d+)?(,\d+(-\d+)?)*")


def parse_cpu_list(text: str) -> frozenset[int]:
    """`0-3,8` -> {0, 1, 2, 3, 8}; empty text is the empty set. Raises ValueError on anything else
    (bad syntax, a descending range, a CPU id of MAX_CPUS or more)."""
    token = text.strip()
    if not token:
        return frozenset()
    if not _LIST.fullmatch(token):
        raise ValueError(f"not a cpu list: {token[:64]!r}")
    out: set[int] = set()
    for part in token.split(","):
        lo, _, hi = part.partition("-")
        first, last = int(lo), int(hi or lo)
        if last < first:
            raise ValueError(f"descending range {part!r} in cpu list")
        if last >= MAX_CPUS:
            raise ValueError(f"cpu {last} in {part!r} is beyond the {MAX_CPUS} the kernel supports")
        out.update(range(first, last + 1))
    return frozenset(out)


def format_cpu_list(cpus: frozenset[int] | set[int]) -> str:
    """{0,1,2,3,8} -> `0-3,8`: the kernel's own canonical form."""
    ordered = sorted(cpus)
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)
