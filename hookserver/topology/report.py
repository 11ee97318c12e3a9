"""The NodeResourceTopology document koordlet publishes for its node
(`pkg/koordlet/statesinformer/impl/states_noderesourcetopology.go` `calcNodeTopo`, `calTopologyZoneList`,
`newNodeTopo`), built from the sysfs topology, the pools and the Node's annotations.

* `zones`: one `Node` zone per NUMA node, `node-<id>`, with `cpu` (its online CPUs), `hugepages-1Gi` and
  `hugepages-2Mi` and `memory`, capacity = allocatable = available. With koordlet's HugePageReport gate off (its
  default) the hugepages are 0 and memory is MemTotal; with it on (`hugepages` given) each size is the node's
  `nr_hugepages` x page size and memory is MemTotal less both pools (`calTopologyZoneList`), since the kernel's
  MemTotal counts the hugepage pools that ordinary pods cannot use; resources sorted by name, zones by name (koordinator's `ZoneResourcesToZoneList`).
  Where this agent publishes the node's batch capacity, each zone also carries koord-manager's
  `kubernetes.io/batch-cpu` / `batch-memory` (capacity = allocatable = available, `UpdateNRTZoneListIfNeeded`),
  handed in by the caller (hookserver.capacity computes them).
* annotations, the JSON koordinator's `apis/extension` types marshal to: `cpu-basic-info`, `cpu-topology`
  (online CPUs by id with lscpu's logical core number), `cpu-shared-pools`, `be-cpu-shared-pools`,
  `kubelet.koordinator.sh/cpu-manager-policy`, `pod-cpu-allocs` (the kubelet static policy's exclusive CPUs
  per pod from its `cpu_manager_state`, `null` when none: see kubelet_allocs.py), `reservation` and
  `system-qos-resource`.
* `topologyPolicies: ["None"]`, the label `app.kubernetes.io/managed-by: Koordinator`.

Everything is sorted and serialised compactly with a fixed key order, so unchanged inputs give byte-identical
text and the publisher writes nothing (koordinator#2942: map order made koordlet rewrite several times a second).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hookserver.kubewire import memory_quantity, node_owner_references
from hookserver.system.cpu_basic import CpuBasicInfo
from hookserver.system.cpulist import format_cpu_list, parse_cpu_list
from hookserver.system.hugepages import HUGEPAGE_SIZES_KB, NumaHugePages
from hookserver.system.topology import CpuInfo, NumaMemInfo
from hookserver.topology.annotations import (
    ANNOTATION_CPU_BASIC_INFO,
    ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
    ANNOTATION_NODE_BE_CPU_SHARED_POOLS,
    ANNOTATION_NODE_CPU_ALLOCS,
    ANNOTATION_NODE_CPU_SHARED_POOLS,
    ANNOTATION_NODE_CPU_TOPOLOGY,
    ANNOTATION_NODE_RESERVATION,
    ANNOTATION_NODE_SYSTEM_QOS_RESOURCE,
)
from hookserver.topology.pools import CpuPools

__all__ = ["NRT_API_VERSION", "NRT_KIND", "build_report", "canonical", "logical_cores"]

NRT_API_VERSION = "topology.node.k8s.io/v1alpha1"
NRT_KIND = "NodeResourceTopology"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"


def canonical(value: Any) -> str:
    """Compact JSON as Go's encoding/json writes it (no spaces, `<>&` escaped as Go does not matter here)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def logical_cores(cpus: Iterable[CpuInfo]) -> dict[tuple[int, int], int]:
    """(socket, sysfs core id) -> the CORE number `lscpu -e` prints (koordlet's `CoreID`): cores numbered in
    the order of their lowest online CPU. Offline CPUs have no topology for lscpu and no number."""
    lowest: dict[tuple[int, int], int] = {}
    for c in cpus:
        if c.online:
            key = (c.socket, c.core)
            lowest[key] = min(lowest.get(key, c.cpu), c.cpu)
    return {key: rank for rank, key in enumerate(sorted(lowest, key=lambda k: lowest[k]))}


def _zones(cpus: tuple[CpuInfo, ...], numa: tuple[NumaMemInfo, ...],
           extra: Mapping[str, Mapping[str, str]],
           hugepages: Iterable[NumaHugePages] | None) -> list[dict[str, Any]]:
    per_node: dict[int, int] = {}
    for c in cpus:
        if c.online:
            per_node[c.numa_node] = per_node.get(c.numa_node, 0) + 1
    huge: dict[int, dict[str, int]] = {}
    for pool in hugepages or ():
        huge.setdefault(pool.node, {})[pool.resource] = pool.total_bytes
    zones = []
    for mem in numa:
        name = f"node-{mem.node}"
        pools = {resource: huge.get(mem.node, {}).get(resource, 0) for resource in HUGEPAGE_SIZES_KB.values()}
        values = {**extra.get(name, {}), "cpu": str(per_node.get(mem.node, 0)),
                  **{resource: memory_quantity(size) for resource, size in pools.items()},
                  "memory": memory_quantity(max(mem.total_bytes - sum(pools.values()), 0))}
        zones.append({
            "name": name,
            "type": "Node",
            "resources": [{"name": name, "capacity": q, "allocatable": q, "available": q}
                          for name, q in sorted(values.items())],
        })
    return sorted(zones, key=lambda z: str(z["name"]))


def _cpu_topology(cpus: tuple[CpuInfo, ...]) -> dict[str, Any]:
    rank = logical_cores(cpus)
    detail = [{"id": c.cpu, "core": rank[(c.socket, c.core)], "socket": c.socket, "node": c.numa_node}
              for c in sorted(cpus, key=lambda c: c.cpu) if c.online]
    return {"detail": detail} if detail else {}


def _reservation(annotations: Mapping[str, str], pools: CpuPools) -> dict[str, Any]:
    """koordinator's `NodeReservation` as koordlet re-marshals it: the Node's annotation read back, with
    `reservedCPUs` in canonical form (fields in the struct's order, empty ones left out)."""
    out: dict[str, Any] = {}
    try:
        given = json.loads(annotations.get(ANNOTATION_NODE_RESERVATION, "") or "{}")
    except ValueError:
        given = {}
    if not isinstance(given, dict):
        given = {}
    resources = given.get("resources")
    if isinstance(resources, dict) and resources:
        out["resources"] = {str(k): str(v) for k, v in sorted(resources.items())}
    if pools.reserved:
        out["reservedCPUs"] = format_cpu_list(pools.reserved)
    if isinstance(given.get("applyPolicy"), str) and given["applyPolicy"]:
        out["applyPolicy"] = given["applyPolicy"]
    return out


def _system_qos(annotations: Mapping[str, str]) -> dict[str, Any]:
    try:
        given = json.loads(annotations.get(ANNOTATION_NODE_SYSTEM_QOS_RESOURCE, "") or "{}")
    except ValueError:
        return {}
    out: dict[str, Any] = {}
    if isinstance(given, dict):
        raw = given.get("cpuset")
        if isinstance(raw, str) and raw:
            try:
                out["cpuset"] = format_cpu_list(parse_cpu_list(raw))
            except ValueError:
                out["cpuset"] = raw
        if isinstance(given.get("cpusetExclusive"), bool):
            out["cpusetExclusive"] = given["cpusetExclusive"]
    return out


def build_report(
    *,
    node_name: str,
    cpus: tuple[CpuInfo, ...],
    numa: tuple[NumaMemInfo, ...],
    basic: CpuBasicInfo,
    pools: CpuPools,
    node_annotations: Mapping[str, str],
    kubelet_cpu_manager_policy: str = "none",
    zone_resources: Mapping[str, Mapping[str, str]] | None = None,
    node_uid: str = "",
    pod_cpu_allocs: Sequence[Mapping[str, Any]] | None = None,
    hugepages: Iterable[NumaHugePages] | None = None,
) -> dict[str, Any]:
    """The whole object, ready for a server-side apply (and for `state_dir/noderesourcetopology.json`).
    `zone_resources`: more resources per zone name (the batch figures); a zone the node lacks is ignored.
    `node_uid`: the Node's uid, which makes the Node its owner (koordlet's controller reference), so the object
    goes with the Node; "" (standalone, or the Node not seen yet) leaves it out. `pod_cpu_allocs`: koordinator's
    `PodCPUAlloc` objects (`KubeletCpuManager.allocs_json()`); None or empty is `null`, as koordlet marshals it.
    `hugepages`: the NUMA nodes' hugepage pools where the HugePageReport gate is on; None reports 0 (gate off)."""
    policy: dict[str, Any] = {"policy": kubelet_cpu_manager_policy} if kubelet_cpu_manager_policy else {}
    annotations = {
        ANNOTATION_CPU_BASIC_INFO: canonical(basic.to_json()),
        ANNOTATION_NODE_CPU_TOPOLOGY: canonical(_cpu_topology(cpus)),
        ANNOTATION_NODE_CPU_SHARED_POOLS: canonical([p.to_json() for p in pools.ls] or None),
        ANNOTATION_NODE_BE_CPU_SHARED_POOLS: canonical([p.to_json() for p in pools.be] or None),
        ANNOTATION_KUBELET_CPU_MANAGER_POLICY: canonical(policy),
        ANNOTATION_NODE_CPU_ALLOCS: canonical(list(pod_cpu_allocs or ()) or None),
        ANNOTATION_NODE_RESERVATION: canonical(_reservation(node_annotations, pools)),
        ANNOTATION_NODE_SYSTEM_QOS_RESOURCE: canonical(_system_qos(node_annotations)),
    }
    return {
        "apiVersion": NRT_API_VERSION,
        "kind": NRT_KIND,
        "metadata": {
            "name": node_name,
            "labels": {LABEL_MANAGED_BY: "Koordinator"},
            "annotations": dict(sorted(annotations.items())),
            **({"ownerReferences": owners} if (owners := node_owner_references(node_name, node_uid)) else {}),
        },
        "topologyPolicies": ["None"],
        "zones": _zones(cpus, numa, zone_resources or {}, hugepages),
    }
