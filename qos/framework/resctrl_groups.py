"""What the class-level resctrl groups (`qos.resctrl`) and the pod-level ones (`qos.isolation.pod_resctrl`)
share, so both round, mask and remove the same way: koordlet's schemata formulas, the check that resctrl is
usable this round, and the removal of groups this agent created (each kind under its own originals section, so
turning one off never removes the other's).

  L3 mask   over the CBM width w: start = ceil(w × start % / 100), end = ceil(w × end % / 100),
            mask = ((1 << end) − 1) >> start << start (contiguous ways), at least `min_bits` ways.
  MB        Intel: the percent rounded up to a multiple of 10 (and of the kernel's `bandwidth_gran`), at
            least `min_bandwidth`, at most 100; AMD: 100 % → 2048 (unlimited), else int(160 × percent / 100)
            (koordlet's 25 GB/s × 8 × 0.8 per CCD).
"""

from __future__ import annotations

import math
from collections.abc import Set
from typing import Any

from hookserver.executor.plan import FileWrite
from qos.framework.plan import QoSPlan, kernel_part_skip
from qos.snapshot.kernel import PodKernel
from qos.snapshot.model import QoSSnapshot

__all__ = ["AMD_MBA_MAX_GBPS", "AMD_MBA_UNLIMITED", "cat_mask", "mba_value", "remove_group_writes", "task_writes", "unusable"]

AMD_MBA_UNLIMITED = 2048
AMD_MBA_MAX_GBPS = 160  # 25 GB/s × 8 × 0.8, koordlet's AMD formula


def cat_mask(cbm_bits: int, start_percent: int, end_percent: int, *, min_bits: int = 1) -> int:
    """The L3 mask for [start %, end %) of a `cbm_bits`-wide cache (contiguous ways)."""
    if cbm_bits <= 0:
        raise ValueError("no L3 CBM width")
    start = math.ceil(cbm_bits * start_percent / 100)
    end = math.ceil(cbm_bits * end_percent / 100)
    if end - start < min_bits:
        end = min(start + min_bits, cbm_bits)
        start = end - min_bits
    return ((1 << end) - 1) >> start << start


def mba_value(percent: int, *, vendor: str, gran: int = 10, minimum: int = 10) -> int:
    if vendor == "amd":
        return AMD_MBA_UNLIMITED if percent >= 100 else int(AMD_MBA_MAX_GBPS * percent / 100)
    step = max(10, gran)
    value = math.ceil(percent / step) * step
    return min(max(value, minimum), 100)


def remove_group_writes(groups: Set[str], *, section: str, owner: str, why: str) -> list[FileWrite]:
    """rmdir each group (sorted), forgetting it in `section` of the originals once removed."""
    return [
        FileWrite("resctrl", group, op="rmdir", owner=owner, original="restore", original_key=(section, group),
                  reason=f"remove resctrl group {group} this agent created ({why}); its tasks return to the default group")
        for group in sorted(groups)
    ]


def unusable(snap: QoSSnapshot, reconciler: str, state: Any) -> QoSPlan | None:
    """The round's skip when resctrl was not read or cannot be used (one "unsupported" status), else None."""
    return kernel_part_skip(reconciler, state, read=snap.kernel.read, part="resctrl", what="resctrl",
                            problem=snap.kernel.resctrl.problem)


def task_writes(pod: PodKernel, pod_key: str, group: str, have: frozenset[int], *, owner: str) -> list[FileWrite]:
    """One write to `group/tasks` per task of the pod's containers not in the group yet (a write moves one
    task; one that exited meanwhile is harmless)."""
    return [
        FileWrite("resctrl", f"{group}/tasks", str(task), compare="always", owner=owner,
                  reason=f"{pod_key}/{c.name}: task {task} into {group}")
        for c in pod.containers for task in sorted(c.tasks - have)
    ]
