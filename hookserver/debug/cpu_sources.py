"""The `cpu` section of `hookctl explain`: where each container's cpuset and the pod's CPU priority (bvt or
cpu.idle) came from, in one place instead of spread over decisions and writes.

* cpuset: CPUSetAllocator's latest decision per container (the scheduler's CPUs from resource-status, the LS
  share pool, or why none: a BE pod left to CPU suppress, an annotation error);
* cpu priority: the latest GroupIdentity write per cgroup file (`cpu.bvt_warp_ns` or `cpu.idle`), with its
  value and reason (the class value, or the BE idle choice).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hookserver.store.audit import DecisionRecord, WriteRecord

__all__ = ["cpu_sources"]

_PRIORITY_FILES = ("cpu.bvt_warp_ns", "cpu.idle")


def cpu_sources(decisions: Sequence[DecisionRecord], writes: Sequence[WriteRecord]) -> dict[str, Any]:
    cpusets: dict[str, dict[str, Any]] = {}
    for d in decisions:
        if d.plugin != "CPUSetAllocator" or not d.container:
            continue
        cpusets[d.container] = {
            "cpuset": str(d.values.get("cpuset_cpus", "")) if d.applied else "",
            "from": d.reason or d.error,
            "door": d.door,
        }
    priority: dict[str, dict[str, Any]] = {}
    for w in writes:
        if w.owner == "GroupIdentity" and w.path.endswith(_PRIORITY_FILES):
            priority[w.path] = {"value": w.value, "from": w.reason, "ok": w.ok}
    return {
        "cpuset": [{"container": name, **row} for name, row in cpusets.items()],
        "priority": [{"file": path, **row} for path, row in priority.items()],
    }
