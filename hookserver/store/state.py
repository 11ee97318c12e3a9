"""The one state store every module meets in.

Writers mutate plain dicts under a short lock and bump a version; `snapshot()` hands out an immutable
view, rebuilt only when the version moved. So a hook reads the pod set without waiting on a writer and
without copying on every call, and no lock is ever held across I/O or an await.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from hookserver.store.audit import AuditLog
from hookserver.store.changes import (
    CHANGE_FIELDS as CHANGE_KINDS_ALL,
    PodChange,
    PodListener,
    merge_pod_records,
    pod_changed_fields,
)
from hookserver.store.records import PENDING_PREFIX, ContainerRecord, NodeRecord, PodRecord
from hookserver.store.timeseries import TimeSeriesStore

__all__ = ["StateStore", "StoreSnapshot"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StoreSnapshot:
    version: int
    taken_at: float
    pods: Mapping[str, PodRecord]
    pods_by_key: Mapping[str, PodRecord]
    pods_by_sandbox: Mapping[str, PodRecord]
    containers: Mapping[str, ContainerRecord]
    node: NodeRecord | None = None
    node_slo: Any = None
    node_slo_sources: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    stale: bool = False
    node_metric: Any = None
    # The node's effective colocation-config (hookserver.slo.ResolvedColocation), None until the informer
    # has published one; the capacity publisher and the NodeMetric keeper read it.
    colocation: Any = None

    def pod_by_key(self, namespace: str, name: str) -> PodRecord | None:
        return self.pods_by_key.get(f"{namespace}/{name}")

    def containers_of(self, pod_uid: str) -> list[ContainerRecord]:
        return [c for c in self.containers.values() if c.pod_uid == pod_uid]


class StateStore:
    """Pods, containers, node and NodeSLO, plus the audit. Thread-safe; snapshots are immutable."""

    def __init__(self, *, clock: Callable[[], float] = time.time, audit_capacity: int = 4096) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._version = 0
        self._pods: dict[str, PodRecord] = {}
        # The snapshot's two pod indexes, kept as pods change rather than rebuilt per snapshot: a rebuild formatted
        # every pod's key, O(pods) Python work on every snapshot after a pod change, 0.25 ms at 500 pods, and
        # a RunPodSandbox both changes a pod and reads a snapshot. Each holds what `{p.key: p for p in pods}`
        # (and the same by sandbox id) would: the last pod in the map's order wins a shared key.
        self._by_key: dict[str, PodRecord] = {}
        self._by_sandbox: dict[str, PodRecord] = {}
        self._containers: dict[str, ContainerRecord] = {}
        self._pending_containers = 0  # how many keys of _containers start with PENDING_PREFIX
        self._node: NodeRecord | None = None
        self._node_slo: Any = None
        self._node_slo_sources: dict[str, str] = {}
        self._stale = False
        self._node_metric: Any = None
        self._colocation: Any = None
        self._pod_listeners: tuple[PodListener, ...] = ()
        self._snapshot: StoreSnapshot | None = None
        self._containers_base: StoreSnapshot | None = None  # see _bump_containers
        self.audit = AuditLog(capacity=audit_capacity)
        # Measured samples (collectors): bounded rings, retention set by build_collectors (issue 5).
        self.series = TimeSeriesStore(clock=clock)

    @property
    def clock(self) -> Callable[[], float]:
        return self._clock

    # -- writers ---------------------------------------------------------------------------------
    def upsert_pod(self, record: PodRecord) -> PodRecord | None:
        """Insert or replace by UID; keeps `first_seen` of an existing record. Returns the old record."""
        with self._lock:
            old = self._pods.get(record.uid)
            if old is not None and old.first_seen and record.first_seen != old.first_seen:
                record = _replace(record, first_seen=old.first_seen)
            elif not record.first_seen:
                record = _replace(record, first_seen=self._clock())
            self._pods[record.uid] = record
            self._index_pod(old, record)
            self._bump()
        self._notify_pod(old, record)
        return old

    def merge_pod(self, record: PodRecord, *, authoritative: frozenset[str] = frozenset()) -> PodRecord:
        """Upsert `record` merged over the stored copy (see `merge_pod_records`). Returns what is stored.

        The read-modify-write happens under the lock, so two sources racing on one pod never lose a field.
        """
        with self._lock:
            old = self._pods.get(record.uid)
            merged = merge_pod_records(old, record, authoritative=authoritative)
            if old is not None and old.first_seen:
                merged = _replace(merged, first_seen=old.first_seen)
            elif not merged.first_seen:
                merged = _replace(merged, first_seen=self._clock())
            self._pods[record.uid] = merged
            self._index_pod(old, merged)
            self._bump()
        self._notify_pod(old, merged)
        return merged

    def remove_pod(self, uid: str) -> PodRecord | None:
        with self._lock:
            old = self._pods.pop(uid, None)
            if old is not None:
                self._index_pod(old, None)
                for cid in [c.id for c in self._containers.values() if c.pod_uid == uid]:
                    del self._containers[cid]
                    if cid.startswith(PENDING_PREFIX):
                        self._pending_containers -= 1
                self._bump()
        if old is not None:
            self._notify_pod(old, None)
        return old

    def subscribe_pods(self, listener: PodListener) -> Callable[[], None]:
        """Call `listener` on pod adds, deletes and updates that change resources, QoS, priority,
        hook-relevant annotations or phase. Returns the unsubscribe function."""
        with self._lock:
            self._pod_listeners = (*self._pod_listeners, listener)

        def unsubscribe() -> None:
            with self._lock:
                self._pod_listeners = tuple(x for x in self._pod_listeners if x is not listener)

        return unsubscribe

    def _notify_pod(self, old: PodRecord | None, new: PodRecord | None) -> None:
        listeners = self._pod_listeners
        if not listeners:
            return
        if old is None and new is not None:
            change = PodChange("added", new.uid, None, new, frozenset(CHANGE_KINDS_ALL))
        elif new is None and old is not None:
            change = PodChange("deleted", old.uid, old, None, frozenset(CHANGE_KINDS_ALL))
        elif old is not None and new is not None:
            changed = pod_changed_fields(old, new)
            if not changed:
                return
            change = PodChange("updated", new.uid, old, new, changed)
        else:
            return
        for listener in listeners:
            try:
                listener(change)
            except Exception:  # noqa: BLE001 - a listener's bug must not fail the writer (informer, hook)
                _log.exception("pod listener %r failed on %s %s", listener, change.kind, change.uid)

    def upsert_container(self, record: ContainerRecord) -> ContainerRecord | None:
        with self._lock:
            old = self._containers.get(record.id)
            self._containers[record.id] = record
            if old is None and record.id.startswith(PENDING_PREFIX):
                self._pending_containers += 1
            self._bump_containers()
            return old

    def remove_container(self, container_id: str) -> ContainerRecord | None:
        with self._lock:
            old = self._containers.pop(container_id, None)
            if old is not None:
                if container_id.startswith(PENDING_PREFIX):
                    self._pending_containers -= 1
                self._bump_containers()
            return old

    @property
    def pending_containers(self) -> int:
        """How many containers are filed under a pending key (`records.pending_container_id`). A door
        whose containers always carry an ID (NRI) checks this before looking one up by name."""
        return self._pending_containers

    def set_node(self, node: NodeRecord | None) -> None:
        with self._lock:
            self._node = node
            self._bump()

    def set_node_slo(self, slo: Any, sources: Mapping[str, str] | None = None) -> None:
        """The effective, merged NodeSLO and, per top-level part, where it came from."""
        with self._lock:
            self._node_slo = slo
            self._node_slo_sources = dict(sources or {})
            self._bump()

    def set_node_metric(self, spec: Any) -> None:
        """The NodeMetric spec (reporting cadence) from the informer; None when there is none."""
        with self._lock:
            self._node_metric = spec
            self._bump()

    def set_colocation(self, resolved: Any) -> None:
        """The node's effective colocation-config, resolved for its labels and annotations (informer)."""
        with self._lock:
            self._colocation = resolved
            self._bump()

    def set_stale(self, stale: bool) -> None:
        with self._lock:
            if self._stale != stale:
                self._stale = stale
                self._bump()

    def _bump(self) -> None:
        self._version += 1
        self._snapshot = None
        self._containers_base = None

    def _bump_containers(self) -> None:
        """Only containers changed: the next snapshot reuses the last one's pod maps (every hook call
        records its container, and rebuilding the pod indexes each time made snapshots O(pods) per call)."""
        self._version += 1
        if self._snapshot is not None:
            self._containers_base = self._snapshot
        self._snapshot = None

    def _index_pod(self, old: PodRecord | None, new: PodRecord | None) -> None:
        """Bring the two pod indexes up to date after `old` became `new` in `_pods` (under the lock)."""
        for index, field in ((self._by_key, "key"), (self._by_sandbox, "sandbox_id")):
            old_value: str = getattr(old, field) if old is not None else ""
            new_value: str = getattr(new, field) if new is not None else ""
            if old is not None and old_value and old_value != new_value:
                held = index.get(old_value)
                if held is not None and held.uid == old.uid:
                    self._reindex(index, field, old_value)
            if new is not None and new_value:
                held = index.get(new_value)
                if held is None or held.uid == new.uid:
                    index[new_value] = new  # the only one with this value, or already the last of them
                else:
                    self._reindex(index, field, new_value)  # shared with another pod: the map's order decides

    def _reindex(self, index: dict[str, PodRecord], field: str, value: str) -> None:
        """The entry for `value` as a full rebuild would make it (rare: pods sharing a key or a sandbox id)."""
        winner = None
        for pod in self._pods.values():
            if getattr(pod, field) == value:
                winner = pod
        if winner is None:
            index.pop(value, None)
        else:
            index[value] = winner

    # -- readers ---------------------------------------------------------------------------------
    def snapshot(self) -> StoreSnapshot:
        snap = self._snapshot
        if snap is not None:
            return snap
        with self._lock:
            if self._snapshot is not None:
                return self._snapshot
            base = self._containers_base
            if base is not None:
                # Only containers changed since `base`: anything derived from containers must be rebuilt here.
                snap = replace(
                    base, version=self._version, taken_at=self._clock(),
                    containers=MappingProxyType(dict(self._containers)),
                )
                self._snapshot = snap
                return snap
            pods = dict(self._pods)
            snap = StoreSnapshot(
                version=self._version,
                taken_at=self._clock(),
                pods=MappingProxyType(pods),
                pods_by_key=MappingProxyType(dict(self._by_key)),
                pods_by_sandbox=MappingProxyType(dict(self._by_sandbox)),
                containers=MappingProxyType(dict(self._containers)),
                node=self._node,
                node_slo=self._node_slo,
                node_slo_sources=MappingProxyType(dict(self._node_slo_sources)),
                stale=self._stale,
                node_metric=self._node_metric,
                colocation=self._colocation,
            )
            self._snapshot = snap
            return snap

    def pods_snapshot(self) -> StoreSnapshot:
        """A snapshot whose pods, node and NodeSLO are current; its `containers` may be older.

        For the hook hot path: every hook call records its container, and a full `snapshot()` after
        that copies the container map (O(containers) per call). Readers that need pods, the node and
        NodeSLO (the hooks' view) take this one, which skips that copy when only containers changed.
        """
        snap = self._snapshot or self._containers_base
        return snap if snap is not None else self.snapshot()

    def container(self, container_id: str) -> ContainerRecord | None:
        """The current record of one container (no snapshot)."""
        return self._containers.get(container_id)

    @property
    def version(self) -> int:
        return self._version


def _replace(record: PodRecord, **changes: Any) -> PodRecord:
    return replace(record, **changes)
