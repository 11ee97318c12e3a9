"""v1 -> v2 value conversions and value parsing (reference §4.6). Pure functions, property-tested.

Plans carry cgroup v1 units (shares, quota in µs, bytes, -1 = unlimited). The shares -> weight formula is
the kubelet's (KEP-2254) and lives once, in `hookserver.cgroupmath`; it is reused here.
"""

from __future__ import annotations


from hookserver.cgroupmath import shares_to_weight, weight_to_shares

__all__ = [
    "UNLIMITED",
    "blkio_weight_to_io_weight",
    "cpu_max_field",
    "cpu_max_with_period",
    "limit_to_v2",
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


