"""v1 -> v2 value conversions and value parsing (reference §4.6). Pure functions, property-tested.

Plans carry cgroup v1 units (shares, quota in µs, bytes, -1 = unlimited). The shares -> weight formula is
the kubelet's (KEP-2254) and lives once, in `hookserver.cgroupmath`; it is reused here.
"""

from __future__ import annotations

import re

from hookserver.cgroupmath import shares_to_weight, weight_to_shares

__all__ = [
    "UNLIMITED",
    "blkio_weight_to_io_weight",
    "cpu_max_field",
    "cpu_max_with_period",
    "format_cpuset",
    "limit_to_v2",
    "parse_cpuset",
    "parse_limit",
    "quota_to_cpu_max",
    "shares_to_weight",
    "weight_to_shares",
]

# One value for "no limit", larger than any real limit so that max(old, new) treats it as infinite.
UNLIMITED = 1 << 63

# What the kernel and the runtimes write for "no limit": v2 `max`, v1 `-1`, and what v1 memory shows
# after `-1` (PAGE_COUNTER_MAX pages, page-aligned) or a raw LLONG_MAX.
_UNLIMITED_TOKENS = frozenset({"max", "-1", "9223372036854771712", "9223372036854775807"})

_CPUSET = re.compile(r"\d+(-\d+)?(,\d+(-\d+)?)*")


def parse_limit(text: str) -> int:
    """An integer file value where -1 / max / LLONG_MAX (page-aligned or not) all mean `UNLIMITED`.

    Raises ValueError for anything else that is not an integer.
    """
    token = text.strip()
    if token in _UNLIMITED_TOKENS:
        return UNLIMITED
    value = int(token)
    return UNLIMITED if value < 0 or value >= 9223372036854771712 else value


def quota_to_cpu_max(quota_us: int) -> str:
    """v1 cfs quota -> the first field of v2 `cpu.max`. Written alone, so the kernel keeps the period."""
    return "max" if quota_us < 0 else str(quota_us)


def cpu_max_field(text: str, index: int) -> str:
    """Field 0 (quota or `max`) or 1 (period) of a `cpu.max` value; a missing period reads as ""."""
    fields = text.split()
    return fields[index] if index < len(fields) else ""


def cpu_max_with_period(current_cpu_max: str, period_us: int) -> str:
    """The `cpu.max` text that sets the period while keeping the current quota (`max` when unknown)."""
    quota = cpu_max_field(current_cpu_max, 0) or "max"
    return f"{quota} {period_us}"


def limit_to_v2(limit_bytes: int) -> str:
    """v1 memory bytes (-1 = unlimited) -> v2 `memory.max`/`memory.high` text."""
    return "max" if limit_bytes < 0 else str(limit_bytes)


def blkio_weight_to_io_weight(weight: int) -> int:
    """v1 blkio.weight [10, 1000] -> v2 io.weight [1, 10000] (runc's mapping)."""
    return 1 + (weight - 10) * 9999 // 990


def parse_cpuset(text: str) -> frozenset[int]:
    """`0-3,8` -> {0,1,2,3,8}. Empty text is the empty set. Raises ValueError on bad syntax."""
    token = text.strip()
    if not token:
        return frozenset()
    if not _CPUSET.fullmatch(token):
        raise ValueError(f"not a cpu list: {token!r}")
    out: set[int] = set()
    for part in token.split(","):
        lo, _, hi = part.partition("-")
        first, last = int(lo), int(hi or lo)
        if last < first:
            raise ValueError(f"descending range {part!r} in cpu list")
        if last - first > 1 << 16:
            raise ValueError(f"range {part!r} in cpu list is too large")
        out.update(range(first, last + 1))
    return frozenset(out)


def format_cpuset(cpus: frozenset[int] | set[int]) -> str:
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
