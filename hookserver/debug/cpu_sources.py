"""The `cpu` section of `hookctl explain`: where each container's cpuset and the pod's CPU priority (bvt or
cpu.idle) came from, in one place instead of spread over decisions and writes.

* cpuset: CPUSetAllocator's latest decision per container (the scheduler's CPUs from resource-status, the LS
  share pool, or why none: a BE pod left to CPU suppress, an annotation error), and the pod sandbox's as
  `(sandbox)` once a PreRunPodSandbox decision gave it one;
* cpu priority: the latest GroupIdentity write per cgroup file (`cpu.bvt_warp_ns` or `cpu.idle`), with its
  value and reason (the class value, or the BE idle choice), from the QoS reconciler or the PreRunPodSandbox hook;
* core sched: the pod's core-scheduling cookie group under the NodeSLO now (CoreSched, koordlet's rules), or why
  it has none, so "which pods may share my core's hyperthreads" has its answer beside the cpuset.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hookserver.slo.model import NodeSLOSpec
from hookserver.store.audit import DecisionRecord, WriteRecord
from hookserver.store.records import PodRecord

__all__ = ["SANDBOX", "core_sched_source", "cpu_sources"]

SANDBOX = "(sandbox)"  # the row of the pod's sandbox (pause) container in the cpuset list

_PRIORITY_FILES = ("cpu.bvt_warp_ns", "cpu.idle")


def cpu_sources(decisions: Sequence[DecisionRecord], writes: Sequence[WriteRecord]) -> dict[str, Any]:
    cpusets: dict[str, dict[str, Any]] = {}
    for d in decisions:
        if d.plugin != "CPUSetAllocator":
            continue
        # A PreRunPodSandbox decision's cpuset is the pod sandbox's (pause container's); its other values are the pod's.
        name = d.container or (SANDBOX if d.applied and "cpuset_cpus" in d.values else "")
        if not name:
            continue
        cpusets[name] = {
            "cpuset": str(d.values.get("cpuset_cpus", "")) if d.applied else "",
            "from": d.reason or d.error,
            "door": d.door,
        }
    priority: dict[str, dict[str, Any]] = {}
    for w in writes:
        # A PreRunPodSandbox write names every plugin whose values it carries ("BatchResource,GroupIdentity").
        if "GroupIdentity" in w.owner.split(",") and w.path.endswith(_PRIORITY_FILES):
            priority[w.path] = {"value": w.value, "from": w.reason, "ok": w.ok}
    return {
        "cpuset": [{"container": name, **row} for name, row in cpusets.items()],
        "priority": [{"file": path, **row} for path, row in priority.items()],
    }


def core_sched_source(node_slo: object, pod: PodRecord | None) -> dict[str, Any]:
    """The pod's core-sched group (`group` "" is the shared default group of its class), or `why` it has none."""
    from qos.isolation.core_sched import group_of  # here: `hookctl` (the client) imports this module, not qos

    if pod is None:
        return {"group": None, "why": "pod not known"}
    slo = node_slo if isinstance(node_slo, NodeSLOSpec) else NodeSLOSpec.model_validate({})
    strategy = slo.resource_qos_strategy
    if strategy.policies.cpu_policy != "coreSched":
        return {"group": None, "why": f"NodeSLO cpuPolicy is {strategy.policies.cpu_policy}, not coreSched"}
    kube = pod.kube_qos.lower().replace("-", "")
    qos = pod.qos_class or ("BE" if kube == "besteffort" else "LS" if kube else "")
    if qos == "SYSTEM":
        return {"group": None, "why": "SYSTEM pods keep the default cookie"}
    group = group_of(strategy, qos, pod.uid, pod.labels)
    if group is None:
        return {"group": None, "why": f"core scheduling is off for this pod ({qos or 'LS'} cpuQOS or its "
                                      "koordinator.sh/core-sched-policy label)"}
    return {"group": group, "why": f"{qos or 'LS'} pod, cookie shared with every pod of group {group!r}"}
