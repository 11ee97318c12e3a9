"""The memory controller's files and their rules.

v1 `memory.limit_in_bytes` becomes v2 `memory.max`; `-1` is written as `-1` on v1 (the kernel then shows
9223372036854771712) and as `max` on v2. The kernel rounds byte values down to whole pages, so values compare
page-aligned and are read back. `memory.min/low/high` keep their names (v1 only on kernels that have them) and
grow top-down in a leveled update. A limit below current usage makes the kernel answer EBUSY after its own
reclaim attempts; the executor reports that once and does not retry.
"""

from __future__ import annotations

import os
from collections.abc import Hashable

from hookserver.executor.convert import UNLIMITED, limit_to_v2, parse_limit
from hookserver.executor.knob import Knob, Merge, check_int_range, int_key
from hookserver.executor.plan import CgroupResource

__all__ = ["MEMORY_KNOBS", "PAGE_SIZE"]

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_LIMIT_MAX = (1 << 63) - 1


def _render_bytes(value: int | str, v2: bool, current: str) -> str:
    number = int(value)
    if v2:
        return limit_to_v2(number)
    return "-1" if number < 0 else str(number)


def _bytes_key(text: str, v2: bool) -> Hashable:
    try:
        value = parse_limit(text)
    except ValueError:
        return text.strip()
    return value if value >= UNLIMITED else value // PAGE_SIZE * PAGE_SIZE


def _unkey_bytes(key: Hashable, v2: bool) -> str:
    assert isinstance(key, int)
    if key >= UNLIMITED:
        return "max" if v2 else "-1"
    return str(key)


def _int_render(value: int | str, v2: bool, current: str) -> str:
    return str(int(value))


def _knob(resource: CgroupResource, v2_file: str, *, lo: int, merge: Merge) -> Knob:
    name = resource.value
    return Knob(
        resource, "memory", name, v2_file,
        check=check_int_range(name, lo, _LIMIT_MAX, allow=(-1,)),
        render=_render_bytes, key=_bytes_key, merge=merge, readback=True,
        unkey=_unkey_bytes if merge is Merge.MAX else None,
    )


MEMORY_KNOBS: tuple[Knob, ...] = (
    # A zero hard limit would OOM-kill the cgroup at once: refuse it as a plan bug.
    _knob(CgroupResource.MEMORY_LIMIT, "memory.max", lo=1, merge=Merge.NONE),
    _knob(CgroupResource.MEMORY_MIN, "memory.min", lo=0, merge=Merge.MAX),
    _knob(CgroupResource.MEMORY_LOW, "memory.low", lo=0, merge=Merge.MAX),
    _knob(CgroupResource.MEMORY_HIGH, "memory.high", lo=0, merge=Merge.MAX),
    *(
        Knob(resource, "memory", resource.value, resource.value,
             check=check_int_range(resource.value, lo, hi), render=_int_render, key=int_key)
        for resource, lo, hi in (
            (CgroupResource.MEMORY_WMARK_RATIO, 0, 100),
            (CgroupResource.MEMORY_WMARK_SCALE_FACTOR, 1, 1000),
            (CgroupResource.MEMORY_WMARK_MIN_ADJ, -25, 50),
            (CgroupResource.MEMORY_PRIORITY, 0, 12),
            (CgroupResource.MEMORY_USE_PRIORITY_OOM, 0, 1),
            (CgroupResource.MEMORY_OOM_GROUP, 0, 1),
        )
    ),
)
