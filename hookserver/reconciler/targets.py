"""Where a running pod's cgroups are: the pod directory and one directory per started container.

The pod directory is the CRI cgroup parent a hook or NRI saw; else the kubelet's layout from kube QoS and
UID (reference §4.7); else, for a pod that carries neither (a standalone pod learnt without a parent), the
one of the three QoS levels that exists. Containers are the store's `started_containers` (the rule the
collectors and QoS readers share): the IDs the store learnt from hooks and NRI, then the pod's container
statuses (`<runtime>://<id>`) from the apiserver or the kubelet, so the reconciler tunes what they measure.
The runtime prefix picks the systemd scope name, so a docker container on a containerd-configured node still
resolves. Pure naming; the only I/O is the existence probe the caller passes in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from hookserver.errors import PathEscapeError
from hookserver.executor.layout import CgroupLayout
from hookserver.store.records import PENDING_PREFIX, ContainerRecord, PodRecord, started_containers
from hookserver.system.cgroupnames import (
    KubeQoS,
    container_dir_name,
    kube_qos_of_pod,
    normalize_cgroup_dir,
    runtime_of,
    strip_runtime_prefix,
)

__all__ = ["ContainerTarget", "PodTarget", "kube_qos_of", "pod_target", "runtime_of", "sandbox_dir_of"]

_PROBE_ORDER = (KubeQoS.BESTEFFORT, KubeQoS.BURSTABLE, KubeQoS.GUARANTEED)


@dataclass(frozen=True, slots=True)
class ContainerTarget:
    name: str
    id: str  # without the runtime prefix
    cgroup_dir: str


@dataclass(frozen=True, slots=True)
class PodTarget:
    """A pod's cgroup directories, relative to each hierarchy root (`cgroup_dir` as the executor takes it)."""

    pod: PodRecord
    cgroup_dir: str
    containers: tuple[ContainerTarget, ...]
    # Containers a hook saw being created but whose ID nobody has told us yet (the proxy's PreCreateContainer).
    pending: int = 0


def kube_qos_of(pod: PodRecord) -> KubeQoS | None:
    """`BestEffort` / `Burstable` / `Guaranteed` from the pod status, else the tier of its cgroup parent; None
    when nobody told us."""
    return kube_qos_of_pod(pod.kube_qos, pod.cgroup_parent)


def pod_target(
    pod: PodRecord,
    containers: Iterable[ContainerRecord],
    layout: CgroupLayout,
    *,
    probe: Callable[[str], bool],
) -> PodTarget | None:
    """The pod's directories, or None when no directory can be named (or the one probed for is absent).

    Raises PathEscapeError for a cgroup parent or container ID that is not a safe path.
    """
    cgroup_dir = _pod_dir(pod, layout, probe)
    if cgroup_dir is None:
        return None
    base = normalize_cgroup_dir(cgroup_dir)
    hooked: list[ContainerRecord] = []
    pending = 0
    for record in containers:
        if record.id.startswith(PENDING_PREFIX):  # being created right now: the runtime has not named it yet
            pending += 1
        else:
            hooked.append(record)
    out = [_container(record, base, layout) for record in started_containers(pod, hooked)]
    if out:
        pending = 0  # a started container: any name still pending is only the proxy never telling us its ID
    return PodTarget(pod=pod, cgroup_dir=cgroup_dir, containers=tuple(out), pending=pending)


def _pod_dir(pod: PodRecord, layout: CgroupLayout, probe: Callable[[str], bool]) -> str | None:
    if pod.cgroup_parent:
        normalize_cgroup_dir(pod.cgroup_parent)  # refuse `..` and NUL before anything is planned
        return pod.cgroup_parent
    kube = kube_qos_of(pod)
    if kube is not None:
        return layout.pod_dir(kube, pod.uid)
    for qos in _PROBE_ORDER:
        rel = layout.pod_dir(qos, pod.uid)
        if probe(rel):
            return rel
    return None


def _container(record: ContainerRecord, pod_dir: str, layout: CgroupLayout) -> ContainerTarget:
    name, raw_id = record.name, record.id
    cid = strip_runtime_prefix(raw_id)
    if not cid:
        raise PathEscapeError(f"container {name!r} has an empty ID", value=raw_id)
    parent = normalize_cgroup_dir(record.cgroup_parent) if record.cgroup_parent else pod_dir
    dir_name = container_dir_name(layout.driver, runtime_of(raw_id, layout.runtime), raw_id)
    # NRI hands some containers their own dir as the parent: do not append the name twice.
    cgroup_dir = parent if parent.rsplit("/", 1)[-1] == dir_name else f"{parent}/{dir_name}"
    return ContainerTarget(name=name, id=cid, cgroup_dir=cgroup_dir)


def sandbox_dir_of(target: PodTarget, layout: CgroupLayout, children: Callable[[str], list[str] | None]) -> str:
    """The pod's sandbox (pause) container's cgroup, "" when it cannot be named yet.

    With the sandbox ID a door told the store (NRI), by the layout's naming where the pod cgroup has that child.
    Otherwise koordlet's
    `GetPodSandboxContainerID` (`pkg/koordlet/util/pod.go`): once some container has started, the pod cgroup's
    one child that is no known container's (`children(pod_dir)` lists them; a CRI-O `crio-<id>.scope` is a
    container, its sandbox is `crio-<id>`). None or several such children: "" (a container not known yet)."""
    pod = target.pod
    names = children(target.cgroup_dir)
    if not names:
        return ""
    base = normalize_cgroup_dir(target.cgroup_dir)
    if pod.sandbox_id:
        named = layout.sandbox_dir(target.cgroup_dir, pod.sandbox_id).rsplit("/", 1)[-1]
        if named in names:  # else the node's naming is not the runtime's: look for it as below
            return f"{base}/{named}" if base else named
    if not target.containers:
        return ""
    known = {c.cgroup_dir.rsplit("/", 1)[-1] for c in target.containers}
    candidates = [n for n in names if n not in known and not (n.startswith("crio-") and n.endswith(".scope"))]
    if len(candidates) != 1:
        return ""
    return f"{base}/{candidates[0]}" if base else candidates[0]
