"""NRI wire messages <-> the hook contexts and results every front door shares.

Pure functions, no I/O: protobuf types stop here. Pods become `PodRequest`, containers
`ContainerRequest` (source NRI), and hook results become a `ContainerAdjustment` (at creation) or a
`ContainerUpdate` carrying the container's id (on update and at sync: NRI files updates under that
id, and koordlet's missing id is a known bug). Optional wrappers mean presence: a value we set is
always written as a present wrapper, a value we do not set is left absent.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping

from hookserver.api import nri_pb2
from hookserver.errors import InputError
from hookserver.hooks.context import ContainerRequest, PodRequest, RequestSource, frozen_map, wire_map
from hookserver.hooks.outcome import ContainerDevice, ContainerMount
from hookserver.resources import Resources

__all__ = [
    "EnvView",
    "PodRequestCache",
    "adjustment_bytes",
    "adjustment_for",
    "container_request",
    "pod_request",
    "resources_from_wire",
    "resources_to_wire",
    "split_env",
    "sync_pod_request",
    "sync_update_entry",
    "update_for",
]

_UINT64_MAX = (1 << 64) - 1
_UINT32_MAX = (1 << 32) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def pod_request(
    pod: nri_pb2.PodSandbox, as_map: Callable[[Mapping[str, str]], Mapping[str, str]] = frozen_map,
) -> PodRequest:
    """The hooks' request for `pod`. Labels and annotations are copied into frozen maps, or read in place
    with `as_map=wire_map` (`sync_pod_request`)."""
    linux = pod.linux if pod.HasField("linux") else None
    # (namespace, name, uid, labels, annotations, cgroup_parent, sandbox_id, runtime_handler, attempt, resources,
    # source, sandbox_cgroup): positional, the cheapest call (a Synchronize translates thousands of pods).
    return PodRequest(
        pod.namespace,
        pod.name,
        pod.uid,
        as_map(pod.labels),
        as_map(pod.annotations),
        linux.cgroup_parent if linux is not None else "",
        pod.id,
        pod.runtime_handler,
        0,
        resources_from_wire(linux.resources if linux is not None and linux.HasField("resources") else None),
        RequestSource.NRI,
        linux.cgroups_path if linux is not None else "",
    )


class PodRequestCache:
    """`pod_request` memoized by the pod's deterministic encoding, for the hot path.

    Every CreateContainer carries its whole pod, and a pod's sandbox does not change while it lives, so
    the translation (frozen label and annotation maps, resources) is done once per pod, not per
    container. The key is the pod's bytes with map keys sorted: equal bytes mean an equal pod, so a hit
    is always exact, and a pod that did change is simply a miss. Bounded; the oldest entry goes first.
    """

    __slots__ = ("_entries", "_max", "hits", "misses")

    def __init__(self, max_entries: int = 512) -> None:
        self._entries: dict[bytes, PodRequest] = {}
        self._max = max_entries
        self.hits = 0
        self.misses = 0

    def get(self, pod: nri_pb2.PodSandbox) -> PodRequest:
        key: bytes = pod.SerializeToString(deterministic=True)
        entries = self._entries
        found = entries.get(key)
        if found is not None:
            self.hits += 1
            return found
        self.misses += 1
        request = pod_request(pod)
        if len(entries) >= self._max:
            del entries[next(iter(entries))]
        entries[key] = request
        return request


def container_request(
    pod: PodRequest, container: nri_pb2.Container, resources: nri_pb2.LinuxResources | None = None
) -> ContainerRequest:
    """`resources` overrides the container's own (UpdateContainer's requested `linux_resources`)."""
    if resources is None:
        linux = container.linux  # an absent `linux` reads as an empty one: no resources either
        if linux.HasField("resources"):
            resources = linux.resources
    env = container.env
    # (pod, name, container_id, attempt, annotations, envs, resources, cgroup_parent, source): positional,
    # the cheapest call on the hot path (a keyword call costs ~0.5 us more here).
    return ContainerRequest(
        pod,
        container.name,
        container.id,
        0,
        wire_map(container.annotations),
        EnvView(env) if env else _NO_ENV,
        resources_from_wire(resources),
        pod.cgroup_parent,
        RequestSource.NRI,
    )


class EnvView(Mapping[str, str]):
    """A container's "K=V" env list as a read-only mapping, split only if a hook reads it.

    Pods get dozens to hundreds of injected service variables; splitting them on every CreateContainer
    for hooks that never look would be most of the translation's cost. The list is the request's own
    (never mutated after decoding); splitting twice in a race gives the same mapping.
    """

    __slots__ = ("_map", "_raw")

    def __init__(self, raw: Iterable[str]) -> None:
        self._raw = raw
        self._map: dict[str, str] | None = None

    def _split(self) -> dict[str, str]:
        found = self._map
        if found is None:
            found = self._map = split_env(self._raw)
        return found

    def __getitem__(self, key: str) -> str:
        return self._split()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._split())

    def __len__(self) -> int:
        return len(self._split())

    def __repr__(self) -> str:
        return f"EnvView({self._split()!r})"


_NO_ENV: Mapping[str, str] = frozen_map(None)


def split_env(env: Iterable[str]) -> dict[str, str]:
    """"K=V" entries split at the first '='. Entries with an empty key or value are dropped, as koordlet does."""
    out: dict[str, str] = {}
    for entry in env:
        key, sep, value = entry.partition("=")
        if sep and key and value:
            out[key] = value
    return out


def resources_from_wire(res: nri_pb2.LinuxResources | None) -> Resources:
    """The resources hooks may read. Memoized by the message's bytes (equal bytes, equal values): a
    container's resources are one of a handful of sets, and reading ten optional wrappers costs more."""
    if res is None:
        return _NO_RESOURCES
    key: bytes = res.SerializeToString(deterministic=True)
    found = _BY_BYTES.get(key)
    if found is None:
        found = _read_resources(res)
        if len(_BY_BYTES) >= 1024:
            _BY_BYTES.clear()  # a bound, not an LRU: the working set is a handful of sets
        _BY_BYTES[key] = found
    return found


def _read_resources(res: nri_pb2.LinuxResources) -> Resources:
    cpu = res.cpu if res.HasField("cpu") else None
    memory = res.memory if res.HasField("memory") else None
    return _resources(
        cpu.shares.value if cpu is not None and cpu.HasField("shares") else None,
        cpu.quota.value if cpu is not None and cpu.HasField("quota") else None,
        cpu.period.value if cpu is not None and cpu.HasField("period") else None,
        memory.limit.value if memory is not None and memory.HasField("limit") else None,
        (cpu.cpus or None) if cpu is not None else None,
        (cpu.mems or None) if cpu is not None else None,
    )


_NO_RESOURCES = Resources()
_BY_BYTES: dict[bytes, Resources] = {}


@functools.lru_cache(maxsize=1024)
def _resources(
    shares: int | None, quota: int | None, period: int | None, limit: int | None, cpus: str | None, mems: str | None
) -> Resources:
    """Containers mostly carry a handful of distinct resource sets (BestEffort: shares 2): share the values."""
    return Resources(
        cpu_shares=shares, cpu_quota_us=quota, cpu_period_us=period, memory_limit_bytes=limit,
        cpuset_cpus=cpus, cpuset_mems=mems,
    )


def resources_to_wire(res: Resources, out: nri_pb2.LinuxResources) -> None:
    """Write the set fields of `res` into `out`. Out-of-range values are an InputError naming the field."""
    if res.cpu_shares is not None:
        out.cpu.shares.value = _ranged(res.cpu_shares, 0, _UINT64_MAX, "cpu.shares")
    if res.cpu_quota_us is not None:
        out.cpu.quota.value = _ranged(res.cpu_quota_us, _INT64_MIN, _INT64_MAX, "cpu.quota")
    if res.cpu_period_us is not None:
        out.cpu.period.value = _ranged(res.cpu_period_us, 0, _UINT64_MAX, "cpu.period")
    if res.memory_limit_bytes is not None:
        out.memory.limit.value = _ranged(res.memory_limit_bytes, _INT64_MIN, _INT64_MAX, "memory.limit")
    if res.cpuset_cpus:
        out.cpu.cpus = res.cpuset_cpus
    if res.cpuset_mems:
        out.cpu.mems = res.cpuset_mems


def adjustment_for(
    resources: Resources,
    envs: Mapping[str, str],
    mounts: tuple[ContainerMount, ...] = (),
    devices: tuple[ContainerDevice, ...] = (),
) -> nri_pb2.CreateContainerResponse:
    """The CreateContainer reply: an adjustment of the new container only (never an update of it,
    which the runtime rejects during creation). Nothing to change -> an empty reply. Mounts and devices
    go in the hooks' order (the runtime adds them in that order)."""
    response = nri_pb2.CreateContainerResponse()
    if not resources.is_empty():
        resources_to_wire(resources, response.adjust.linux.resources)
    for key in sorted(envs):
        response.adjust.env.add(key=key, value=envs[key])
    for m in mounts:
        response.adjust.mounts.add(destination=m.destination, type=m.type, source=m.source, options=m.options)
    for d in devices:
        dev = response.adjust.linux.devices.add(
            path=d.path, type=d.type,
            major=_ranged(d.major, _INT64_MIN, _INT64_MAX, "devices.major"),
            minor=_ranged(d.minor, _INT64_MIN, _INT64_MAX, "devices.minor"),
        )
        if d.file_mode is not None:
            dev.file_mode.value = _ranged(d.file_mode, 0, _UINT32_MAX, "devices.file_mode")
    return response


def adjustment_bytes(
    resources: Resources,
    envs: Mapping[str, str],
    mounts: tuple[ContainerMount, ...] = (),
    devices: tuple[ContainerDevice, ...] = (),
) -> bytes:
    """The encoded CreateContainer reply. Hook values are memoized (the same frozen value for every
    container of a workload), so without envs, mounts or devices the encoding is memoized too: first by the
    value's identity (a dict lookup; the entry holds the value, so its id is not reused while it lives), then
    by equality (`lru_cache`, whose key hashes the dataclass in Python, ~0.5 us)."""
    if envs or mounts or devices:
        return _injected_bytes(resources, envs, mounts, devices)
    known = _BY_IDENTITY.get(id(resources))
    if known is not None and known[0] is resources:
        return known[1]
    data = _adjustment_bytes(resources)
    if len(_BY_IDENTITY) >= 1024:
        _BY_IDENTITY.clear()  # a bound, not an LRU: the working set is a handful of values
    _BY_IDENTITY[id(resources)] = (resources, data)
    return data


_BY_IDENTITY: dict[int, tuple[Resources, bytes]] = {}
# Replies that inject envs, mounts or devices (GPU/RDMA pods): by the values' identity (a memoized stage outcome
# hands out the same objects), then by equality; encoding five envs and two mounts cost ~10 us a call.
_INJECTED_BY_IDENTITY: dict[tuple[int, int, int, int], tuple[object, object, object, object, bytes]] = {}
_INJECTED: dict[tuple[Resources, tuple[tuple[str, str], ...], tuple[ContainerMount, ...], tuple[ContainerDevice, ...]], bytes] = {}


def _injected_bytes(
    resources: Resources, envs: Mapping[str, str], mounts: tuple[ContainerMount, ...],
    devices: tuple[ContainerDevice, ...],
) -> bytes:
    key = (id(resources), id(envs), id(mounts), id(devices))
    known = _INJECTED_BY_IDENTITY.get(key)
    if known is not None and known[0] is resources and known[1] is envs and known[2] is mounts and known[3] is devices:
        return known[4]
    value_key = (resources, tuple(sorted(envs.items())), mounts, devices)
    data = _INJECTED.get(value_key)
    if data is None:
        data = adjustment_for(resources, envs, mounts, devices).SerializeToString()
        if len(_INJECTED) >= 1024:
            _INJECTED.clear()  # a bound, not an LRU: a node has a handful of GPU workloads
        _INJECTED[value_key] = data
    if len(_INJECTED_BY_IDENTITY) >= 1024:
        _INJECTED_BY_IDENTITY.clear()
    _INJECTED_BY_IDENTITY[key] = (resources, envs, mounts, devices, data)
    return data


@functools.lru_cache(maxsize=1024)
def _adjustment_bytes(resources: Resources) -> bytes:
    data: bytes = adjustment_for(resources, {}).SerializeToString()
    return data


def update_for(container_id: str, resources: Resources, *, ignore_failure: bool = False) -> nri_pb2.ContainerUpdate | None:
    """A ContainerUpdate for `container_id`, or None when there is nothing to update."""
    if resources.is_empty():
        return None
    if not container_id:
        raise InputError("an update needs the container id", field="container.id")
    update = nri_pb2.ContainerUpdate(container_id=container_id, ignore_failure=ignore_failure)
    resources_to_wire(resources, update.linux.resources)
    return update


def _ranged(value: int, low: int, high: int, field: str) -> int:
    if not low <= value <= high:
        raise InputError(f"value {value} is outside [{low}, {high}]", field=field)
    return value


def sync_update_entry(container_id: str, resources: Resources) -> bytes:
    """One `update` entry (field 1) of a SynchronizeResponse, encoded: the container's id, then its
    resources with `ignore_failure` (the encoding memoized per value, as `adjustment_bytes` is). A sync
    answers thousands of these, and building a message each took longer than the hook; the entries are
    joined into the reply as they are. Nothing to update -> b"".

    Hook values are shared frozen objects, so the tail is found by the value's identity first (a dict
    lookup; hashing the dataclass for the `lru_cache` costs more than the rest of the entry)."""
    known = _TAIL_BY_IDENTITY.get(id(resources))
    if known is not None and known[0] is resources:
        tail = known[1]
    else:
        tail = _update_tail(resources) if not resources.is_empty() else b""
        if len(_TAIL_BY_IDENTITY) >= 1024:
            _TAIL_BY_IDENTITY.clear()  # a bound, not an LRU: the working set is a handful of values
        _TAIL_BY_IDENTITY[id(resources)] = (resources, tail)  # the entry holds the value: its id is not reused
    if not tail:
        return b""
    if not container_id:
        raise InputError("an update needs the container id", field="container.id")
    ident = container_id.encode()
    body = b"\x0a" + _varint(len(ident)) + ident + tail
    return b"\x0a" + _varint(len(body)) + body


_TAIL_BY_IDENTITY: dict[int, tuple[Resources, bytes]] = {}


@functools.lru_cache(maxsize=1024)
def _update_tail(resources: Resources) -> bytes:
    """ContainerUpdate fields 2 (linux.resources) and 3 (ignore_failure) for `resources`."""
    update = nri_pb2.ContainerUpdate(ignore_failure=True)
    resources_to_wire(resources, update.linux.resources)
    data: bytes = update.SerializeToString(deterministic=True)
    return data


def _varint(n: int) -> bytes:
    if n < 0x80:
        return _ONE_BYTE[n]
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_ONE_BYTE = [bytes((n,)) for n in range(0x80)]


def sync_pod_request(pod: nri_pb2.PodSandbox) -> PodRequest:
    """`pod_request` for a Synchronize's decisions: labels and annotations read in place (`wire_map`), not
    copied (a pod's annotations reach 64 KiB, a sync has thousands of pods). The request lives only as long
    as the sync's messages; what the store keeps is copied when it learns the pod (`_pod_record`)."""
    return pod_request(pod, wire_map)
