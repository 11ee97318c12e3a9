"""Which cgroups to read: the pods and containers the agent knows, resolved to directories and labels.

A pod's directory is its CRI `cgroup_parent` when it has one; otherwise the kubelet's layout from kube QoS
and UID (`hookserver.system.cgroupnames.pod_dir`), probing the three QoS levels when the QoS is unknown. A
container's directory is its pod's plus the runtime's name for it. Paths go through
`normalize_cgroup_dir`, so a crafted parent (`../../etc`) is refused and reported, never read.

Resolution is cached per store snapshot version: on a quiet node a cycle costs no string work here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from hookserver.aio.hotgate import paced
from hookserver.errors import HookServerError, InputError
from hookserver.podclass import request_amounts
from hookserver.system.cgroupnames import (
    CgroupDriver,
    ContainerRuntime,
    KubeQoS,
    container_dir_name,
    kube_qos_of_pod,
    normalize_cgroup_dir,
    pod_dir,
    qos_dir,
    runtime_of,
)
from hookserver.store.records import ContainerRecord, PodRecord, named_containers_by_pod, started_containers
from hookserver.store.state import StoreSnapshot
from hookserver.store.timeseries import Labels, make_labels

__all__ = ["ContainerTarget", "PodTarget", "TargetResolver", "Targets", "detect_driver", "effective_qos"]

log = logging.getLogger(__name__)

BATCH_CPU = "kubernetes.io/batch-cpu"


@dataclass(frozen=True, slots=True)
class ContainerTarget:
    id: str
    name: str
    rel_dir: str
    labels: Labels


@dataclass(frozen=True, slots=True)
class PodTarget:
    uid: str
    namespace: str
    name: str
    rel_dir: str
    labels: Labels
    qos: str
    priority: str
    is_be: bool
    cpu_request_cores: float
    containers: tuple[ContainerTarget, ...]


@dataclass(frozen=True, slots=True)
class Targets:
    pods: tuple[PodTarget, ...]
    be_dir: str
    driver: CgroupDriver
    problems: tuple[str, ...] = ()

    @classmethod
    def empty(cls, driver: CgroupDriver = CgroupDriver.CGROUPFS) -> Targets:
        return cls((), qos_dir(driver, KubeQoS.BESTEFFORT), driver)


def detect_driver(configured: str, exists: Callable[[str], bool]) -> CgroupDriver:
    """`systemd`/`cgroupfs` as configured; `auto` guesses from the kubepods directory name (then systemd)."""
    if configured in ("systemd", "cgroupfs"):
        return CgroupDriver(configured)
    if exists("kubepods.slice"):
        return CgroupDriver.SYSTEMD
    if exists("kubepods"):
        return CgroupDriver.CGROUPFS
    return CgroupDriver.SYSTEMD


def _kube_qos(pod: PodRecord) -> KubeQoS | None:
    return kube_qos_of_pod(pod.kube_qos, pod.cgroup_parent)


def effective_qos(pod: PodRecord) -> str:
    """The koordinator QoS class: the label's, else from kube QoS (BestEffort -> BE, others -> LS)."""
    if pod.qos_class:
        return pod.qos_class
    kube = _kube_qos(pod)
    if kube is None:
        return ""
    return "BE" if kube is KubeQoS.BESTEFFORT else "LS"


def _cpu_request_cores(pod: PodRecord, is_be: bool, containers: Iterable[ContainerRecord] = ()) -> float:
    """The pod's CPU request as the scheduler counts it (k8s PodRequests, sidecars included, and the
    runtime's announced resources for a pod without a spec: hookserver.podclass.request_amounts): batch-cpu
    (milli-cores already) for a BE pod that asks for it, else the cpu quantity."""
    amounts = request_amounts(pod, (BATCH_CPU, "cpu"), containers)
    milli = amounts[BATCH_CPU] if is_be and BATCH_CPU in amounts else amounts.get("cpu", 0)
    return milli / 1000.0


class TargetResolver:
    """Resolves a snapshot's pods and containers to cgroup directories (relative to a hierarchy root)."""

    def __init__(
        self,
        *,
        driver: CgroupDriver,
        runtime: ContainerRuntime,
        exists: Callable[[str], bool],
        containers: bool = True,
    ) -> None:
        self.driver = driver
        self.runtime = runtime
        self._exists = exists
        self._containers = containers
        self._cached: tuple[int, Targets] | None = None
        self._probed: dict[str, str] = {}
        self._warned: set[str] = set()

    def resolve(self, snap: StoreSnapshot) -> Targets:
        cached = self._cached
        if cached is not None and cached[0] == snap.version:
            return cached[1]
        by_pod = named_containers_by_pod(snap.containers.values())
        pods: list[PodTarget] = []
        problems: list[str] = []
        for pod in paced(snap.pods.values(), every=16):  # the hot gate: ~0.2 ms of pods between pauses
            try:
                target = self._pod(pod, by_pod.get(pod.uid, []), problems)
            except HookServerError as exc:
                problems.append(f"pod {pod.key} ({pod.uid}): {exc}")
                if pod.uid not in self._warned:
                    self._warned.add(pod.uid)
                    log.warning("not collecting pod %s (%s): %s", pod.key, pod.uid, exc)
                continue
            if target is not None:
                pods.append(target)
        live = {p.uid for p in snap.pods.values()}
        self._probed = {uid: rel for uid, rel in self._probed.items() if uid in live}
        targets = Targets(tuple(pods), qos_dir(self.driver, KubeQoS.BESTEFFORT), self.driver, tuple(problems))
        self._cached = (snap.version, targets)
        return targets

    @staticmethod
    def _request(pod: PodRecord, is_be: bool, containers: list[ContainerRecord], problems: list[str]) -> float:
        """A bad request quantity costs only the BE request sum, never the pod's usage samples."""
        try:
            return _cpu_request_cores(pod, is_be, containers)
        except InputError as exc:
            problems.append(f"pod {pod.key} ({pod.uid}): CPU request not counted: {exc}")
            return 0.0

    def _pod_dir(self, pod: PodRecord) -> str | None:
        if pod.cgroup_parent:
            return normalize_cgroup_dir(pod.cgroup_parent)
        kube = _kube_qos(pod)
        if kube is not None:
            return pod_dir(self.driver, kube, pod.uid)
        known = self._probed.get(pod.uid)
        if known is not None:
            return known
        for qos in (KubeQoS.BURSTABLE, KubeQoS.BESTEFFORT, KubeQoS.GUARANTEED):
            rel = pod_dir(self.driver, qos, pod.uid)
            if self._exists(rel):
                self._probed[pod.uid] = rel
                return rel
        return None

    def _pod(self, pod: PodRecord, containers: list[ContainerRecord], problems: list[str]) -> PodTarget | None:
        rel = self._pod_dir(pod)
        if rel is None:
            return None
        qos = effective_qos(pod)
        is_be = qos == "BE"
        labels = make_labels(pod=pod.uid, qos=qos, priority=pod.priority_class)
        ctargets: list[ContainerTarget] = []
        if self._containers:
            # Hooked containers, then the started ones only the pod's statuses list (the kubelet started
            # them while the agent was away): both are measured.
            for record in started_containers(pod, containers):
                cid, cname, parent = record.id, record.name, record.cgroup_parent
                name = container_dir_name(self.driver, runtime_of(record.id, self.runtime), record.id)
                base = normalize_cgroup_dir(parent) if parent else rel
                crel = base if base.rsplit("/", 1)[-1] == name else f"{base}/{name}"
                ctargets.append(
                    ContainerTarget(
                        id=cid,
                        name=cname,
                        rel_dir=crel,
                        labels=make_labels(pod=pod.uid, container=cid, qos=qos, priority=pod.priority_class),
                    )
                )
        return PodTarget(
            uid=pod.uid,
            namespace=pod.namespace,
            name=pod.name,
            rel_dir=rel,
            labels=labels,
            qos=qos,
            priority=pod.priority_class,
            is_be=is_be,
            cpu_request_cores=self._request(pod, is_be, containers, problems),
            containers=tuple(ctargets),
        )

