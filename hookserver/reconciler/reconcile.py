"""One reconciler pass: what the hooks want for each running pod, written as one leveled, cached batch.

For every pod (or the pods a sync named): name its cgroups, ask the dispatcher for the pod-level values
(PreRunPodSandbox) and each started container's (PreUpdateContainerResources), the same hooks and formula
the proxy and NRI use, so the reconciler never fights a front door (`plans`). Writes the executor's cache says
were made or verified within the force-update window are dropped before planning (a memory lookup, no I/O),
unless the target's shares canary shows a reset; the rest go out as one leveled plan, pods above containers,
so parents stay >= children while limits move. Read-before-write tells a correction (the file held something
else) from a no-op.

Full passes also write what the hooks want for the NodeSLO's host applications (`host_apps`).

Quietly skipped: a pod whose cgroup is not there (yet or any more), a container whose cgroup is not there,
a pod being created right now (its hooks own it), finished pods and kata pods (koordlet's filter). Full
passes also collect pods whose cgroup stayed gone for the grace period (see `podgc`).

Not thread-safe: the `Reconciler` loop runs one pass at a time in one worker thread.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from hookserver.aio.hotgate import pause, paced
from hookserver.reconciler.settings import ReconcilerSettings
from hookserver.dispatch import HookDispatcher
from hookserver.errors import HookServerError, PathEscapeError
from hookserver.executor.layout import CgroupLayout
from hookserver.executor.plan import ApplyReport, CgroupWrite, ResourcePlan, WriteResult
from hookserver.hooks.context import PodRequest
from hookserver.hooks.outcome import StageOutcome
from hookserver.reconciler.host_apps import host_app_writes
from hookserver.reconciler.metrics import ReconcilerMetrics
from hookserver.reconciler.plans import Decided, PlanBook, read_canary
from hookserver.reconciler.podgc import PodCollector
from hookserver.reconciler.report import PassReport
from hookserver.reconciler.targets import PodTarget
from hookserver.store.audit import HookEventRecord
from hookserver.store.records import ContainerRecord, PodRecord
from hookserver.store.state import StateStore, StoreSnapshot
from hookserver.system.cgroupnames import KubeQoS, normalize_cgroup_dir
from hookserver.system.files import is_dir

__all__ = ["DOOR", "PodReconciler", "ReconcileExecutor"]

log = logging.getLogger(__name__)

DOOR = "reconciler"
_FINISHED_PHASES = frozenset({"Succeeded", "Failed"})


class ReconcileExecutor(Protocol):
    """What the reconciler needs of `hookserver.executor.CgroupExecutor`."""

    layout: CgroupLayout

    def apply(self, plan: ResourcePlan) -> ApplyReport: ...

    def cache_keys(self, writes: Sequence[CgroupWrite]) -> tuple[tuple[str, str, str], ...]: ...

    def unverified(
        self, writes: Sequence[CgroupWrite], keys: Sequence[tuple[str, str, str]] | None = None
    ) -> list[CgroupWrite]: ...

    def forget_writes(self, writes: Iterable[CgroupWrite]) -> None: ...

    def forget_cgroups(self, cgroup_dirs: Collection[str]) -> int: ...


@dataclass(slots=True)
class _Touch:
    """A target this pass wrote to, or whose decision is new: audited after the writes."""

    memo: Decided
    request: PodRequest
    container: str
    outcome: StageOutcome
    changed: bool


class PodReconciler:
    """Runs passes. `lists_pod` says whether an informer source still lists a pod (never collected then)."""

    def __init__(
        self,
        *,
        store: StateStore,
        dispatcher: HookDispatcher,
        executor: ReconcileExecutor,
        settings: ReconcilerSettings,
        lists_pod: Callable[[str], bool] = lambda uid: False,
        metrics: ReconcilerMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        perf_clock: Callable[[], float] = time.perf_counter,
        exists: Callable[[str], bool] | None = None,
    ) -> None:
        self.store = store
        self.dispatcher = dispatcher
        self.executor = executor
        self.layout = executor.layout
        self.settings = settings
        self.metrics = metrics
        self._clock = clock
        self._perf = perf_clock
        self._exists = exists or self._cgroup_exists
        self._cpu_root = self.layout.hierarchy_root("cpu")
        self.gc = PodCollector(grace_s=settings.gc_grace_s, lists_pod=lists_pod, clock=clock)
        self.plans = PlanBook(dispatcher=dispatcher, executor=executor, layout=self.layout, exists=self._exists)
        self._dirs: dict[str, str] = {}  # uid -> pod cgroup dir last resolved (to forget its cache on removal)
        self._by_pod: tuple[Mapping[str, ContainerRecord] | None, dict[str, tuple[ContainerRecord, ...]]] = (None, {})
        self._removed: set[str] = set()
        self._removed_lock = threading.Lock()
        self.totals: dict[str, int] = {"passes": 0, "corrections": 0, "errors": 0, "collected": 0, "written": 0}

    # -- called from any thread ------------------------------------------------------------------
    def pod_removed(self, uid: str) -> None:
        """A pod left the store (informer delete, NRI remove, GC): its memos go at the next pass."""
        with self._removed_lock:
            self._removed.add(uid)

    # -- one pass --------------------------------------------------------------------------------
    def run(self, *, uids: Collection[str] | None = None, trigger: str = "periodic") -> PassReport:
        """Reconcile every pod (`uids` None: a full pass, which also collects gone pods) or just `uids`."""
        started = self._perf()
        report = PassReport(trigger=trigger, started_at=self.store.clock())
        self._drop_removed()
        snap = self.store.snapshot()
        now = self._clock()
        by_pod = self._containers_by_pod(snap)
        if uids is None:
            pods: Iterable[PodRecord] = snap.pods.values()
        else:
            pods = [p for p in (snap.pods.get(u) for u in uids) if p is not None]
        pod_writes: list[CgroupWrite] = []
        container_writes: list[CgroupWrite] = []
        touched: list[_Touch] = []
        owners: dict[int, int] = {}  # id(write) -> index in touched
        for pod in paced(pods):  # the hot gate: step aside between pods
            report.pods += 1
            self._pod(pod, by_pod.get(pod.uid, ()), snap, now, report, pod_writes, container_writes, touched, owners)
        if uids is None:  # host applications on the full passes: the ticker and rule changes, as koordlet's
            host = self.executor.unverified(host_app_writes(self.dispatcher.decide_host_apps(snap), self.layout.driver, report))
            report.planned += len(host)
            pod_writes.extend(host)
        if pod_writes or container_writes:
            pause()  # not inside: the executor's writes hold locks the hooks take
            results = self._apply(pod_writes, container_writes, report)
            self._account(results, touched, owners, report)
        pause()
        self._audit(touched, report, started)
        if uids is None:
            pause()
            self._collect(snap, report)
        report.duration_s = self._perf() - started
        self._totals(report)
        return report

    def _pod(
        self,
        pod: PodRecord,
        containers: tuple[ContainerRecord, ...],
        snap: StoreSnapshot,
        now: float,
        report: PassReport,
        pod_writes: list[CgroupWrite],
        container_writes: list[CgroupWrite],
        touched: list[_Touch],
        owners: dict[int, int],
    ) -> None:
        try:
            target = self.plans.target(pod, containers)
        except HookServerError as exc:
            report.error(f"pod {pod.key} ({pod.uid}): cgroup not named: {exc}")
            self._count_error("target")
            self.gc.absent(pod.uid, now)  # no cgroup we could ever see: collected like a gone one
            return
        # Is the pod's cgroup there? Once planned, its shares canary answers that and feeds the drift check.
        last = self.plans.last(pod.uid)
        canary = last.canary if last is not None and last.target is target else None
        pod_held: str | None = None
        if canary is not None:
            pod_held = read_canary(canary[0])
            present = pod_held is not None
        else:
            present = target is not None and self._exists(target.cgroup_dir)
        if target is None or not present:
            self.gc.absent(pod.uid, now)
            report.skip("no_cgroup")
            return
        self.gc.present(pod.uid)
        self._dirs[pod.uid] = target.cgroup_dir
        reason = self._skip_reason(target, now)
        if reason:
            report.skip(reason)
            return
        plan = self.plans.plan(target, snap)
        report.reconciled += 1
        unverified = self.executor.unverified
        for entry in plan.entries:
            memo = entry.memo
            if memo is None:
                if entry.decided.result == "error":
                    where = f"{plan.request.key} container {entry.container}" if entry.container else plan.request.key
                    report.error(f"{where}: {entry.decided.error}")
                    self._count_error("hook")
                continue
            stale = unverified(memo.writes, memo.keys)
            if not stale and memo.canary is not None:
                same = not entry.container and canary is not None and canary[0] == memo.canary[0]
                held = pod_held if same else read_canary(memo.canary[0])
                if held is None:
                    stale = list(memo.writes)  # gone: the existence check below says so quietly
                elif held != memo.canary[1]:
                    report.drifted += 1
                    self.executor.forget_writes(memo.writes)
                    stale = list(memo.writes)
            if not stale and memo.audited:
                continue
            if stale and entry.container and not self._exists(entry.cgroup_dir):
                # not created yet, or gone: nothing to correct; its hook (or the next pass) takes care
                report.skip("container_cgroup_absent")
                continue
            assert entry.decided.outcome is not None
            touched.append(_Touch(memo, plan.request, entry.container, entry.decided.outcome, not memo.audited))
            index = len(touched) - 1
            for w in stale:
                owners[id(w)] = index
            report.planned += len(stale)
            (container_writes if entry.container else pod_writes).extend(stale)

    def _skip_reason(self, target: PodTarget, now: float) -> str:
        pod = target.pod
        if pod.runtime_class == "kata":
            return "kata"
        if pod.phase in _FINISHED_PHASES:
            return "finished"
        if not target.containers and (target.pending or pod.container_specs):
            # Containers are on their way (a hook saw them being created, or the spec lists them) but none
            # has started: the pod is being created now, its hooks own it. After the creation grace, the
            # pod level is ours (the proxy never tells a container's ID).
            if now - self._first_seen(pod) < self.settings.creation_grace_s:
                return "creating"
        return ""

    def _first_seen(self, pod: PodRecord) -> float:
        """first_seen is on the store clock (epoch); convert its age to ours."""
        return self._clock() - max(0.0, self.store.clock() - pod.first_seen)

    # -- writing ---------------------------------------------------------------------------------
    def _apply(
        self, pod_writes: list[CgroupWrite], container_writes: list[CgroupWrite], report: PassReport
    ) -> list[WriteResult]:
        """The writes, in plans of at most `_PODS_PER_PLAN` pods with a hot-gate pause between them (a pass
        after a restart writes every pod: 500 pods held the GIL for ~120 ms of CPU in one plan). Within a
        plan, pods' files before their containers' (leveled); no write depends on another pod's."""
        by_pod: dict[str, tuple[list[CgroupWrite], list[CgroupWrite]]] = {}
        for level, writes in enumerate((pod_writes, container_writes)):
            for w in writes:
                pod_dir = w.cgroup_dir if level == 0 else w.cgroup_dir.rsplit("/", 1)[0]
                by_pod.setdefault(_norm(pod_dir), ([], []))[level].append(w)
        groups = list(by_pod.items())
        results: list[WriteResult] = []
        for start in range(0, len(groups), _PODS_PER_PLAN):
            chunk = groups[start:start + _PODS_PER_PLAN]
            if start:
                pause()  # between plans, never inside one: the executor's writes hold locks the hooks take
            plan = ResourcePlan(
                levels=(tuple(w for _, (pw, _cw) in chunk for w in pw), tuple(w for _, (_pw, cw) in chunk for w in cw)),
                leveled=True, cacheable=True,
            )
            try:
                results.extend(self.executor.apply(plan).results)
                continue
            except PathEscapeError:
                pass
            # One crafted cgroup parent refuses a whole plan: retry pod by pod so the others still get fixed.
            for pod_dir, (pw, cw) in chunk:
                try:
                    results.extend(self.executor.apply(ResourcePlan(levels=(tuple(pw), tuple(cw)), leveled=True)).results)
                except PathEscapeError as exc:
                    report.error(f"cgroup {pod_dir!r} refused: {exc}")
                    self._count_error("target")
        return results

    def _account(
        self, results: list[WriteResult], touched: list[_Touch], owners: dict[int, int], report: PassReport
    ) -> None:
        corrected: set[str] = set()
        failed: set[str] = set()
        for r in results:
            index = owners.get(id(r.write))
            if not r.ok:
                if r.gone:
                    report.vanished += 1  # the cgroup went between the check and the write: quietly skipped
                elif r.path not in failed:
                    failed.add(r.path)
                    report.error(f"{r.path}={r.value}: {r.error}")
                    self._count_error("write")
                continue
            if r.skipped:
                continue
            report.written += 1
            if r.path in corrected:
                continue
            corrected.add(r.path)
            resource = r.write.resource.value
            report.corrections_by_resource[resource] = report.corrections_by_resource.get(resource, 0) + 1
            if self.metrics is not None:
                self.metrics.corrections.labels(resource, report.trigger).inc()
            if index is not None:
                touched[index].changed = True
        report.corrections = len(corrected)

    def _audit(self, touched: list[_Touch], report: PassReport, started: float) -> None:
        """Decisions go to the audit when they are new or changed, or when they corrected a file: an
        unchanged pass over a quiet node adds nothing, so the proxy's and NRI's records are not pushed out."""
        now = self.store.clock()
        pods_done: set[str] = set()
        for t in paced(touched, every=16):  # the hot gate: the audit's lock is taken per record, never held here
            if not t.changed:
                continue
            self.dispatcher.record_decisions(DOOR, t.outcome, t.request, t.container)
            t.memo.audited = True
            if t.request.uid not in pods_done:
                pods_done.add(t.request.uid)
                self.store.audit.record_event(
                    HookEventRecord(
                        ts=now, door=DOOR, rpc=f"Reconcile/{report.trigger}", pod_key=t.request.key,
                        container="", latency_s=self._perf() - started, result="ok",
                    )
                )

    # -- pods that are gone ----------------------------------------------------------------------
    def _collect(self, snap: StoreSnapshot, report: PassReport) -> None:
        uids = self.gc.due(snap.pods.keys())
        if not uids:
            return
        dirs: list[str] = []
        for uid in uids:
            pod = snap.pods.get(uid)
            dirs.extend(self._dirs_of(uid, pod))
            log.debug(
                "pod %s (%s): cgroup gone for %.0fs and no informer source lists it: forgotten",
                pod.key if pod is not None else "?", uid, self.settings.gc_grace_s,
            )
            self.store.remove_pod(uid)
            self._forget(uid)
        self.executor.forget_cgroups(dirs)
        gone = frozenset(uids)
        self.store.series.drop(lambda key: key.label("pod") in gone)
        report.collected = len(uids)
        if self.metrics is not None:
            self.metrics.pods_collected.inc(len(uids))

    def _dirs_of(self, uid: str, pod: PodRecord | None) -> list[str]:
        """Every name the pod's cgroup may have had in the executor's cache: the hook's cgroup parent,
        the directory a pass resolved, and the kubelet's name under each QoS level."""
        dirs = [d for d in (pod.cgroup_parent if pod is not None else "", self._dirs.get(uid, "")) if d]
        for qos in KubeQoS:
            try:
                dirs.append(self.layout.pod_dir(qos, uid))
            except PathEscapeError:
                break
        return dirs

    def _drop_removed(self) -> None:
        with self._removed_lock:
            removed, self._removed = self._removed, set()
        if not removed:
            return
        present = self.store.snapshot().pods
        dirs: list[str] = []
        for uid in removed:
            if uid in present:  # removed and learnt again (a restart of the same pod)
                continue
            dirs.extend(self._dirs_of(uid, None))
            self._forget(uid)
        if dirs:
            self.executor.forget_cgroups(dirs)

    def _forget(self, uid: str) -> None:
        self.plans.forget(uid)
        self._dirs.pop(uid, None)
        self.gc.forget(uid)

    # -- helpers ---------------------------------------------------------------------------------
    def _containers_by_pod(self, snap: StoreSnapshot) -> dict[str, tuple[ContainerRecord, ...]]:
        containers = snap.containers
        if self._by_pod[0] is containers:
            return self._by_pod[1]
        lists: dict[str, list[ContainerRecord]] = {}
        for c in containers.values():
            lists.setdefault(c.pod_uid, []).append(c)
        by_pod = {uid: tuple(cs) for uid, cs in lists.items()}
        self._by_pod = (containers, by_pod)
        return by_pod

    def _cgroup_exists(self, cgroup_dir: str) -> bool:
        try:
            rel = normalize_cgroup_dir(cgroup_dir)
        except PathEscapeError:
            return False
        return is_dir(os.path.join(self._cpu_root, rel) if rel else self._cpu_root)

    def _count_error(self, kind: str) -> None:
        if self.metrics is not None:
            self.metrics.errors.labels(kind).inc()

    def _totals(self, report: PassReport) -> None:
        t = self.totals
        t["passes"] += 1
        t["corrections"] += report.corrections
        t["errors"] += report.error_count
        t["collected"] += report.collected
        t["written"] += report.written
        if self.metrics is not None:
            self.metrics.passes.labels(report.trigger).inc()
            self.metrics.pass_duration.labels(report.trigger).observe(report.duration_s)

    def status(self) -> dict[str, Any]:
        return {**self.totals, "pods_awaiting_gc": len(self.gc), **self.plans.counts()}


# Pods per executor plan in a pass (`Reconciler._apply`): ~4 ms of writes between two hot-gate pauses.
_PODS_PER_PLAN = 16


def _norm(cgroup_dir: str) -> str:
    try:
        return normalize_cgroup_dir(cgroup_dir)
    except PathEscapeError:
        return cgroup_dir
