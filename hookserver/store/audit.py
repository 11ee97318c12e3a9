"""A bounded audit of hook decisions, hook calls and cgroup writes: what `hookctl` explains from.

Appends are O(1) under a short lock; readers copy the deque under the lock and filter outside it.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["AuditLog", "DecisionRecord", "EvictionRecord", "HookEventRecord", "PlanRecord", "WriteRecord"]

_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class DecisionRecord:
    """What one plugin decided for one pod or container, from which inputs, and why."""

    ts: float
    door: str
    stage: str
    pod_key: str
    pod_uid: str
    container: str
    plugin: str
    applied: bool
    values: Mapping[str, int | str] = field(default_factory=lambda: MappingProxyType({}))
    reason: str = ""
    inputs: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    error: str = ""


@dataclass(frozen=True, slots=True)
class HookEventRecord:
    """One call through a front door: rpc, latency and result (ok, skipped, error, rejected)."""

    ts: float
    door: str
    rpc: str
    pod_key: str
    container: str
    latency_s: float
    result: str
    error: str = ""


@dataclass(frozen=True, slots=True)
class WriteRecord:
    """One cgroup (or sysctl) write attempt by the executor."""

    ts: float
    path: str
    value: str
    ok: bool
    owner: str = ""
    reason: str = ""
    previous: str = ""
    skipped: bool = False
    error: str = ""


@dataclass(frozen=True, slots=True)
class PlanRecord:
    """One QoS reconciler round: what it planned and why (`plan` is the plan's JSON-able description),
    whether it was carried out (`mode`: "applied", "dry_run", "replay") and what failed."""

    ts: float
    reconciler: str
    mode: str
    summary: str
    plan: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    duration_s: float = 0.0
    error: str = ""


@dataclass(frozen=True, slots=True)
class EvictionRecord:
    """One eviction a reconciler asked for and what came of it (status as `hookserver.eviction`)."""

    ts: float
    reconciler: str
    pod_key: str
    pod_uid: str
    reason: str
    message: str
    status: str
    backend: str = ""
    detail: str = ""
    error: str = ""


class AuditLog:
    def __init__(self, *, capacity: int = 4096) -> None:
        self._lock = threading.Lock()
        self._decisions: deque[DecisionRecord] = deque(maxlen=capacity)
        self._events: deque[HookEventRecord] = deque(maxlen=capacity)
        self._writes: deque[WriteRecord] = deque(maxlen=capacity)
        self._plans: deque[PlanRecord] = deque(maxlen=capacity)
        self._evictions: deque[EvictionRecord] = deque(maxlen=capacity)

    def record_decision(self, record: DecisionRecord) -> None:
        with self._lock:
            self._decisions.append(record)

    def record_event(self, record: HookEventRecord) -> None:
        with self._lock:
            self._events.append(record)

    def record_write(self, record: WriteRecord) -> None:
        with self._lock:
            self._writes.append(record)

    def decisions(self, *, pod_key: str = "", pod_uid: str = "", limit: int = 0) -> list[DecisionRecord]:
        with self._lock:
            items = list(self._decisions)
        if pod_key or pod_uid:
            items = [d for d in items if (pod_key and d.pod_key == pod_key) or (pod_uid and d.pod_uid == pod_uid)]
        return items[-limit:] if limit else items

    def events(self, *, limit: int = 0) -> list[HookEventRecord]:
        with self._lock:
            items = list(self._events)
        return items[-limit:] if limit else items

    def writes(self, *, path_contains: str = "", limit: int = 0) -> list[WriteRecord]:
        with self._lock:
            items = list(self._writes)
        if path_contains:
            items = [w for w in items if path_contains in w.path]
        return items[-limit:] if limit else items

    def record_plan(self, record: PlanRecord) -> None:
        with self._lock:
            self._plans.append(record)

    def record_eviction(self, record: EvictionRecord) -> None:
        with self._lock:
            self._evictions.append(record)

    def plans(self, *, reconciler: str = "", limit: int = 0) -> list[PlanRecord]:
        with self._lock:
            items = list(self._plans)
        if reconciler:
            items = [p for p in items if p.reconciler == reconciler]
        return items[-limit:] if limit else items

    def evictions(self, *, since: float = 0.0, reconciler: str = "", limit: int = 0) -> list[EvictionRecord]:
        with self._lock:
            items = list(self._evictions)
        items = [e for e in items if e.ts >= since and (not reconciler or e.reconciler == reconciler)]
        return items[-limit:] if limit else items
