"""`hookctl capacity` (and, standalone, the explanation in the state dir's capacity document): what the Node is
offered, every term of the formula with its number and source, the policy, the state and why, the last and the
next write. Numbers are integers in milli-cores and bytes; `-o json` is the whole document.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any, Protocol

from hookserver.aio.hotgate import paced
from hookserver.capacity.formula import CapacityResult
from hookserver.capacity.nodemetric_keeper import NodeMetricKeeper
from hookserver.capacity.numa_formula import ZoneOutcome, zone_totals
from hookserver.capacity.rules import Decision
from hookserver.capacity.settings import CapacitySettings
from hookserver.capacity.sinks import CapacitySink
from hookserver.capacity.ticks import TickOutcome, WriteRecord
from hookserver.capacity.usage import Freshness, report_window_s
from hookserver.capacity.zone_offer import ZoneOffers
from hookserver.koord_resources import BATCH_CPU, BATCH_MEMORY
from hookserver.kubewire import iso_time
from hookserver.slo.colocation import ResolvedColocation

__all__ = ["CapacityState", "capacity_report", "writes_in_last_hour"]

_HOUR_S = 3600.0


class CapacityState(Protocol):
    """What the report reads of the publisher (`CapacityPublisher` is one): its settings, sink and last tick."""

    settings: CapacitySettings
    sink: CapacitySink
    clock: Callable[[], float]
    nodemetric: NodeMetricKeeper | None
    last: TickOutcome | None
    last_result: CapacityResult | None
    last_zones: tuple[ZoneOutcome, ...]
    zone_offers: ZoneOffers
    last_colocation: ResolvedColocation
    last_freshness: Freshness
    last_notes: tuple[str, ...]
    last_who: str
    last_decision: Decision | None
    last_target: dict[str, int]
    ours: dict[str, str]
    writes: collections.deque[WriteRecord]
    ticks: int
    errors: int


def writes_in_last_hour(writes: collections.deque[WriteRecord], now: float) -> int:
    """Successful writes in the hour before `now` (the queue copied once: the tick thread may append meanwhile)."""
    return sum(1 for w in list(writes) if now - w.at < _HOUR_S and w.result == "ok")


def _next_write(publisher: CapacityState) -> str:
    last = publisher.last
    decision = publisher.last_decision
    if last is None:
        return "after the first tick"
    if last.state in ("off", "koord-manager", "yielded"):
        return "none: this agent does not write"
    if last.state == "warming-up":
        return last.reason
    strategy = publisher.last_colocation.strategy
    rule = (f"checked every {publisher.settings.interval_s:g} s: a change above {strategy.resource_diff_threshold:.0%} "
            f"goes out at once (a rise only once it has lasted {publisher.settings.grow_hold_s:g} s), a smaller one "
            f"{strategy.update_time_threshold_seconds} s after the last write")
    if decision is not None and decision.action == "hold":
        return f"{rule}; now: {decision.reason}"
    return rule


def _zones(publisher: CapacityState) -> dict[str, Any]:
    """The NUMA zones' batch figures: computed this tick, added up beside the node's figure before third-party
    allocations and normalization (koord-manager's zones leave both out), and what the NRT carries."""
    zones = publisher.last_zones
    result = publisher.last_result
    node: dict[str, int] = {}
    if result is not None:
        internal = {o.resource: o.internal for o in result.resources}
        node = {"batch_cpu_milli": internal.get(BATCH_CPU, 0),
                "batch_memory_milli_bytes": internal.get(BATCH_MEMORY, 0) * 1000}
    return {"computed": [z.as_dict() for z in zones], "sum": dict(zone_totals(zones)) if zones else None,
            "node": node if zones else None, **publisher.zone_offers.view()}


def capacity_report(publisher: CapacityState) -> dict[str, Any]:
    last = publisher.last
    result = publisher.last_result
    colocation = publisher.last_colocation
    strategy = colocation.strategy
    fresh = publisher.last_freshness
    now = publisher.clock()
    keeper = publisher.nodemetric
    doc: dict[str, Any] = {
        "state": last.state if last is not None else "starting",
        "reason": last.reason if last is not None else "no tick yet",
        "publisher": {"setting": publisher.settings.publisher, "why": publisher.last_who or None,
                      "field_manager": publisher.settings.field_manager,
                      "take_over_from": list(publisher.settings.take_over_from)},
        "destination": {"kind": publisher.sink.target, "where": publisher.sink.where},
        "offer": dict(publisher.ours),
        "computed": result.node_values() if result is not None else None,
        "target": dict(publisher.last_target),  # the computed offer after the growth hold
        "policy": {
            "enabled": colocation.enabled, "layers": list(colocation.layers), "notes": list(colocation.notes),
            "cpu": strategy.cpu_calculate_policy, "memory": strategy.memory_calculate_policy,
            "cpu_reclaim_threshold_percent": strategy.cpu_reclaim_threshold_percent,
            "memory_reclaim_threshold_percent": strategy.memory_reclaim_threshold_percent,
            "batch_cpu_threshold_percent": strategy.batch_cpu_threshold_percent,
            "batch_memory_threshold_percent": strategy.batch_memory_threshold_percent,
            "mid_reclaim_mode": strategy.mid_reclaim_mode or "dynamic",
            "resource_diff_threshold": strategy.resource_diff_threshold,
            "update_time_threshold_seconds": strategy.update_time_threshold_seconds,
            "degrade_time_minutes": strategy.degrade_time_minutes,
            "report_window_s": report_window_s(strategy.metric_aggregate_duration_seconds),
            "fast_window_s": publisher.settings.fast_window_s,
        },
        "formula": [o.as_dict() for o in result.resources] if result is not None else [],
        "sums": {k: v.as_dict() for k, v in result.sums.items()} if result is not None else {},
        "zones": _zones(publisher),
        # the hot gate every 32 pods' lines (the capacity document is written every tick, 500 pods: ~14 ms)
        "pods": [line.as_dict() for line in paced(result.pods, every=32)] if result is not None else [],
        "samples": {
            "newest_at": iso_time(fresh.newest_at or 0.0),
            "age_s": round(now - fresh.newest_at, 1) if fresh.newest_at else None,
            "history_s": round(now - fresh.first_at, 1) if fresh.first_at else 0.0,
        },
        "notes": list(publisher.last_notes),
        "last_tick": ({"at": iso_time(last.at), "action": last.action, "result": last.result or None,
                       "detail": last.detail or None, "duration_ms": round(last.duration_s * 1000, 3)}
                      if last is not None else None),
        "last_write": publisher.writes[-1].as_dict() if publisher.writes else None,
        "next_write": _next_write(publisher),
        "writes": [w.as_dict() for w in list(publisher.writes)[-10:]],
        "writes_last_hour": writes_in_last_hour(publisher.writes, now),
        "ticks": publisher.ticks,
        "errors": publisher.errors,
        "nodemetric": keeper.view() if keeper is not None else None,
    }
    return doc
