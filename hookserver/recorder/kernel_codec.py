"""The container-level part of a frame: `QoSSnapshot.kernel` <-> recording rows (format 2).

Why a part of its own: CPU burst and memory QoS plan per container, on what the collectors sampled for each
container (CPU and memory usage, the throttled ratio) and on the CFS files the agent itself writes (quota,
burst). A replay that reproduces their decisions needs exactly that, frame by frame.

Split like the pods: what a pod's containers are (ids, names, directories, limits, CFS period) goes into the
pod's facts row once per change (`static_of`, under the facts body's "kernel"); what moves (the pod's quota;
each container's CPU, memory, throttled ratio, quota, burst) is one packed blob of doubles per frame
(`dynamic_of`, `pack_values`), NaN for "not read". Integers (µs) are exact in a double. The node-wide part
(cgroup v1 or v2, the kubelet tier dirs, the optional cgroup files this kernel has, which parts were read)
is a config kind, kept once per change (`layout_to_json`).

Not recorded: task ids (resctrl), sysctls, block devices, OOM, tc and core scheduling facts (no replayed
planner reads them).
"""

from __future__ import annotations

import array
import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import fields
from types import MappingProxyType
from typing import Any

from qos.snapshot.kernel import ContainerKernel, KernelFacts, PodKernel

__all__ = [
    "DYNAMIC_PER_CONTAINER",
    "KernelTemplate",
    "dynamic_of",
    "kernel_facts",
    "layout_from_json",
    "layout_to_json",
    "pack_values",
    "static_key",
    "static_of",
    "unpack_values",
]

DYNAMIC_PER_CONTAINER = 5  # CPU cores, memory bytes, throttled ratio, quota µs, burst µs


def layout_to_json(kernel: KernelFacts) -> dict[str, Any] | None:
    """The node-wide part; None when the round read no kernel facts (an agent with no part-2 reconciler)."""
    if not kernel.read and not kernel.pods:
        return None
    return {"read": sorted(kernel.read), "v2": kernel.v2, "tiers": dict(kernel.tiers),
            "cgroup_files": sorted(kernel.cgroup_files)}


def layout_from_json(body: Mapping[str, Any] | None) -> KernelFacts:
    if body is None:
        return KernelFacts()
    return KernelFacts(read=frozenset(body["read"]), v2=bool(body["v2"]), tiers=MappingProxyType(dict(body["tiers"])),
                       cgroup_files=frozenset(body["cgroup_files"]))


def kernel_facts(layout: KernelFacts, pods: Mapping[str, PodKernel]) -> KernelFacts:
    """The layout with this frame's pods."""
    return KernelFacts(read=layout.read, v2=layout.v2, tiers=layout.tiers, cgroup_files=layout.cgroup_files,
                       pods=MappingProxyType(dict(pods)))


def static_of(pk: PodKernel) -> dict[str, Any]:
    """What a pod's kernel facts are apart from this frame's values (into the pod's facts body)."""
    return {"dir": pk.dir, "period_us": pk.period_us, "cpu_limit_milli": pk.cpu_limit_milli,
            "memory_request_bytes": pk.memory_request_bytes, "memory_limit_bytes": pk.memory_limit_bytes,
            "containers": [[c.id, c.name, c.dir, c.cpu_limit_milli, c.memory_request_bytes, c.memory_limit_bytes,
                            c.period_us] for c in pk.containers]}


def static_key(pk: PodKernel) -> tuple[Any, ...]:
    """`static_of` as a hashable tuple, cheap to build each round (the writer's facts cache key)."""
    return (pk.dir, pk.period_us, pk.cpu_limit_milli, pk.memory_request_bytes, pk.memory_limit_bytes,
            tuple((c.id, c.name, c.dir, c.cpu_limit_milli, c.memory_request_bytes, c.memory_limit_bytes, c.period_us)
                  for c in pk.containers))


def _num(value: float | int | None) -> float:
    return math.nan if value is None else float(value)


def dynamic_of(pk: PodKernel, out: array.array[float]) -> None:
    """Append this frame's values of one pod: its quota, then per container `DYNAMIC_PER_CONTAINER` values."""
    out.append(_num(pk.quota_us))
    for c in pk.containers:
        out.extend((_num(c.cpu_usage_cores), _num(c.memory_usage_bytes), _num(c.throttled_ratio),
                    _num(c.quota_us), _num(c.burst_us)))


def pack_values(values: array.array[float]) -> bytes:
    return zlib.compress(values.tobytes(), 6)


def unpack_values(blob: bytes) -> array.array[float]:
    return array.array("d", zlib.decompress(blob))


# The slots' member descriptors: a day of 200 pods is 1.7 million pods' kernel facts, and the dataclasses'
# frozen `__init__` (one `object.__setattr__` per field) made decoding them cost more than all the planners.
_C_SET = {f.name: ContainerKernel.__dict__[f.name].__set__ for f in fields(ContainerKernel)}
_P_SET = {f.name: PodKernel.__dict__[f.name].__set__ for f in fields(PodKernel)}
_C_STATIC = ("id", "name", "dir", "cpu_limit_milli", "memory_request_bytes", "memory_limit_bytes", "period_us")
_SET_CPU, _SET_MEMORY, _SET_THROTTLED = _C_SET["cpu_usage_cores"], _C_SET["memory_usage_bytes"], _C_SET["throttled_ratio"]
_SET_QUOTA, _SET_BURST, _SET_TASKS = _C_SET["quota_us"], _C_SET["burst_us"], _C_SET["tasks"]
_SET_POD_QUOTA, _SET_POD_CONTAINERS = _P_SET["quota_us"], _P_SET["containers"]
_NO_TASKS: frozenset[int] = frozenset()


class KernelTemplate:
    """A pod's recorded static kernel facts, decoded once; `build` adds one frame's values."""

    __slots__ = ("uid", "containers", "pod_static", "width")

    def __init__(self, uid: str, body: Mapping[str, Any]) -> None:
        self.uid = uid
        self.containers: tuple[tuple[tuple[Any, ...], ...], ...] = tuple(
            tuple(zip((_C_SET[n] for n in _C_STATIC),
                      (str(c[0]), str(c[1]), str(c[2]), int(c[3]), int(c[4]), int(c[5]), int(c[6]))))
            for c in body["containers"])
        self.pod_static: tuple[tuple[Any, Any], ...] = (
            (_P_SET["uid"], uid), (_P_SET["dir"], str(body["dir"])), (_P_SET["period_us"], int(body["period_us"])),
            (_P_SET["cpu_limit_milli"], int(body["cpu_limit_milli"])),
            (_P_SET["memory_request_bytes"], int(body["memory_request_bytes"])),
            (_P_SET["memory_limit_bytes"], int(body["memory_limit_bytes"])))
        self.width = 1 + DYNAMIC_PER_CONTAINER * len(self.containers)

    def build(self, values: Sequence[float], at: int) -> PodKernel:
        """The pod's kernel facts from `values[at:at + self.width]` (NaN: None)."""
        containers = []
        i = at + 1
        for static in self.containers:
            c: ContainerKernel = object.__new__(ContainerKernel)
            for setter, value in static:
                setter(c, value)
            cpu, mem, throttled, quota, burst = values[i:i + DYNAMIC_PER_CONTAINER]
            _SET_CPU(c, None if cpu != cpu else cpu)
            _SET_MEMORY(c, None if mem != mem else mem)
            _SET_THROTTLED(c, None if throttled != throttled else throttled)
            _SET_QUOTA(c, None if quota != quota else int(quota))
            _SET_BURST(c, None if burst != burst else int(burst))
            _SET_TASKS(c, _NO_TASKS)
            containers.append(c)
            i += DYNAMIC_PER_CONTAINER
        pod: PodKernel = object.__new__(PodKernel)
        for setter, value in self.pod_static:
            setter(pod, value)
        quota = values[at]
        _SET_POD_QUOTA(pod, None if quota != quota else int(quota))
        _SET_POD_CONTAINERS(pod, tuple(containers))
        return pod
