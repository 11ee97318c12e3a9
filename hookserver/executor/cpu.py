"""The cpu controller's files and their rules.

v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us` become the two fields of v2 `cpu.max`; shares become
`cpu.weight`. The period sorts before the quota in one cgroup, and the executor retries the period after the
quota when the kernel refuses the period first (runc's order in `fs/cpu.go`). Leveled updates grow the quota
top-down (max(old, new), `max`/-1 infinite) and shrink it bottom-up.
"""

from __future__ import annotations

from collections.abc import Hashable

from hookserver.executor.convert import (
    UNLIMITED,
    cpu_max_field,
    cpu_max_with_period,
    parse_limit,
    quota_to_cpu_max,
    shares_to_weight,
)
from hookserver.executor.knob import Knob, Merge, check_int_range, int_key
from hookserver.executor.plan import CgroupResource
from hookserver.cgroupmath import (
    CFS_QUOTA_MIN_US,
    CPU_SHARES_MAX,
    CPU_SHARES_MIN,
    CPU_WEIGHT_MAX,
    CPU_WEIGHT_MIN,
)

__all__ = ["CPU_KNOBS", "PERIOD_MAX_US", "PERIOD_MIN_US", "QUOTA_MAX_US"]

# The kernel's CFS bandwidth bounds (kernel/sched/core.c): period 1 ms .. 1 s; quota >= 1 ms.
PERIOD_MIN_US = 1_000
PERIOD_MAX_US = 1_000_000
QUOTA_MAX_US = (1 << 44) // 1000  # max_cfs_runtime in µs

_check_shares = check_int_range("cpu.shares", CPU_SHARES_MIN, CPU_SHARES_MAX)
_check_weight = check_int_range("cpu.weight", CPU_WEIGHT_MIN, CPU_WEIGHT_MAX)


def _check_shares_or_weight(value: int | str, v2: bool) -> str:
    problem = _check_shares(value, v2)
    if problem or not v2:
        return problem
    return _check_weight(shares_to_weight(int(value)), v2)


def _render_shares(value: int | str, v2: bool, current: str) -> str:
    return str(shares_to_weight(int(value))) if v2 else str(int(value))


_check_quota = check_int_range("cpu.cfs_quota_us", CFS_QUOTA_MIN_US, QUOTA_MAX_US, allow=(-1,))


def _render_quota(value: int | str, v2: bool, current: str) -> str:
    quota = int(value)
    return quota_to_cpu_max(quota) if v2 else str(-1 if quota < 0 else quota)


def _quota_key(text: str, v2: bool) -> Hashable:
    token = cpu_max_field(text, 0) if v2 else text.strip()
    try:
        return parse_limit(token)
    except ValueError:
        return token


def _unkey_quota(key: Hashable, v2: bool) -> str:
    assert isinstance(key, int)
    if key >= UNLIMITED:
        return "max" if v2 else "-1"
    return str(key)


_check_period = check_int_range("cpu.cfs_period_us", PERIOD_MIN_US, PERIOD_MAX_US)


def _render_period(value: int | str, v2: bool, current: str) -> str:
    return cpu_max_with_period(current, int(value)) if v2 else str(int(value))


def _period_key(text: str, v2: bool) -> Hashable:
    return int_key(cpu_max_field(text, 1) if v2 else text, v2)


_check_burst = check_int_range("cpu.cfs_burst_us", 0, QUOTA_MAX_US)
_check_idle = check_int_range("cpu.idle", 0, 1)
_check_bvt = check_int_range("cpu.bvt_warp_ns", -1, 2)


def _int_render(value: int | str, v2: bool, current: str) -> str:
    return str(int(value))


CPU_KNOBS: tuple[Knob, ...] = (
    Knob(
        CgroupResource.CPU_SHARES, "cpu", "cpu.shares", "cpu.weight",
        check=_check_shares_or_weight, render=_render_shares, key=int_key, readback=True,
    ),
    Knob(
        CgroupResource.CPU_CFS_PERIOD, "cpu", "cpu.cfs_period_us", "cpu.max",
        check=_check_period, render=_render_period, key=_period_key, order=0,
    ),
    Knob(
        CgroupResource.CPU_CFS_QUOTA, "cpu", "cpu.cfs_quota_us", "cpu.max",
        check=_check_quota, render=_render_quota, key=_quota_key, merge=Merge.MAX, order=5, unkey=_unkey_quota,
    ),
    Knob(
        CgroupResource.CPU_CFS_BURST, "cpu", "cpu.cfs_burst_us", "cpu.max.burst",
        check=_check_burst, render=_int_render, key=int_key,
    ),
    Knob(CgroupResource.CPU_IDLE, "cpu", "cpu.idle", "cpu.idle", check=_check_idle, render=_int_render, key=int_key),
    Knob(
        CgroupResource.CPU_BVT_WARP_NS, "cpu", "cpu.bvt_warp_ns", "cpu.bvt_warp_ns",
        check=_check_bvt, render=_int_render, key=int_key,
    ),
)
