"""QoSSnapshot <-> recording rows. Exact: floats go through JSON as `repr` and through the pods blob as IEEE
doubles, so a snapshot read back plans to the same numbers as the one the agent planned on (the replay's
determinism rests on this; `tests/recorder/test_codec.py` round-trips every field the planners read).

The per-container kernel facts CPU burst and memory QoS plan on (`KernelFacts.pods`) are `kernel_codec.py`'s:
their static part rides in the pod's facts body ("kernel"), their values in a blob of their own.
"""

from __future__ import annotations

import array
import hashlib
import json
import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from hookserver.slo.model import NodeSLOSpec
from hookserver.system.topology import CpuInfo, NodeTopology, NumaMemInfo

from qos.snapshot.kernel import KernelFacts
from qos.snapshot.model import BEStats, BETier, ContainerFacts, HostAppUsage, NodeFacts, NodeUsage, PodFacts, QoSSnapshot

__all__ = [
    "FrameRow",
    "PodUsage",
    "decode_pod",
    "decode_snapshot",
    "dumps",
    "encode_frame",
    "encode_pod",
    "node_from_json",
    "node_to_json",
    "pack_misc",
    "pack_pods",
    "pod_key",
    "slo_from_json",
    "slo_to_json",
    "tier_from_json",
    "tier_to_json",
    "topology_from_json",
    "topology_to_json",
    "unpack_misc",
    "unpack_pod_arrays",
    "unpack_pods",
]


def dumps(value: Any) -> str:
    """Canonical JSON (sorted keys, no spaces): equal values give equal text, so changes are detected by text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _sorted(values: frozenset[int]) -> list[int]:
    return sorted(values)


# -- static parts -------------------------------------------------------------------------------------------
def slo_to_json(slo: NodeSLOSpec) -> dict[str, Any]:
    return slo.model_dump(mode="json", by_alias=True)


def slo_from_json(body: Mapping[str, Any]) -> NodeSLOSpec:
    return NodeSLOSpec.model_validate(dict(body))


def node_to_json(node: NodeFacts | None) -> dict[str, Any] | None:
    if node is None:
        return None
    return {
        "name": node.name, "cpu_capacity_milli": node.cpu_capacity_milli,
        "memory_capacity_bytes": node.memory_capacity_bytes, "cpu_allocatable_milli": node.cpu_allocatable_milli,
        "memory_allocatable_bytes": node.memory_allocatable_bytes, "reserved_cpu_milli": node.reserved_cpu_milli,
        "reserved_cpus": _sorted(node.reserved_cpus), "system_exclusive_cpus": _sorted(node.system_exclusive_cpus),
        "batch_cpu_allocatable_milli": node.batch_cpu_allocatable_milli,
        "extended_allocatable": dict(node.extended_allocatable),
        "kubelet_cpu_manager_policy": node.kubelet_cpu_manager_policy, "annotations": dict(node.annotations),
    }


def node_from_json(body: Mapping[str, Any] | None) -> NodeFacts | None:
    if body is None:
        return None
    return NodeFacts(
        name=body["name"], cpu_capacity_milli=body["cpu_capacity_milli"],
        memory_capacity_bytes=body["memory_capacity_bytes"], cpu_allocatable_milli=body["cpu_allocatable_milli"],
        memory_allocatable_bytes=body["memory_allocatable_bytes"], reserved_cpu_milli=body["reserved_cpu_milli"],
        reserved_cpus=frozenset(body["reserved_cpus"]), system_exclusive_cpus=frozenset(body["system_exclusive_cpus"]),
        batch_cpu_allocatable_milli=body["batch_cpu_allocatable_milli"],
        extended_allocatable=MappingProxyType(dict(body["extended_allocatable"])),
        kubelet_cpu_manager_policy=body["kubelet_cpu_manager_policy"],
        annotations=MappingProxyType(dict(body["annotations"])),
    )


def tier_to_json(tier: BETier | None) -> dict[str, Any] | None:
    """The BE tier's layout (its dynamic cpuset and quota go into each frame)."""
    if tier is None:
        return None
    body: dict[str, Any] = {"dir": tier.dir, "period_us": tier.period_us, "v2": tier.v2,
                            "cpuset_levels": [list(level) for level in tier.cpuset_levels]}
    if tier.missing_controllers:  # only then: recordings of a tier with every controller read as before
        body["missing_controllers"] = sorted(tier.missing_controllers)
    return body


def tier_from_json(body: Mapping[str, Any] | None, cpuset: list[int] | None, quota_us: int | None) -> BETier | None:
    if body is None:
        return None
    return BETier(dir=body["dir"], cpuset=frozenset(cpuset) if cpuset is not None else None, quota_us=quota_us,
                  period_us=body["period_us"], v2=body["v2"],
                  cpuset_levels=tuple(tuple(level) for level in body["cpuset_levels"]),
                  missing_controllers=frozenset(body.get("missing_controllers", ())))


def topology_to_json(topology: NodeTopology | None) -> dict[str, Any] | None:
    if topology is None:
        return None
    return {"cpus": [[c.cpu, c.core, c.socket, c.numa_node, c.l3, c.online] for c in topology.cpus],
            "numa": [[n.node, n.total_bytes, n.free_bytes] for n in topology.numa]}


def topology_from_json(body: Mapping[str, Any] | None) -> NodeTopology | None:
    if body is None:
        return None
    return NodeTopology(
        cpus=tuple(CpuInfo(cpu=c[0], core=c[1], socket=c[2], numa_node=c[3], l3=c[4], online=bool(c[5]))
                   for c in body["cpus"]),
        numa=tuple(NumaMemInfo(node=n[0], total_bytes=n[1], free_bytes=n[2]) for n in body["numa"]),
    )


# -- pods ---------------------------------------------------------------------------------------------------
def encode_pod(pod: PodFacts, created_at: float = 0.0, kernel: Mapping[str, Any] | None = None) -> tuple[str, str]:
    """A pod's facts without its usage, as (digest, canonical JSON); `kernel`: its containers' static kernel
    facts (`kernel_codec.static_of`), left out when None so a pod without them keeps its format-1 digest."""
    body = {
        "uid": pod.uid, "namespace": pod.namespace, "name": pod.name, "qos": pod.qos, "qos_label": pod.qos_label,
        "priority": pod.priority, "priority_class": pod.priority_class, "phase": pod.phase,
        "terminating": pod.terminating, "labels": dict(pod.labels), "annotations": dict(pod.annotations),
        "batch_cpu_request_milli": pod.batch_cpu_request_milli, "cpu_request_milli": pod.cpu_request_milli,
        "requests": dict(pod.requests), "cpuset": _sorted(pod.cpuset), "cgroup_dirs": list(pod.cgroup_dirs),
        "containers": [{"id": c.id, "name": c.name, "cgroup_dir": c.cgroup_dir, "requests": dict(c.requests),
                        "limits": dict(c.limits)} for c in pod.containers],
        "created_at": created_at,
    }
    if kernel is not None:
        body["kernel"] = dict(kernel)
    text = dumps(body)
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest(), text


def decode_pod(body: Mapping[str, Any], cpu: float | None, memory: float | None) -> PodFacts:
    return PodFacts(
        uid=body["uid"], namespace=body["namespace"], name=body["name"], qos=body["qos"],
        qos_label=body["qos_label"], priority=body["priority"], priority_class=body["priority_class"],
        phase=body["phase"], terminating=body["terminating"], labels=MappingProxyType(dict(body["labels"])),
        annotations=MappingProxyType(dict(body["annotations"])), cpu_usage_cores=cpu, memory_usage_bytes=memory,
        batch_cpu_request_milli=body["batch_cpu_request_milli"], cpu_request_milli=body["cpu_request_milli"],
        requests=MappingProxyType(dict(body["requests"])), cpuset=frozenset(body["cpuset"]),
        cgroup_dirs=tuple(body["cgroup_dirs"]),
        containers=tuple(ContainerFacts(id=c["id"], name=c["name"], cgroup_dir=c["cgroup_dir"],
                                        requests=MappingProxyType(dict(c["requests"])),
                                        limits=MappingProxyType(dict(c["limits"])))
                         for c in body["containers"]),
    )


@dataclass(frozen=True, slots=True)
class PodUsage:
    """One pod in one frame: its facts row and its usage (None: no fresh sample)."""

    facts_id: int
    cpu_cores: float | None
    memory_bytes: float | None


def pack_pods(pods: Sequence[PodUsage]) -> bytes:
    """Facts ids (int32) then CPU and memory (float64; NaN for None), zlib-compressed: ~14 bytes a pod."""
    ids = array.array("i", [p.facts_id for p in pods])
    values = array.array("d")
    for p in pods:
        values.append(math.nan if p.cpu_cores is None else p.cpu_cores)
    for p in pods:
        values.append(math.nan if p.memory_bytes is None else p.memory_bytes)
    header = array.array("i", [len(pods)])
    return zlib.compress(header.tobytes() + ids.tobytes() + values.tobytes(), 6)


def pack_misc(misc: Mapping[str, Any]) -> bytes:
    return zlib.compress(dumps(misc).encode(), 6)


def unpack_misc(blob: bytes) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(zlib.decompress(blob))
    return value


def pod_key(pod: PodFacts, kernel_key: tuple[Any, ...] | None = None) -> tuple[Any, ...]:
    """Everything `encode_pod` keeps, as a hashable tuple: cheap to build, so an unchanged pod costs no JSON."""
    return (kernel_key, 
        pod.uid, pod.namespace, pod.name, pod.qos, pod.qos_label, pod.priority, pod.priority_class, pod.phase,
        pod.terminating, tuple(pod.labels.items()), tuple(pod.annotations.items()), pod.batch_cpu_request_milli,
        pod.cpu_request_milli, tuple(pod.requests.items()), pod.cpuset, pod.cgroup_dirs,
        tuple((c.id, c.name, c.cgroup_dir, tuple(c.requests.items()), tuple(c.limits.items())) for c in pod.containers),
    )


def unpack_pod_arrays(blob: bytes) -> tuple[array.array[int], array.array[float]]:
    """The facts ids, and the values (n CPU then n memory; NaN: no sample), without a PodUsage per pod (the
    replay reads 1.7 million pods a day)."""
    raw = zlib.decompress(blob)
    n = array.array("i", raw[:4])[0]
    ids = array.array("i", raw[4:4 + 4 * n])
    values = array.array("d", raw[4 + 4 * n:])
    if len(ids) != n or len(values) != 2 * n:
        raise ValueError(f"a pods blob of {n} pods holds {len(ids)} ids and {len(values)} values")
    return ids, values


def unpack_pods(blob: bytes) -> list[PodUsage]:
    ids, values = unpack_pod_arrays(blob)
    n = len(ids)
    out = []
    for i in range(n):
        cpu, mem = values[i], values[n + i]
        out.append(PodUsage(ids[i], None if math.isnan(cpu) else cpu, None if math.isnan(mem) else mem))
    return out


# -- frames -------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FrameRow:
    ts: float
    node_cpu: float | None
    node_memory: float | None
    misc: dict[str, Any]


def encode_frame(snap: QoSSnapshot, extra: Mapping[str, float]) -> FrameRow:
    """The frame's node-level part: usage, BE stats, the BE tier's current cpuset and quota, and the `extra`
    node series (PSI, throttling) the recorder was given."""
    u, be, tier = snap.usage, snap.be, snap.be_tier
    misc: dict[str, Any] = {
        "usage": {"cpu_cores": u.cpu_cores, "cpu_cores_avg": u.cpu_cores_avg, "cpu_avg_count": u.cpu_avg_count,
                  "cpu_window_s": u.cpu_window_s, "memory_bytes": u.memory_bytes,
                  "memory_total_bytes": u.memory_total_bytes, "system_cpu_cores": u.system_cpu_cores,
                  "host_apps": [[a.name, a.qos, a.cpu_usage_cores] for a in u.host_apps]},
        "be": {"window_s": be.window_s, "avg_usage_milli": be.avg_usage_milli,
               "avg_request_milli": be.avg_request_milli, "avg_limit_milli": be.avg_limit_milli, "count": be.count,
               "last_usage_milli": be.last_usage_milli, "last_request_milli": be.last_request_milli,
               "last_limit_milli": be.last_limit_milli},
        "tier": None if tier is None else {
            "cpuset": None if tier.cpuset is None else _sorted(tier.cpuset), "quota_us": tier.quota_us},
        "stale": snap.stale,
        "extra": dict(extra),
    }
    return FrameRow(snap.now, u.cpu_cores, u.memory_bytes, misc)


def decode_snapshot(
    ts: float, misc: Mapping[str, Any], pods: tuple[PodFacts, ...], *, slo: NodeSLOSpec,
    slo_sources: Mapping[str, str], node: NodeFacts | None, tier_layout: Mapping[str, Any] | None,
    topology: NodeTopology | None, gates: Mapping[str, bool] | None, collect_interval_s: float,
    kernel: KernelFacts | None = None,
) -> QoSSnapshot:
    u, be, tier = misc["usage"], misc["be"], misc["tier"]
    usage = NodeUsage(
        cpu_cores=u["cpu_cores"], cpu_cores_avg=u["cpu_cores_avg"], cpu_avg_count=u["cpu_avg_count"],
        cpu_window_s=u["cpu_window_s"], memory_bytes=u["memory_bytes"], memory_total_bytes=u["memory_total_bytes"],
        system_cpu_cores=u["system_cpu_cores"],
        host_apps=tuple(HostAppUsage(name=a[0], qos=a[1], cpu_usage_cores=a[2]) for a in u["host_apps"]),
    )
    stats = BEStats(**be)
    be_tier = tier_from_json(tier_layout, tier["cpuset"] if tier else None, tier["quota_us"] if tier else None)
    return QoSSnapshot(
        now=ts, slo=slo, node=node, pods=pods, usage=usage, be=stats, be_tier=be_tier, topology=topology,
        collect_interval_s=collect_interval_s, slo_sources=MappingProxyType(dict(slo_sources)), slo_origin="recording",
        stale=bool(misc.get("stale", False)),
        feature_gates=None if gates is None else MappingProxyType(dict(gates)),
        kernel=kernel if kernel is not None else KernelFacts(),
    )
