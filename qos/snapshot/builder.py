"""Builds the `QoSSnapshot`: the store's pods, node and NodeSLO, the collectors' latest samples and BE
window, and the BE tier's cgroup files. All I/O of a QoS round happens here, before any planner runs.

Small typed readers, each for one input, so a missing or stale sample is visible as None instead of 0:
a planner that would act on missing data (e.g. suppress with no LS usage) can tell and skip.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Protocol

from hookserver.aio.hotgate import pause, paced
from hookserver.errors import InputError
from hookserver.koord_resources import ANNOTATION_EXTENDED_RESOURCE_SPEC
from hookserver.podclass import request_amounts
from hookserver.slo.model import NodeSLOSpec
from hookserver.store.originals import NodeOriginals
from hookserver.store.records import ContainerRecord, PodRecord, named_containers_by_pod, started_containers
from hookserver.store.specs import container_spec
from hookserver.store.state import StateStore, StoreSnapshot
from hookserver.store.timeseries import TimeSeriesStore
from hookserver.system.cgroupnames import (
    KubeQoS,
    container_dir_name,
    kube_qos_of_pod,
    kube_qos_of_status,
    normalize_cgroup_dir,
    pod_dir,
    qos_dir,
    runtime_of,
)
from hookserver.system.cgroupcontrollers import missing_controllers, with_controller
from hookserver.system.cpulist import parse_cpu_list
from hookserver.system.files import read_text
from hookserver.system.topology import NodeTopology

from qos.snapshot.node import BATCH_CPU, cpus_of, json_annotation, node_facts
from qos.snapshot.cgroups import CgroupView
from qos.snapshot.kernel import KernelFacts
from hookserver.system.coresched import CoreSchedKernel, LibcCoreSched
from qos.snapshot.kernel_reader import KernelReader
from qos.snapshot.tc_reader import TcReader
from qos.snapshot.priority import REQUEST_RESOURCES
from qos.snapshot.model import (
    ANNOTATION_RESOURCE_STATUS,
    BEStats,
    BETier,
    ContainerFacts,
    HostAppUsage,
    NodeUsage,
    PodFacts,
    QoSSnapshot,
)

__all__ = [
    "BATCH_CPU",
    "CgroupView",
    "KernelSource",
    "SnapshotBuilder",
    "be_window_s",
    "node_facts",
    "pod_requests",
    "pod_requests_milli",
]

log = logging.getLogger(__name__)

NODE_TOPOLOGY_KEY = "node_topology"  # collectors.node_info.NODE_TOPOLOGY_KEY (a static value in the store)

# Store series the QoS planners read (names from collectors/names.py; a test keeps them in step).
POD_CPU = "pod_cpu_usage"
POD_MEMORY = "pod_memory_usage"
NODE_CPU = "node_cpu_usage"
NODE_MEMORY = "node_memory_usage"
NODE_MEMORY_TOTAL = "node_memory_total"
SYSTEM_CPU = "system_cpu_usage"
HOST_APP_CPU = "host_app_cpu_usage"
BE_CPU_USAGE = "be_cpu_usage"
BE_CPU_REQUEST = "be_cpu_request"
BE_CPU_LIMIT = "be_cpu_real_limit"
SERIES_READ = (POD_CPU, POD_MEMORY, NODE_CPU, NODE_MEMORY, NODE_MEMORY_TOTAL, SYSTEM_CPU, HOST_APP_CPU,
               BE_CPU_USAGE, BE_CPU_REQUEST, BE_CPU_LIMIT)



class KernelSource(Protocol):
    """Reads the snapshot's kernel part (`qos.snapshot.kernel_reader.KernelReader`; tests may script one)."""

    def read(self, snap: StoreSnapshot, series: TimeSeriesStore, now: float, *, replay_gate: str = "") -> KernelFacts: ...


def be_window_s(slo: NodeSLOSpec, collect_interval_s: float) -> float:
    """koordlet's CPU-evict window: `cpuEvictTimeWindowSeconds`, never shorter than the collect interval."""
    configured = slo.resource_used_threshold_with_be.cpu_evict_time_window_seconds
    window = float(collect_interval_s)
    if configured is not None and configured > window:
        window = float(configured)
    return window


def pod_requests(pod: PodRecord, containers: Iterable[ContainerRecord] = ()) -> dict[str, int]:
    """The requests the eviction modes read, as the scheduler counts them (k8s PodRequests: sidecars beside
    the containers, init containers as a floor; hookserver.podclass.request_amounts), from the containers the
    runtime announced for a pod without a spec: `cpu` in milli-cores, the others as their count
    (batch-cpu/mid-cpu are milli-cores already, memory resources bytes). Bad quantity: InputError."""
    return request_amounts(pod, REQUEST_RESOURCES, containers)


def pod_requests_milli(pod: PodRecord) -> tuple[int, int]:
    """(batch-cpu request, cpu request) in milli-cores, as pod_requests counts them. batch-cpu is a count of
    milli-cores already (koordlet reads it with `Value()`). A bad quantity raises InputError."""
    amounts = pod_requests(pod)
    return amounts.get(BATCH_CPU, 0), amounts.get("cpu", 0)


def _koord_qos(pod: PodRecord) -> str:
    """The label's class, else from kube QoS: the status's, or the tier of the cgroup parent for a pod the
    runtime announced (proxy, NRI, standalone), so it is judged like an apiserver pod."""
    if pod.qos_class:
        return pod.qos_class
    kube = kube_qos_of_pod(pod.kube_qos, pod.cgroup_parent)
    if kube is None:
        return ""
    return "BE" if kube is KubeQoS.BESTEFFORT else "LS"


class SnapshotBuilder:
    """`build()` returns the snapshot of now. Keeps small caches keyed by immutable record identity (a
    pod's parsed requests), so a quiet node costs no quantity parsing per round."""

    def __init__(
        self,
        store: StateStore,
        *,
        cgroups: CgroupView | None,
        collect_interval_s: float = 1.0,
        max_age_s: float | None = None,
        kernel: KernelSource | None = None,
    ) -> None:
        self.store = store
        self.kernel = kernel
        self.cgroups = cgroups
        self.collect_interval_s = collect_interval_s
        self.max_age_s = max_age_s if max_age_s is not None else 2 * collect_interval_s + 0.5
        # keyed by the identity of every record field the requests come from (records are immutable), and the
        # announced resources of a pod without a spec
        self._requests: dict[str, tuple[tuple[tuple[object, ...], tuple[object, ...]],
                                        tuple[int, int, Mapping[str, int]]]] = {}
        self._pod_cache: tuple[int, tuple[PodRecord, ...]] | None = None
        self._problems: dict[str, str] = {}
        # Why the BE tier is missing ("" when it is there): `hookctl qos` shows it as one calm line.
        self.tier_problem = ""
        # Which controllers the BE tier lacks and what that leaves unavailable ("" when it has them all).
        self.controllers_problem = ""
        self._tier_missing: frozenset[str] = frozenset()
        self._lock = threading.Lock()

    @classmethod
    def for_node(
        cls,
        store: StateStore,
        cgroups: CgroupView,
        *,
        proc_root: str,
        sys_root: str,
        originals: NodeOriginals,
        gate_on: Callable[[str], bool],
        collect_interval_s: float = 1.0,
        tc: TcReader | None = None,
    ) -> SnapshotBuilder:
        """The builder of a running agent, with its kernel part: the one way a snapshot of the node is read.
        `gate_on` says which kernel facts to read (only those of reconcilers whose gate is on); `tc` reads the
        network interface's traffic control (default: the default route's, in this network namespace)."""
        kernel = KernelReader(
            cgroups, runtime=cgroups.runtime, proc_root=proc_root, sys_root=sys_root, originals=originals,
            enabled=gate_on, tc=tc,
        )
        return cls(store, cgroups=cgroups, collect_interval_s=collect_interval_s, kernel=kernel)

    def core_sched_kernel(self) -> CoreSchedKernel:
        """The prctl the snapshot reads cookies with, for the executor that sets them (one kernel interface, so a
        test's fake serves both)."""
        if isinstance(self.kernel, KernelReader):
            return self.kernel.core_sched.kernel
        return LibcCoreSched()

    # -- readers ---------------------------------------------------------------------------------
    def _latest(self, series: TimeSeriesStore, metric: str, now: float) -> list[tuple[dict[str, str], float]]:
        cutoff = now - self.max_age_s
        return [(dict(key.labels), value) for key, ts, value, _ in series.latest(metric) if ts >= cutoff]

    def _one(self, series: TimeSeriesStore, metric: str, now: float) -> float | None:
        values = self._latest(series, metric, now)
        return values[0][1] if values else None

    def _requests_of(self, pod: PodRecord, containers: list[Any]) -> tuple[int, int, Mapping[str, int]]:
        cached = self._requests.get(pod.uid)
        # without a pod spec the requests come from the extended-resource-spec annotation and the announced
        # resources (hookserver.store.specs), so both are part of the key: a pod's annotation may come later
        # than its containers (gaps filled after a proxy failover)
        announced = () if pod.container_specs else (
            pod.annotations.get(ANNOTATION_EXTENDED_RESOURCE_SPEC),
            *((c.name, c.updated_at, c.resources) for c in containers))
        key = (pod.container_specs, pod.init_container_specs, pod.overhead, pod.pod_level_requests)
        if (cached is not None and all(a is b for a, b in zip(cached[0][0], key, strict=True))
                and cached[0][1] == announced):
            return cached[1]
        value: tuple[int, int, Mapping[str, int]]
        try:
            amounts = pod_requests(pod, containers)
            value = (amounts.get(BATCH_CPU, 0), amounts.get("cpu", 0), MappingProxyType(amounts))
        except InputError as exc:
            if self._problems.get(pod.uid) != str(exc):
                self._problems[pod.uid] = str(exc)
                log.warning("qos: pod %s: request not counted: %s", pod.key, exc)
            value = (0, 0, MappingProxyType({}))
        self._requests[pod.uid] = ((key, announced), value)
        return value

    def _pod_dir(self, pod: PodRecord) -> str:
        if pod.cgroup_parent:
            try:
                return normalize_cgroup_dir(pod.cgroup_parent)
            except Exception:  # noqa: BLE001 - a crafted parent is refused: no directory, never a crash
                return ""
        kube = kube_qos_of_status(pod.kube_qos)
        if kube is None or self.cgroups is None:
            return ""
        try:
            return pod_dir(self.cgroups.driver, kube, pod.uid)
        except Exception:  # noqa: BLE001 - as above
            return ""

    def _container_dir(self, pod_rel: str, parent: str, container_id: str) -> str:
        if self.cgroups is None:
            return ""
        try:
            runtime = runtime_of(container_id, self.cgroups.runtime)
            name = container_dir_name(self.cgroups.driver, runtime, container_id)
            base = normalize_cgroup_dir(parent) if parent else pod_rel
        except Exception:  # noqa: BLE001 - a crafted ID or parent gives no directory, never a crash
            return ""
        if not base:
            return ""
        return base if base.rsplit("/", 1)[-1] == name else f"{base}/{name}"

    def _containers(self, snap: StoreSnapshot, pod: PodRecord, pod_rel: str, by_pod: dict[str, list[Any]]) -> tuple[ContainerFacts, ...]:
        """The containers hooks and NRI told us of, then the started ones only the pod's statuses list
        (`hookserver.store.records.started_containers`)."""
        out = []
        for c in started_containers(pod, by_pod.get(pod.uid, ())):
            spec = container_spec(pod, c.name, c)  # the pod spec, else what the runtime announced
            out.append(ContainerFacts(id=c.id, name=c.name, cgroup_dir=self._container_dir(pod_rel, c.cgroup_parent, c.id),
                                      requests=spec.requests, limits=spec.limits))
        return tuple(sorted(out, key=lambda c: (c.name, c.id)))

    def _pods(
        self, snap: StoreSnapshot, series: TimeSeriesStore, now: float, evicted: frozenset[str]
    ) -> tuple[PodFacts, ...]:
        """Every pod; one this agent evicted within the cool-down counts as terminating (planners skip it)."""
        cpu = {labels.get("pod", ""): v for labels, v in self._latest(series, POD_CPU, now)}
        pause()
        mem = {labels.get("pod", ""): v for labels, v in self._latest(series, POD_MEMORY, now)}
        pause()
        by_pod = named_containers_by_pod(snap.containers.values())
        out: list[PodFacts] = []
        for pod in paced(snap.pods.values()):  # the hot gate: step aside between pods
            batch, cpu_req, requests = self._requests_of(pod, by_pod.get(pod.uid, []))
            status = json_annotation(pod.annotations, ANNOTATION_RESOURCE_STATUS)
            cpuset = cpus_of(status.get("cpuset")) if isinstance(status, Mapping) else frozenset[int]()
            pdir = self._pod_dir(pod)
            out.append(PodFacts(
                uid=pod.uid, namespace=pod.namespace, name=pod.name, qos=_koord_qos(pod),
                qos_label=pod.labels.get("koordinator.sh/qosClass", "") or pod.qos_class, priority=pod.priority,
                priority_class=pod.priority_class, phase=pod.phase,
                terminating=bool(pod.deletion_timestamp) or pod.uid in evicted,
                labels=pod.labels, annotations=pod.annotations,
                cpu_usage_cores=cpu.get(pod.uid), memory_usage_bytes=mem.get(pod.uid),
                batch_cpu_request_milli=batch, cpu_request_milli=cpu_req, requests=requests, cpuset=cpuset,
                cgroup_dirs=(pdir,) if pdir else (),
                containers=self._containers(snap, pod, pdir, by_pod),
            ))
        live = set(snap.pods)
        for uid in [u for u in self._requests if u not in live]:
            del self._requests[uid]
        return tuple(out)

    def _usage(self, series: TimeSeriesStore, now: float, slo: NodeSLOSpec) -> NodeUsage:
        apps = tuple(
            HostAppUsage(labels.get("app", ""), labels.get("qos", ""), value)
            for labels, value in self._latest(series, HOST_APP_CPU, now)
        )
        window = be_window_s(slo, self.collect_interval_s)
        keys = series.keys(NODE_CPU)
        stats = series.window(keys[0], window, now=now) if keys else None
        return NodeUsage(
            cpu_cores=self._one(series, NODE_CPU, now),
            cpu_cores_avg=stats.avg if stats is not None and stats.count > 0 else None,
            cpu_avg_count=stats.count if stats is not None else 0,
            cpu_window_s=window,
            memory_bytes=self._one(series, NODE_MEMORY, now),
            memory_total_bytes=self._one(series, NODE_MEMORY_TOTAL, now) if series.keys(NODE_MEMORY_TOTAL) else None,
            system_cpu_cores=self._one(series, SYSTEM_CPU, now),
            host_apps=apps,
        )

    def _be(self, series: TimeSeriesStore, slo: NodeSLOSpec, now: float) -> BEStats:
        window = be_window_s(slo, self.collect_interval_s)
        avgs: list[float] = []
        counts: list[int] = []
        lasts: list[float | None] = []
        for metric in (BE_CPU_USAGE, BE_CPU_REQUEST, BE_CPU_LIMIT):
            keys = series.keys(metric)
            stats = series.window(keys[0], window, now=now) if keys else None
            avgs.append(stats.avg * 1000 if stats is not None else 0.0)
            counts.append(stats.count if stats is not None else 0)
            last_window = series.window(keys[0], 2 * self.collect_interval_s, now=now) if keys else None
            lasts.append(last_window.last * 1000 if last_window is not None else None)
        return BEStats(
            window_s=window, avg_usage_milli=avgs[0], avg_request_milli=avgs[1], avg_limit_milli=avgs[2],
            count=min(counts), last_usage_milli=lasts[0], last_request_milli=lasts[1], last_limit_milli=lasts[2],
        )

    def _be_tier(self) -> BETier | None:
        view = self.cgroups
        if view is None:
            return None
        tier = qos_dir(view.driver, KubeQoS.BESTEFFORT)
        cpuset_root = view.hierarchy_root("cpuset")
        cpu_root = view.hierarchy_root("cpu")
        if not os.path.isdir(os.path.join(cpu_root, tier)) and not os.path.isdir(os.path.join(cpuset_root, tier)):
            # No kubelet BE tier on this node (a developer machine, a node before its first BE pod): a state,
            # not an error. Planners see "no tier" and say so once in their summary (which the runner records
            # only when it changes); they plan no write into a directory that is not there.
            self._note_tier(f"no BE tier cgroup ({tier} under {cpu_root})")
            return None
        self._note_tier("")
        missing = self._tier_controllers(tier, cpu_root, cpuset_root, v2=view.v2)
        cpuset: frozenset[int] | None = None
        text = read_text(os.path.join(cpuset_root, tier, "cpuset.cpus"))
        if view.v2 and text is not None and not text.strip():
            # v2: an empty cpuset.cpus inherits the parent's CPUs (the kubelet's systemd slices leave it so);
            # what the tier can run on is its effective set, not "no CPUs".
            text = read_text(os.path.join(cpuset_root, tier, "cpuset.cpus.effective"))
        if text is not None:
            try:
                cpuset = parse_cpu_list(text)
            except ValueError:
                cpuset = None
        quota: int | None = None
        period = 100_000
        if view.v2:
            raw = read_text(os.path.join(cpu_root, tier, "cpu.max"))
            if raw is not None:
                fields = raw.split()
                try:
                    quota = -1 if not fields or fields[0] == "max" else int(fields[0])
                    period = int(fields[1]) if len(fields) > 1 else period
                except ValueError:
                    quota = None
        else:
            raw = read_text(os.path.join(cpu_root, tier, "cpu.cfs_quota_us"))
            if raw is not None:
                try:
                    quota = int(raw)
                except ValueError:
                    quota = None
            raw_period = read_text(os.path.join(cpu_root, tier, "cpu.cfs_period_us"))
            if raw_period is not None and raw_period.strip().isdigit():
                period = int(raw_period)
        levels: tuple[tuple[str, ...], ...] = ()
        if "cpuset" not in missing:
            levels = _cgroup_levels(cpuset_root, tier, depth=2)
            levels = with_controller(cpuset_root, levels, "cpuset") if view.v2 else levels
        return BETier(dir=tier, cpuset=cpuset, quota_us=quota, period_us=period, cpuset_levels=levels, v2=view.v2,
                      missing_controllers=missing)

    def _tier_controllers(self, tier: str, cpu_root: str, cpuset_root: str, *, v2: bool) -> frozenset[str]:
        """The tier's missing cpu/cpuset controllers, noted (and logged) once per change."""
        parent = os.path.dirname(tier)
        if v2:
            missing = missing_controllers(cpu_root, tier, ("cpu", "cpuset"))
            where = f"not in {os.path.basename(parent) or 'the root'}'s subtree_control"
        else:
            missing = frozenset(c for c, root in (("cpu", cpu_root), ("cpuset", cpuset_root))
                                if not os.path.isdir(os.path.join(root, tier)))
            where = "no directory in that v1 hierarchy"
        problem = ""
        if missing:
            names = " and ".join(sorted(missing))
            problem = f"{names} not enabled on {os.path.basename(tier)} ({where}): {names} knobs unavailable there"
        if problem != self.controllers_problem:
            back = self._tier_missing - missing
            if back:
                log.info("qos: %s controller enabled now on %s", " and ".join(sorted(back)), tier)
            if problem:
                log.info("qos: %s", problem)
            self.controllers_problem, self._tier_missing = problem, missing
        return missing

    def _note_tier(self, problem: str) -> None:
        """Log the BE tier's coming and going once per change, never per round."""
        if problem != self.tier_problem:
            if problem:
                log.info("qos: %s: BE tier reconcilers wait for it", problem)
            elif self.tier_problem:
                log.info("qos: the BE tier cgroup is there now")
            self.tier_problem = problem

    # -- the snapshot ----------------------------------------------------------------------------
    def build(self, *, evicted: frozenset[str] = frozenset(), replay_gate: str = "") -> QoSSnapshot:
        """Thread-safe: the runner's thread and a `hookctl qos plan` replay may build at once (the caches).
        `replay_gate`: for a replay of that gate's reconciler (its kernel facts are read even with the gate off)."""
        with self._lock:
            return self._build(evicted, replay_gate)

    def _build(self, evicted: frozenset[str], replay_gate: str = "") -> QoSSnapshot:
        snap = self.store.snapshot()
        series = self.store.series
        now = self.store.clock()
        slo = snap.node_slo if isinstance(snap.node_slo, NodeSLOSpec) else NodeSLOSpec.model_validate({})
        topology = series.get_static(NODE_TOPOLOGY_KEY)
        pods = self._pods(snap, series, now, evicted)
        pause()
        usage = self._usage(series, now, slo)
        pause()
        be = self._be(series, slo, now)
        pause()
        return QoSSnapshot(
            now=now,
            slo=slo,
            node=node_facts(snap.node) if snap.node is not None else None,
            pods=pods,
            usage=usage,
            be=be,
            be_tier=self._be_tier(),
            topology=topology if isinstance(topology, NodeTopology) else None,
            collect_interval_s=self.collect_interval_s,
            slo_sources=MappingProxyType(dict(snap.node_slo_sources)),
            stale=snap.stale,
            kernel=self.kernel.read(snap, series, now, replay_gate=replay_gate) if self.kernel is not None else KernelFacts(),
        )


def _cgroup_levels(root: str, tier: str, *, depth: int) -> tuple[tuple[str, ...], ...]:
    """The tier's directories by depth (tier, pods, containers), as they exist now. Sorted, so plans are
    stable from round to round."""
    base = os.path.join(root, tier)
    if not os.path.isdir(base):
        return ()
    levels: list[tuple[str, ...]] = [(tier,)]
    current = [tier]
    for _ in range(depth):
        below: list[str] = []
        for rel in current:
            try:
                with os.scandir(os.path.join(root, rel)) as entries:
                    below.extend(f"{rel}/{e.name}" for e in entries if e.is_dir(follow_symlinks=False))
            except OSError:
                continue
        if not below:
            break
        below.sort()
        levels.append(tuple(below))
        current = below
    return tuple(levels)
