"""What the hooks want for one pod, kept between passes: the pod's cgroup names, each target's decision,
the writes that carry it, their cache keys and a shares canary.

Hooks are pure functions of (request, snapshot), so a pod's plan stays valid while the store snapshot it was
made from is current and its target is the same: a pass over a quiet node makes no decision at all. Every
memo is keyed by pod UID and dropped with `forget`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from hookserver.cgroupmath import shares_to_weight
from hookserver.dispatch import DispatchResult, HookDispatcher
from hookserver.errors import SystemFileError
from hookserver.executor.layout import CgroupLayout
from hookserver.executor.plan import CgroupWrite, pod_level_writes, writes_for_resources
from hookserver.hooks.context import ContainerRequest, PodRequest, RequestSource
from hookserver.hooks.stages import Stage
from hookserver.reconciler.targets import PodTarget, pod_target, sandbox_dir_of
from hookserver.resources import Resources
from hookserver.store.records import ContainerRecord, PodRecord
from hookserver.store.state import StoreSnapshot
from hookserver.system.cgroupnames import normalize_cgroup_dir
from hookserver.system.files import read_text, subdirs

__all__ = ["CONTAINER_STAGE", "POD_STAGE", "Decided", "Entry", "PlanBook", "PodPlan", "read_canary"]

POD_STAGE = Stage.PRE_RUN_POD_SANDBOX
CONTAINER_STAGE = Stage.PRE_UPDATE_CONTAINER_RESOURCES

CacheKey = tuple[str, str, str]


class _Keys(Protocol):
    def cache_keys(self, writes: Sequence[CgroupWrite]) -> tuple[CacheKey, ...]: ...


@dataclass(slots=True)
class Decided:
    """The last decision for one target (a pod, or one of its containers) and the writes that carry it.

    `canary` is the target's shares file and the text it should hold: read every pass even while the cache
    vouches for the values, so a cgroup reset to kubelet's values (shares 2) is caught within one interval,
    not only when the 60 s forced rewrite comes round."""

    resources: Resources
    writes: tuple[CgroupWrite, ...]
    keys: tuple[CacheKey, ...]
    canary: tuple[str, str] | None
    audited: bool = False  # False: audit this decision at the next pass even if it writes nothing
    cgroup_dir: str = ""  # the target's own cgroup
    sandbox_dir: str = ""  # where a pod-level cpuset (the sandbox's) went; "" while the sandbox is not named


@dataclass(frozen=True, slots=True)
class Entry:
    """One target of a pod plan: the pod level (`container` "") or one container."""

    container: str
    cgroup_dir: str
    decided: DispatchResult
    memo: Decided | None  # None: nothing to write (skipped, not applied, or the hook failed)


@dataclass(frozen=True, slots=True)
class PodPlan:
    version: int  # of the store snapshot the decisions were made from
    target: PodTarget
    request: PodRequest
    entries: tuple[Entry, ...]  # the pod level first

    @property
    def canary(self) -> tuple[str, str] | None:
        memo = self.entries[0].memo if self.entries else None
        return memo.canary if memo is not None else None


class PlanBook:
    def __init__(
        self,
        *,
        dispatcher: HookDispatcher,
        executor: _Keys,
        layout: CgroupLayout,
        exists: Callable[[str], bool],
    ) -> None:
        self._dispatcher = dispatcher
        self._executor = executor
        self._layout = layout
        self._exists = exists
        self._cpu_root = layout.hierarchy_root("cpu")
        self._targets: dict[str, tuple[PodRecord, tuple[ContainerRecord, ...], PodTarget]] = {}
        self._requests: dict[str, tuple[PodRecord, str, PodRequest]] = {}
        self._decided: dict[str, dict[str, Decided]] = {}
        self._plans: dict[str, PodPlan] = {}
        self._sandboxes: dict[str, tuple[PodTarget, str]] = {}  # uid -> (target, its sandbox's cgroup or "")
        self._cpuset_root = layout.hierarchy_root("cpuset")

    def target(self, pod: PodRecord, containers: tuple[ContainerRecord, ...]) -> PodTarget | None:
        """The pod's cgroup names, kept while its record and container records are the same objects.
        Raises HookServerError (PathEscapeError) for a name that is not a safe path."""
        memo = self._targets.get(pod.uid)
        if memo is not None and memo[0] is pod and memo[1] == containers:
            return memo[2]
        target = pod_target(pod, containers, self._layout, probe=self._exists)
        if target is not None:
            self._targets[pod.uid] = (pod, containers, target)
        return target

    def last(self, uid: str) -> PodPlan | None:
        return self._plans.get(uid)

    def plan(self, target: PodTarget, snap: StoreSnapshot) -> PodPlan:
        """The pod's plan for this snapshot: the last one while still valid, else decided now."""
        pod = target.pod
        plan = self._plans.get(pod.uid)
        if plan is not None and plan.version == snap.version and plan.target is target:
            return plan
        request = self._request(pod, target.cgroup_dir)
        decided = self._dispatcher.decide_pod(POD_STAGE, request, snap)
        sandbox = self._sandbox_dir(target) if decided.resources.cpuset_cpus else ""
        entries = [self._entry(pod.uid, "", target.cgroup_dir, decided, sandbox)]
        for c in target.containers:
            creq = ContainerRequest(
                pod=request, name=c.name, container_id=c.id, cgroup_parent=target.cgroup_dir,
                source=RequestSource.RECONCILER,
            )
            decided = self._dispatcher.decide_container(CONTAINER_STAGE, creq, snap)
            entries.append(self._entry(pod.uid, c.name, c.cgroup_dir, decided))
        plan = self._plans[pod.uid] = PodPlan(snap.version, target, request, tuple(entries))
        return plan

    def forget(self, uid: str) -> None:
        self._targets.pop(uid, None)
        self._requests.pop(uid, None)
        self._decided.pop(uid, None)
        self._plans.pop(uid, None)
        self._sandboxes.pop(uid, None)

    def counts(self) -> dict[str, int]:
        return {"plans_cached": len(self._plans), "targets_cached": sum(len(d) for d in self._decided.values())}

    # -- internals -------------------------------------------------------------------------------
    def _request(self, pod: PodRecord, cgroup_dir: str) -> PodRequest:
        memo = self._requests.get(pod.uid)
        if memo is not None and memo[0] is pod and memo[1] == cgroup_dir:
            return memo[2]
        request = PodRequest(
            namespace=pod.namespace, name=pod.name, uid=pod.uid, labels=pod.labels, annotations=pod.annotations,
            cgroup_parent=cgroup_dir, sandbox_id=pod.sandbox_id, runtime_handler=pod.runtime_class,
            source=RequestSource.RECONCILER,
        )
        self._requests[pod.uid] = (pod, cgroup_dir, request)
        return request

    def _sandbox_dir(self, target: PodTarget) -> str:
        """The pod's sandbox cgroup, looked for once per target (a new container makes a new target, so a
        sandbox not named yet is looked for again then)."""
        memo = self._sandboxes.get(target.pod.uid)
        if memo is not None and memo[0] is target:
            return memo[1]
        root = self._cpuset_root
        found = sandbox_dir_of(target, self._layout, lambda rel: subdirs(os.path.join(root, normalize_cgroup_dir(rel))))
        self._sandboxes[target.pod.uid] = (target, found)
        return found

    def _entry(
        self, uid: str, container: str, cgroup_dir: str, decided: DispatchResult, sandbox_dir: str = ""
    ) -> Entry:
        if decided.result != "ok" or decided.outcome is None or decided.resources.is_empty():
            return Entry(container, cgroup_dir, decided, None)
        resources = decided.resources
        book = self._decided.setdefault(uid, {})
        memo = book.get(container)
        if (
            memo is None
            or (memo.resources is not resources and memo.resources != resources)
            or memo.cgroup_dir != cgroup_dir
            or memo.sandbox_dir != sandbox_dir
        ):
            writes = tuple(_writes(cgroup_dir, decided, sandbox_dir if not container else None))
            if not writes:  # a pod-level cpuset alone, for a sandbox not named yet
                book.pop(container, None)
                return Entry(container, cgroup_dir, decided, None)
            # A first decision is audited only if it corrects a file (a pod whose hooks ran is already
            # right: its proxy or NRI decision stays the one `hookctl explain` shows); a changed one always.
            memo = book[container] = Decided(
                resources, writes, self._executor.cache_keys(writes), self._canary(cgroup_dir, resources),
                audited=memo is None, cgroup_dir=cgroup_dir, sandbox_dir=sandbox_dir,
            )
        return Entry(container, cgroup_dir, decided, memo)

    def _canary(self, cgroup_dir: str, resources: Resources) -> tuple[str, str] | None:
        shares = resources.cpu_shares
        if shares is None:
            return None
        rel = normalize_cgroup_dir(cgroup_dir)
        if self._layout.writes_v2:
            return os.path.join(self._cpu_root, rel, "cpu.weight"), str(shares_to_weight(shares))
        return os.path.join(self._cpu_root, rel, "cpu.shares"), str(shares)


def _writes(cgroup_dir: str, decided: DispatchResult, sandbox_dir: str | None) -> list[CgroupWrite]:
    """A container's writes (`sandbox_dir` None), or the pod level's: its cpuset is the sandbox's."""
    outcome = decided.outcome
    assert outcome is not None
    applied = [o for o in outcome.outcomes if o.result is not None and o.result.applied]
    owner = ",".join(o.plugin for o in applied)
    reason = "reconciler: " + " | ".join(o.result.reason for o in applied if o.result is not None)
    if sandbox_dir is None:
        return writes_for_resources(cgroup_dir, decided.resources, owner=owner, reason=reason)
    return pod_level_writes(cgroup_dir, decided.resources, sandbox_dir=sandbox_dir, owner=owner, reason=reason)


def read_canary(path: str) -> str | None:
    """The canary file's text; None when it (its cgroup) is gone; "" when unreadable (the executor's
    read-before-write then reports why)."""
    try:
        text = read_text(path)
    except SystemFileError:
        return ""
    return None if text is None else text.strip()
