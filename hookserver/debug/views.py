"""What `status`, `pods`, `explain`, `events` and `writes` show, built from the store alone.

Pure functions from a `StateStore` to JSON-ready rows and objects: the server only encodes them, and
tests can call them without a socket. Rows are flat (scalars only) so hookctl can print them as a
table; `explain` is nested because one pod has several stages, containers and hooks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from hookserver.debug.cpu_sources import core_sched_source, cpu_sources
from hookserver.debug.encoding import format_age, format_ts
from hookserver.errors import InputError
from hookserver.store.audit import DecisionRecord, EvictionRecord, HookEventRecord, WriteRecord
from hookserver.store.records import ContainerRecord, PodRecord
from hookserver.store.specs import container_spec
from hookserver.store.state import StateStore

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "NotFoundError",
    "event_row",
    "eviction_row",
    "events_view",
    "explain_view",
    "pods_view",
    "status_view",
    "write_row",
    "writes_view",
]

DEFAULT_LIMIT = 50
MAX_LIMIT = 100_000
_EXPLAIN_EVENTS = 20
_FAILED_EVENT_RESULTS = frozenset({"error", "rejected"})


class NotFoundError(InputError):
    """The request was well formed but names nothing the store holds (gRPC NOT_FOUND)."""


def _limit(requested: int) -> int:
    if requested <= 0:
        return DEFAULT_LIMIT
    return min(requested, MAX_LIMIT)


def status_view(store: StateStore) -> dict[str, Any]:
    """Store-side status; the server adds the process info (version, uptime, doors) on top."""
    snap = store.snapshot()
    events = store.audit.events()
    writes = store.audit.writes()
    last = events[-1] if events else None
    return {
        "node": snap.node.name if snap.node is not None else "",
        "pods": len(snap.pods),
        "containers": len(snap.containers),
        "store_version": snap.version,
        "store_stale": snap.stale,
        "node_slo": "set" if snap.node_slo is not None else "default",
        "recent_hook_calls": len(events),
        "recent_hook_failures": sum(1 for e in events if e.result in _FAILED_EVENT_RESULTS),
        "last_hook_call": format_ts(last.ts) if last else "",
        "recent_decisions": len(store.audit.decisions()),
        "recent_writes": len(writes),
        "recent_write_failures": sum(1 for w in writes if not w.ok),
    }


def pods_view(store: StateStore) -> list[dict[str, Any]]:
    snap = store.snapshot()
    now = store.clock()
    # Container names by pod: the ones hooks and NRI told of, and the started ones the pod's statuses list
    # (a pod whose hooks never ran here), as `explain` lists them.
    names: dict[str, set[str]] = {}
    for c in snap.containers.values():
        names.setdefault(c.pod_uid, set()).add(c.name)
    for pod in snap.pods.values():
        if pod.container_ids:
            names.setdefault(pod.uid, set()).update(pod.container_ids)
    return [
        {
            "pod": pod.key,
            "uid": pod.uid,
            "qos": pod.qos_class,
            "source": pod.source,
            "sandbox": pod.sandbox_id,
            "containers": len(names.get(pod.uid, ())),
            "age": format_age(now - pod.first_seen) if pod.first_seen else "",
        }
        for pod in sorted(snap.pods.values(), key=lambda p: p.key)
    ]


def event_row(event: HookEventRecord) -> dict[str, Any]:
    return {
        "time": format_ts(event.ts),
        "door": event.door,
        "rpc": event.rpc,
        "pod": event.pod_key,
        "container": event.container,
        "latency_ms": round(event.latency_s * 1000, 3),
        "result": event.result,
        "error": event.error,
        "detail": "",
    }


def eviction_row(record: EvictionRecord) -> dict[str, Any]:
    """An eviction (API eviction, standalone kill, report or dry run) as an event row: the operator asking
    "who killed my pod, when, on which numbers" finds it beside the hook calls. `detail` carries koordlet's
    reason and the reconciler's sentence with the numbers."""
    return {
        "time": format_ts(record.ts),
        "door": "qos",
        "rpc": f"evict/{record.backend or '-'}",
        "pod": record.pod_key,
        "container": "",
        "latency_ms": None,
        "result": record.status,
        "error": record.error,
        "detail": "; ".join(x for x in (f"{record.reconciler}: {record.reason}", record.message, record.detail) if x),
    }


def events_view(store: StateStore, *, limit: int = 0) -> list[dict[str, Any]]:
    """Hook calls and evictions, oldest first, the newest `limit` of them."""
    n = _limit(limit)
    rows = [(e.ts, event_row(e)) for e in store.audit.events(limit=n)]
    rows += [(r.ts, eviction_row(r)) for r in store.audit.evictions(limit=n)]
    rows.sort(key=lambda pair: pair[0])  # stable: same-time rows keep hook calls first
    return [row for _ts, row in rows[-n:]]


def write_row(write: WriteRecord) -> dict[str, Any]:
    return {
        "time": format_ts(write.ts),
        "path": write.path,
        "value": write.value,
        "result": "skipped" if write.skipped else ("ok" if write.ok else "error"),
        "owner": write.owner,
        "reason": write.reason,
        "error": write.error,
        "previous": write.previous,
    }


def writes_view(store: StateStore, *, limit: int = 0, path_contains: str = "") -> list[dict[str, Any]]:
    return [write_row(w) for w in store.audit.writes(path_contains=path_contains, limit=_limit(limit))]


def _pod_section(pod: PodRecord | None, containers: Iterable[str], now: float) -> dict[str, Any]:
    if pod is None:
        return {"known": False, "note": "the store no longer holds this pod; decisions below are from the audit"}
    return {
        "known": True,
        "namespace": pod.namespace,
        "name": pod.name,
        "uid": pod.uid,
        "qos_class": pod.qos_class,
        "source": pod.source,
        "cgroup_parent": pod.cgroup_parent,
        "sandbox_id": pod.sandbox_id,
        "first_seen": format_ts(pod.first_seen),
        "age": format_age(now - pod.first_seen) if pod.first_seen else "",
        "containers": sorted(containers),
    }


def _resources_section(pod: PodRecord, records: Iterable[ContainerRecord], names: Iterable[str]) -> list[dict[str, Any]]:
    """Per container, the requests and limits the reconcilers read and where they came from: the pod spec,
    or, without one (standalone, a pod known only from the proxy or NRI), the runtime's announced resources."""
    by_name = {c.name: c for c in records}
    out = []
    for name in sorted(set(names)):
        spec = container_spec(pod, name, by_name.get(name))
        out.append({"container": name, "source": spec.source, "requests": dict(spec.requests),
                    "limits": dict(spec.limits)})
    return out


def _hook_entry(record: DecisionRecord, calls: int) -> dict[str, Any]:
    return {
        "plugin": record.plugin,
        "applied": record.applied,
        "values": dict(record.values),
        "reason": record.reason,
        "inputs": dict(record.inputs),
        "error": record.error,
        "door": record.door,
        "time": format_ts(record.ts),
        "calls": calls,
    }


def _group_decisions(records: list[DecisionRecord]) -> list[dict[str, Any]]:
    """One group per (stage, container), in the order first seen; per plugin, its latest decision."""
    latest: dict[tuple[str, str, str], DecisionRecord] = {}
    calls: Counter[tuple[str, str, str]] = Counter()
    for d in records:
        key = (d.stage, d.container, d.plugin)
        latest[key] = d  # a dict keeps a key's first position: groups stay in first-seen order
        calls[key] += 1
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for key, d in latest.items():
        groups.setdefault(key[:2], []).append(_hook_entry(d, calls[key]))
    return [{"stage": stage, "container": container, "hooks": hooks} for (stage, container), hooks in groups.items()]


def _writes_for_uid(writes: list[WriteRecord], uid: str) -> list[WriteRecord]:
    """cgroupfs paths carry the UID as is (`pod<uid>`), systemd ones with `_` (`pod<uid_>.slice`)."""
    if not uid:
        return []
    systemd = uid.replace("-", "_")
    return [w for w in writes if uid in w.path or systemd in w.path]


def explain_view(store: StateStore, namespace: str, name: str) -> dict[str, Any]:
    """Every hook's latest decision for the pod, the writes into its cgroups and its recent calls."""
    key = f"{namespace}/{name}"
    snap = store.snapshot()
    pod = snap.pod_by_key(namespace, name)
    records = store.audit.decisions(pod_key=key)
    if pod is not None:
        # A pod deleted and re-created under the same name has a new UID: explain the current one.
        current = [d for d in records if d.pod_uid == pod.uid]
        records = current or records
    if not records:
        why = (
            "hookserver knows the pod, but no hook has decided anything for it yet "
            "(its hooks were skipped or not called)"
            if pod is not None
            else "hookserver has not seen a pod by that name"
        )
        raise NotFoundError(f"no hook decisions recorded for pod {key}: {why}")
    uid = pod.uid if pod is not None else records[-1].pod_uid
    containers: list[str] = [c.name for c in snap.containers_of(uid)] if uid else []
    if pod is not None:  # started containers the informer lists (pods whose hooks ran elsewhere, or never)
        containers += [name for name in pod.container_ids if name not in containers]
    recent = [e for e in store.audit.events() if e.pod_key == key][-_EXPLAIN_EVENTS:]
    writes = _writes_for_uid(store.audit.writes(), uid)
    section = _pod_section(pod, containers, store.clock())
    if pod is not None:
        section["resources"] = _resources_section(pod, snap.containers_of(pod.uid), containers)
    return {
        "pod": section,
        "decisions": _group_decisions(records),
        "cpu": {**cpu_sources(records, writes), "core_sched": core_sched_source(snap.node_slo, pod)},
        "writes": [write_row(w) for w in writes],
        "events": [event_row(e) for e in recent],
    }

