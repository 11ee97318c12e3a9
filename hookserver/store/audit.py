"""A bounded audit of hook decisions, hook calls and cgroup writes: what `hookctl` explains from.

Every hook call is recorded (invariant 4), so recording sits on the hot path and is kept cheap: the hot
path appends a plain tuple (`add_event`, `add_decisions`) to a bounded deque (an atomic append under the
GIL, no lock), and the records `hookctl` reads are built from those tuples only when someone reads them.
A call's decisions are kept as the call's hook outcomes and expanded to one `DecisionRecord` per plugin
on read, so nothing is formatted for a call nobody looks at. Readers copy the deque (atomic) and filter
outside it.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

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
class _Resources(Protocol):
    def as_dict(self) -> dict[str, int | str]: ...


class _Result(Protocol):
    """The parts of a hook result the audit reads (`hookserver.hooks.outcome.HookResult`)."""

    @property
    def resources(self) -> Any: ...
    @property
    def applied(self) -> bool: ...
    @property
    def reason(self) -> str: ...
    @property
    def inputs(self) -> Mapping[str, str]: ...
    @property
    def envs(self) -> Mapping[str, str]: ...
    @property
    def mounts(self) -> tuple[Any, ...]: ...
    @property
    def devices(self) -> tuple[Any, ...]: ...


class _Outcome(Protocol):
    """One plugin's run (`hookserver.hooks.outcome.HookOutcome`): the store stays below the hooks layer."""

    @property
    def plugin(self) -> str: ...
    @property
    def result(self) -> _Result | None: ...
    @property
    def error(self) -> str: ...


# (ts, door, stage, pod_key, pod_uid, container, outcomes): one hook call's decisions, expanded on read.
_Decisions = tuple[float, str, str, str, str, str, tuple[_Outcome, ...]]
# HookEventRecord's fields in order.
_Event = tuple[float, str, str, str, str, float, str, str]


class AuditLog:
    """`capacity` bounds each kind: events and writes per record, decisions per hook call (each call
    holds one decision per plugin that ran)."""

    def __init__(self, *, capacity: int = 4096) -> None:
        self._decisions: deque[_Decisions | DecisionRecord] = deque(maxlen=capacity)
        self._events: deque[_Event | HookEventRecord] = deque(maxlen=capacity)
        self._writes: deque[WriteRecord] = deque(maxlen=capacity)
        self._plans: deque[PlanRecord] = deque(maxlen=capacity)
        self._evictions: deque[EvictionRecord] = deque(maxlen=capacity)

    # -- the hot path: plain tuples, no lock (deque.append is atomic) --------------------------------
    def add_event(
        self, ts: float, door: str, rpc: str, pod_key: str, container: str, latency_s: float, result: str,
        error: str = "",
    ) -> None:
        """One front-door call; the same fields as `HookEventRecord`, built when read."""
        self._events.append((ts, door, rpc, pod_key, container, latency_s, result, error))

    def add_decisions(
        self, ts: float, door: str, stage: str, pod_key: str, pod_uid: str, container: str,
        outcomes: tuple[_Outcome, ...],
    ) -> None:
        """What every plugin of one call decided (or why it failed); one `DecisionRecord` each when read."""
        if outcomes:
            self._decisions.append((ts, door, stage, pod_key, pod_uid, container, outcomes))

    # -- records as such (rare paths) ---------------------------------------------------------------
    def record_decision(self, record: DecisionRecord) -> None:
        self._decisions.append(record)

    def record_event(self, record: HookEventRecord) -> None:
        self._events.append(record)

    def record_write(self, record: WriteRecord) -> None:
        self._writes.append(record)

    # -- readers ------------------------------------------------------------------------------------
    def decisions(self, *, pod_key: str = "", pod_uid: str = "", limit: int = 0) -> list[DecisionRecord]:
        raw = self._decisions.copy()
        if pod_key or pod_uid:
            raw = deque(r for r in raw if (pod_key and _pod_key(r) == pod_key) or (pod_uid and _pod_uid(r) == pod_uid))
        items = list(_expand(raw))
        return items[-limit:] if limit else items

    def decisions_of(self, plugin: str, *, since: float = 0.0, reason_contains: str = "") -> list[DecisionRecord]:
        """`plugin`'s decisions recorded after `since` whose reason contains `reason_contains`, oldest first; the
        other entries are skipped before a record is built (a background reader scans the whole ring)."""
        out: list[DecisionRecord] = []
        for entry in self._decisions.copy():
            if isinstance(entry, DecisionRecord):
                if entry.ts > since and entry.plugin == plugin and reason_contains in entry.reason:
                    out.append(entry)
                continue
            if entry[0] <= since:
                continue
            for o in entry[6]:
                res = o.result
                if o.plugin == plugin and res is not None and reason_contains in res.reason:
                    out.extend(r for r in _expand((entry,)) if r.plugin == plugin)
                    break
        return out

    def events(self, *, limit: int = 0) -> list[HookEventRecord]:
        raw = list(self._events.copy())
        if limit:
            raw = raw[-limit:]
        return [r if isinstance(r, HookEventRecord) else HookEventRecord(*r) for r in raw]

    def writes(self, *, path_contains: str = "", limit: int = 0) -> list[WriteRecord]:
        items = list(self._writes.copy())
        if path_contains:
            items = [w for w in items if path_contains in w.path]
        return items[-limit:] if limit else items

    def record_plan(self, record: PlanRecord) -> None:
        self._plans.append(record)

    def record_eviction(self, record: EvictionRecord) -> None:
        self._evictions.append(record)

    def plans(self, *, reconciler: str = "", limit: int = 0) -> list[PlanRecord]:
        items = list(self._plans.copy())
        if reconciler:
            items = [p for p in items if p.reconciler == reconciler]
        return items[-limit:] if limit else items

    def evictions(self, *, since: float = 0.0, reconciler: str = "", limit: int = 0) -> list[EvictionRecord]:
        items = list(self._evictions.copy())
        items = [e for e in items if e.ts >= since and (not reconciler or e.reconciler == reconciler)]
        return items[-limit:] if limit else items


_NO_VALUES: Mapping[str, int | str] = MappingProxyType({})


def _pod_key(entry: _Decisions | DecisionRecord) -> str:
    return entry.pod_key if isinstance(entry, DecisionRecord) else entry[3]


def _pod_uid(entry: _Decisions | DecisionRecord) -> str:
    return entry.pod_uid if isinstance(entry, DecisionRecord) else entry[4]


def _expand(raw: Iterable[_Decisions | DecisionRecord]) -> Iterable[DecisionRecord]:
    for entry in raw:
        if isinstance(entry, DecisionRecord):
            yield entry
            continue
        ts, door, stage, pod_key, pod_uid, container, outcomes = entry
        for o in outcomes:
            res = o.result
            yield DecisionRecord(
                ts=ts, door=door, stage=stage, pod_key=pod_key, pod_uid=pod_uid, container=container,
                plugin=o.plugin, applied=bool(res is not None and res.applied),
                values=_result_values(res) if res is not None else _NO_VALUES,
                reason=res.reason if res is not None else "", inputs=res.inputs if res is not None else _EMPTY,
                error=o.error,
            )


def _result_values(res: _Result) -> Mapping[str, int | str]:
    """The resources' values, plus what a hook injects into a new container (GPU/RDMA hooks): each env as
    `env:<NAME>`, each mount as `mount:<destination>` (`<source> (<type>, <options>)`), each device as
    `device:<path>` (`<type> <major>:<minor> <mode>`), so `hookctl explain` shows what was injected; the
    result's reason and inputs say where it came from."""
    base = _values_of(res.resources)
    envs, mounts, devices = res.envs, res.mounts, res.devices
    if not envs and not mounts and not devices:
        return base
    out: dict[str, int | str] = dict(base)
    for key in sorted(envs):
        out[f"env:{key}"] = envs[key]
    for m in mounts:
        out[f"mount:{m.destination}"] = f"{m.source} ({m.type}, {','.join(m.options)})"
    for d in devices:
        mode = "" if d.file_mode is None else f" {d.file_mode:04o}"
        out[f"device:{d.path}"] = f"{d.type} {d.major}:{d.minor}{mode}"
    return MappingProxyType(out)


@functools.lru_cache(maxsize=1024)
def _values_of(resources: _Resources) -> Mapping[str, int | str]:
    """The audit's view of a (frozen, memoized) hook value: computed once per distinct value."""
    return MappingProxyType(resources.as_dict())
