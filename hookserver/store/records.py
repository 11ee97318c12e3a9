"""Frozen records held by the state store. Everything a reader gets is immutable."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from hookserver.fastinit import fast_frozen_init
from hookserver.resources import Resources
from hookserver.system.cgroupnames import strip_runtime_prefix

__all__ = [
    "PENDING_PREFIX", "ContainerRecord", "NodeRecord", "PodRecord", "named_containers_by_pod", "pending_container_id",
    "started_containers",
]

_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class PodRecord:
    """A pod as the agent knows it. `source` says who told us: proxy, nri, apiserver, kubelet."""

    uid: str
    namespace: str
    name: str
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    cgroup_parent: str = ""
    sandbox_id: str = ""
    qos_class: str = ""
    kube_qos: str = ""
    priority: int | None = None
    priority_class: str = ""
    phase: str = ""
    node_name: str = ""
    runtime_class: str = ""
    source: str = ""
    first_seen: float = 0.0
    updated_at: float = 0.0
    # metadata.creationTimestamp (Unix seconds; 0 when the source does not say): the predictor's cold start.
    created_at: float = 0.0
    # Container name -> (requests, limits) as resource name -> quantity string, from the pod spec.
    container_specs: Mapping[str, tuple[Mapping[str, str], Mapping[str, str]]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    resource_version: str = ""
    # metadata.deletionTimestamp (RFC 3339) once the pod is terminating; "" otherwise. Evictions skip it.
    deletion_timestamp: str = ""
    # Container name -> runtime-prefixed ID (`containerd://<hash>`) from status.containerStatuses and
    # initContainerStatuses: how the reconciler finds container cgroups of a pod whose hooks it missed.
    container_ids: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    # What else the scheduler counts in the pod's request (k8s PodRequests): init containers in spec order as
    # (name, requests, restartPolicy Always = a sidecar), spec.overhead and pod-level spec.resources.requests.
    init_container_specs: tuple[tuple[str, Mapping[str, str], bool], ...] = ()
    overhead: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    pod_level_requests: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@fast_frozen_init  # filed on every CreateContainer (a new container each time): the hot path builds it
@dataclass(frozen=True, slots=True)
class ContainerRecord:
    id: str
    pod_uid: str
    name: str
    sandbox_id: str = ""
    cgroup_parent: str = ""
    state: str = ""
    pid: int = 0
    resources: Resources = field(default_factory=Resources)
    source: str = ""
    updated_at: float = 0.0


# A container a hook saw being created before the runtime named it (the proxy's PreCreateContainer) is
# filed under this key until its ID arrives; every reader of the store sets such records aside.
PENDING_PREFIX = "pending:"


def pending_container_id(pod_uid: str, name: str) -> str:
    """The store key of a container of `pod_uid` that has no runtime ID yet."""
    return f"{PENDING_PREFIX}{pod_uid}/{name}"


def named_containers_by_pod(containers: Iterable[ContainerRecord]) -> dict[str, list[ContainerRecord]]:
    """The containers the runtime has named (pending ones set aside), by pod UID: what readers of the store
    pass on to `started_containers`."""
    by_pod: dict[str, list[ContainerRecord]] = {}
    for c in containers:
        if c.id and not c.id.startswith(PENDING_PREFIX):
            by_pod.setdefault(c.pod_uid, []).append(c)
    return by_pod


@dataclass(frozen=True, slots=True)
class NodeRecord:
    name: str
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    capacity: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    allocatable: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    source: str = ""
    updated_at: float = 0.0
    # For each batch/mid resource koord-manager (or hookserver's capacity publisher) writes into the status:
    # the field managers that own it in capacity or allocatable (metadata.managedFields), sorted. How the
    # publisher notices a second writer from the watch, before it writes.
    published_owners: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    resource_version: str = ""
    # metadata.uid: what an object this agent publishes for the node (the Device report) names in its
    # ownerReferences, so the apiserver's garbage collector removes it with the Node.
    uid: str = ""


def started_containers(pod: PodRecord, hooked: Iterable[ContainerRecord]) -> list[ContainerRecord]:
    """The containers hooks and NRI told us of, then the started ones only the pod's statuses list
    (`<runtime>://<id>`; the prefix names the systemd scope): a pod that started before the agent, or whose
    hooks ran elsewhere, has only those. One entry per container ID, by name.

    The one rule the QoS readers and the collectors share, so a pod the kubelet started while the agent was
    away is measured and tuned like one whose hooks ran."""
    out = list(hooked)
    seen = {strip_runtime_prefix(c.id) for c in out}
    for name, raw_id in pod.container_ids.items():
        cid = strip_runtime_prefix(raw_id)
        if cid and cid not in seen:
            seen.add(cid)
            out.append(ContainerRecord(id=raw_id, pod_uid=pod.uid, name=name))
    return sorted(out, key=lambda r: (r.name, r.id))
