"""cgroup CPU arithmetic shared by hooks and the executor: batch-resource formulas and v1<->v2 conversions (reference §4.2-4.6).

Pure integer arithmetic: batch-cpu is in milli-cores, memory in bytes, -1 means unlimited.
"""

from __future__ import annotations

import math

__all__ = [
    "CFS_BASE_PERIOD_US",
    "CFS_QUOTA_MIN_US",
    "CPU_SHARES_MAX",
    "CPU_SHARES_MIN",
    "CPU_WEIGHT_MAX",
    "CPU_WEIGHT_MIN",
    "apply_quota_rule",
    "milli_cpu_to_quota",
    "milli_cpu_to_shares",
    "shares_to_weight",
    "weight_to_shares",
]

CFS_BASE_PERIOD_US = 100_000
CFS_QUOTA_MIN_US = 1_000
CPU_SHARES_MIN = 2
CPU_SHARES_MAX = 262_144
CPU_WEIGHT_MIN = 1
CPU_WEIGHT_MAX = 10_000


def milli_cpu_to_shares(milli_cpu: int) -> int:
    """m <= 0 gives 2; otherwise m * 1024 / 1000 (integer division), clamped to [2, 262144]."""
    if milli_cpu <= 0:
        return CPU_SHARES_MIN
    shares = milli_cpu * 1024 // 1000
    return max(CPU_SHARES_MIN, min(CPU_SHARES_MAX, shares))


def milli_cpu_to_quota(milli_cpu: int) -> int:
    """q = m * period / 1000; q <= 0 is unlimited (-1); 0 < q < 1000 is raised to 1000 (#696)."""
    quota = milli_cpu * CFS_BASE_PERIOD_US // 1000
    if quota <= 0:
        return -1
    return max(quota, CFS_QUOTA_MIN_US)


def apply_quota_rule(quota_us: int, *, cfs_quota_suppress: bool, normalization_ratio: float | None) -> int:
    """The batchresource CFS-quota rule: -1 under cfsQuota suppress, else ceil(q / ratio) for ratio > 1."""
    if cfs_quota_suppress:
        return -1
    if quota_us > 0 and normalization_ratio is not None and normalization_ratio > 1:
        return math.ceil(quota_us / normalization_ratio)
    return quota_us


def shares_to_weight(shares: int) -> int:
    """cgroup v2 cpu.weight from v1 shares (KEP-2254): 1 + (shares - 2) * 9999 / 262142, clamped."""
    weight = 1 + ((shares - 2) * 9999) // 262142
    return max(CPU_WEIGHT_MIN, min(CPU_WEIGHT_MAX, weight))


def weight_to_shares(weight: int) -> int:
    """The inverse mapping, used when reading cpu.weight back."""
    return (weight - 1) * 262142 // 9999 + 2
