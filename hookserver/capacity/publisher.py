"""The capacity publisher: every `interval_s`, compute batch/mid capacity from fresh local data and decide
whether the Node's offer is written, withdrawn or left alone.

One tick (on a worker thread, never the event loop):
  1. the node's effective colocation-config, its Node record, pods and usage from the store (usage.py);
  2. the formula (formula.py), always, so `hookctl capacity` and the metrics show the figure even when this
     agent does not publish it, and from the same numbers the figures of each NUMA zone of the node's
     NodeResourceTopology (numa_formula.py; `numa_zones` names the zones);
  3. who publishes (rules.who_publishes); another field manager owning the fields means yield: no write, one
     log line, the metric and the state say so; managers in `take_over_from` are taken over with force, and a
     manager that takes them back too often is a live writer, yielded to for an hour;
  4. the offer must go when colocation is off for the node or the samples are stale (rules.degrade_reason);
     the first write after a start waits for `warmup_s` of samples;
  5. the write rules (rules.decide) against the Node's current values; the computation happens in the same
     tick as the write, so after an outage or a restart nothing computed before it is ever published.
  6. the zone figures that go with the offer now on the Node, if it is this agent's (zone_offer.py): the
     NodeResourceTopology publisher reads them from `zone_offers.published`.

The NodeMetric keeper (apiserver mode) runs in the same tick when colocation is on. Liveness: a tick that has
not finished for `hung_after_s` fails /healthz (`hung()`), so the kubelet restarts an agent whose offer it can
no longer vouch for.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hookserver.aio.hotgate import pause
from hookserver.aio.periodic import run_every
from hookserver.capacity.formula import CapacityResult, compute_capacity, node_value
from hookserver.capacity.metrics import CapacityMetrics
from hookserver.capacity.node_facts import node_facts
from hookserver.capacity.nodemetric_keeper import NodeMetricKeeper
from hookserver.capacity.numa_formula import ZoneAllocatable, ZoneOutcome, compute_zone_capacity
from hookserver.capacity.quantities import Pair
from hookserver.capacity.rules import Decision, decide, degrade_reason, foreign_owners, warmup_left_s, who_publishes
from hookserver.capacity.report import capacity_report
from hookserver.capacity.settings import CapacitySettings
from hookserver.capacity.sinks import CapacitySink, write_document
from hookserver.capacity.ticks import TickOutcome, WriteRecord
from hookserver.capacity.usage import Freshness, gather_inputs, report_window_s
from hookserver.capacity.zone_offer import ZoneOffers
from hookserver.errors import InputError
from hookserver.koord_resources import PUBLISHED_RESOURCES
from hookserver.quantity import parse_quantity
from hookserver.slo.colocation import ResolvedColocation, default_colocation, node_metric_spec
from hookserver.store.state import StateStore

__all__ = ["CapacityPublisher", "TickOutcome"]

log = logging.getLogger(__name__)

_HOUR_S = 3600.0


class CapacityPublisher:
    def __init__(
        self,
        *,
        store: StateStore,
        settings: CapacitySettings,
        sink: CapacitySink,
        standalone: bool,
        prod_reclaimable: Callable[[], Pair | None] = lambda: None,
        disabled_collectors: Callable[[], Sequence[str]] = tuple,
        koord_manager_evidence: Callable[[], str] = str,
        nodemetric: NodeMetricKeeper | None = None,
        numa_zones: Callable[[], Sequence[ZoneAllocatable]] = tuple,
        ready: Callable[[], bool] = lambda: True,
        document_path: str = "",
        metrics: CapacityMetrics | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.settings = settings
        self.sink = sink
        self.standalone = standalone
        self.prod_reclaimable = prod_reclaimable
        self.disabled_collectors = disabled_collectors
        self.koord_manager_evidence = koord_manager_evidence
        self.nodemetric = nodemetric
        self.numa_zones = numa_zones  # the NRT's zones and their allocatable (numa_link.link_numa_zones sets it)
        self.zone_offers = ZoneOffers()
        self.last_zones: tuple[ZoneOutcome, ...] = ()
        self.ready = ready  # the informer's first sync: until then colocation-config and the pods are defaults
        self.document_path = document_path  # standalone: the offer and its explanation after every tick
        self.document_error = ""
        self.metrics = metrics
        self.clock = clock
        self.monotonic = monotonic
        self.started_at = clock()
        self.last: TickOutcome | None = None
        self.last_result: CapacityResult | None = None
        self.last_colocation: ResolvedColocation = default_colocation()
        self.last_freshness = Freshness(None, None)
        self.last_notes: tuple[str, ...] = ()
        self.last_who = ""
        self.last_decision: Decision | None = None
        self.last_write_at = 0.0  # the last write that changed the Node (ok)
        self.ours: dict[str, str] = {}  # what this agent last put on the Node
        self._ours_rv = ""
        self.writes: collections.deque[WriteRecord] = collections.deque(maxlen=64)
        self._takeovers: collections.deque[tuple[float, str]] = collections.deque(maxlen=64)
        self._history: collections.deque[tuple[float, dict[str, int]]] = collections.deque(maxlen=4096)
        self.last_target: dict[str, int] = {}
        self._live_writer_until = 0.0
        self._live_writer = ""
        self._tick_started: float | None = None
        self._tick_finished = monotonic()
        self._running = False
        self.ticks = 0
        self.errors = 0
        self._logged_state = ""

    # -- liveness ----------------------------------------------------------------------------------
    def hung(self) -> tuple[bool, str]:
        """(hung, why) for /healthz: a tick running for longer than `hung_after_s`, or no tick finished for that
        long while the loop runs."""
        if not self._running:
            return False, ""
        now = self.monotonic()
        limit = self.settings.hung_after_s
        started = self._tick_started
        if started is not None and now - started > limit:
            return True, f"capacity publisher: a tick has been running for {now - started:.0f} s"
        if now - self._tick_finished > limit + self.settings.interval_s:
            return True, f"capacity publisher: no tick finished for {now - self._tick_finished:.0f} s"
        return False, ""

    # -- the tick ----------------------------------------------------------------------------------
    def tick(self, now: float | None = None) -> TickOutcome:
        at = self.clock() if now is None else now
        started = self.monotonic()
        self._tick_started = started
        try:
            outcome = self._tick(at)
        except Exception as exc:  # noqa: BLE001 - a failed tick is shown and counted; the next one tries again
            log.warning("capacity publisher: tick failed: %s", exc, exc_info=log.isEnabledFor(logging.DEBUG))
            outcome = TickOutcome(at, "error", f"{type(exc).__name__}: {exc}")
        finally:
            self._tick_started = None
            self._tick_finished = self.monotonic()
        outcome = TickOutcome(outcome.at, outcome.state, outcome.reason, outcome.action, outcome.result,
                              outcome.detail, outcome.values, self._tick_finished - started)
        self.ticks += 1
        if outcome.state == "error":
            self.errors += 1
        self.last = outcome
        self._log_state(outcome)
        if self.document_path:
            pause()
            self._write_document()
        if self.metrics is not None:
            self.metrics.set_state(outcome.state)
            self.metrics.compute_seconds.observe(outcome.duration_s)
        return outcome

    def _tick(self, at: float) -> TickOutcome:
        if not self.settings.enabled:
            return TickOutcome(at, "off", "capacity.enabled: false")
        if not self.ready():
            # Until the first sync the store holds defaults (colocation off, no pods): acting on them would
            # withdraw a good offer at every agent restart, or publish one that ignores the node's pods.
            return TickOutcome(at, "warming-up", "waiting for the informer's first sync (colocation-config, the "
                                                 "Node and its pods)")
        snapshot = self.store.snapshot()
        resolved = snapshot.colocation if isinstance(snapshot.colocation, ResolvedColocation) else default_colocation()
        self.last_colocation = resolved
        strategy = resolved.strategy
        if snapshot.node is None:
            return TickOutcome(at, "error", "the Node is not known yet")
        try:
            node = node_facts(snapshot.node)
        except InputError as exc:
            return TickOutcome(at, "error", str(exc))
        window = report_window_s(strategy.metric_aggregate_duration_seconds)
        pods, usage, fresh, notes = gather_inputs(
            snapshot, self.store.series, now=at, window_s=window, fast_window_s=self.settings.fast_window_s,
            memory_policy=strategy.metric_memory_collect_policy,
        )
        pause()  # the hot gate between the tick's steps (no hook takes the publisher's state)
        result = compute_capacity(strategy, node, pods, usage, prod_reclaimable=self.prod_reclaimable())
        self.last_result, self.last_freshness, self.last_notes = result, fresh, (*node.notes, *notes)
        self.last_zones = compute_zone_capacity(strategy, node, result, pods, self.numa_zones())
        self.zone_offers.remember(at, result.values(), self.last_zones, self.settings.grow_hold_s)
        if self.metrics is not None:
            self.metrics.record_computed(result.values(), {o.resource: o.internal for o in result.resources})
        if self.nodemetric is not None and resolved.enabled and self.settings.manage_nodemetric:
            self.nodemetric.keep(node_metric_spec(resolved), exists=snapshot.node_metric is not None)
        who = who_publishes(self.settings.publisher, standalone=self.standalone,
                            koord_manager_evidence="" if self.standalone else self.koord_manager_evidence())
        self.last_who = who.why
        if not who.agent:
            self.zone_offers.settle(None)
            leftover = [r for r in PUBLISHED_RESOURCES if self.settings.field_manager in node.owners.get(r, ())]
            if leftover and not self.standalone:
                # This agent published here before (another setting, or before koord-manager came): its own fields
                # go, so nobody mistakes them for koord-manager's; fields koord-manager rewrote are its own now.
                return self._act(at, Decision("withdraw", "withdraw this agent's earlier offer: "
                                                          + ", ".join(leftover)), None, who.why, (), "koord-manager")
            self._record_offer(node.current, node.owners)
            return TickOutcome(at, "koord-manager", who.why)
        foreign = foreign_owners(node.owners, self.settings.field_manager) if not self.standalone else {}
        takeable = set(self.settings.take_over_from)
        blocking = sorted({m for managers in foreign.values() for m in managers if m not in takeable})
        if at < self._live_writer_until:
            blocking = sorted({*blocking, self._live_writer})
        if self.metrics is not None:
            self.metrics.set_yielded(blocking)
        if blocking:
            self.zone_offers.settle(None)
            fields = ", ".join(sorted(foreign)) or "the batch/mid fields"
            return TickOutcome(at, "yielded", f"another writer owns {fields}: {', '.join(blocking)}; this agent does "
                                              "not write (stop the other writer, or list it in "
                                              "capacity.take_over_from once it is gone)")
        current = self._current(node.current, snapshot.node.resource_version)
        if self.standalone:  # no Node object to read back: the offer is what this agent last put out
            current = {r: _parse(r, v) for r, v in self.ours.items()}
        ours = [r for r in PUBLISHED_RESOURCES if self.settings.field_manager in node.owners.get(r, ())
                or r in self.ours]
        target: dict[str, int] | None
        if not resolved.enabled:
            target, why_not = None, "colocation is off for this node (colocation-config enable)"
        else:
            why_not = degrade_reason(fresh, now=at, started_at=self.started_at,
                                     degrade_minutes=strategy.degrade_time_minutes,
                                     disabled_collectors=self.disabled_collectors())
            target = None if why_not else self._held(at, result.values())
        if target is None:
            self._history.clear()
        elif snapshot.stale:
            # The informer lost a watch: pods may be missing from the store, so a rise may be wrong; a drop
            # (usage is the agent's own, always fresh) is still published.
            target = {r: min(v, current[r]) for r, v in target.items() if r in current}
            why_not = "the informer is stale (a watch is down): the offer may only shrink"
        if target is not None:
            left = warmup_left_s(fresh, now=at, warmup_s=self.settings.warmup_s)
            if left > 0:
                return TickOutcome(at, "warming-up", f"{left:.0f} s more of node samples before the first write "
                                                     f"(capacity.warmup_s {self.settings.warmup_s:g})")
        decision = decide(target, current, ours=ours, last_write_at=self.last_write_at, now=at,
                          diff_threshold=strategy.resource_diff_threshold,
                          update_time_s=float(strategy.update_time_threshold_seconds))
        self.last_decision = decision
        gone_state = "disabled" if not resolved.enabled else "degraded"
        if decision.action == "hold":
            state = gone_state if target is None else ("published" if ours else "holding")
            self.zone_offers.settle({r: current[r] for r in ours if r in current} if state == "published" else None)
            return TickOutcome(at, state, why_not or decision.reason)
        forced = tuple(sorted({m for managers in foreign.values() for m in managers}))
        return self._act(at, decision, target, why_not, forced, gone_state)

    def _held(self, at: float, computed: Mapping[str, int]) -> dict[str, int]:
        """Growth waits: the target is the per-resource minimum of what was computed over the last
        `grow_hold_s`, so a drop is published at once and a rise only once it has lasted (bursty LS load every
        minute keeps a steady, lower offer instead of a write per burst)."""
        hold = self.settings.grow_hold_s
        self._history.append((at, dict(computed)))
        while self._history and at - self._history[0][0] > hold:
            self._history.popleft()
        target = dict(computed)
        for _, values in self._history:
            for resource, value in values.items():
                if resource in target and value < target[resource]:
                    target[resource] = value
        self.last_target = target
        return target

    def _current(self, on_node: Mapping[str, int], node_rv: str) -> dict[str, int]:
        """The Node's values, unless the store's copy is older than our last write (the watch lags it)."""
        if self._ours_rv and node_rv and node_rv.isdigit() and self._ours_rv.isdigit() \
                and int(node_rv) < int(self._ours_rv):
            return {r: int(_parse(r, v)) for r, v in self.ours.items()}
        return dict(on_node)

    def _act(self, at: float, decision: Decision, target: Mapping[str, int] | None, why_not: str,
             forced: tuple[str, ...], gone_state: str) -> TickOutcome:
        if target is None:
            delivery = self.sink.withdraw()
            values: dict[str, str] = {}
            action = "withdraw"
        else:
            values = {r: node_value(r, v) for r, v in target.items()}
            force = bool(forced)
            delivery = self.sink.apply(values, force=force)
            action = "write"
            if force and delivery.result == "ok":
                for manager in forced:
                    self._takeover(at, manager)
            elif delivery.result == "conflict":
                conflicting = sorted({m for m, _ in delivery.conflicts})
                if conflicting and all(m in self.settings.take_over_from for m in conflicting):
                    delivery = self.sink.apply(values, force=True)
                    if delivery.result == "ok":
                        for manager in conflicting:
                            self._takeover(at, manager)
                        forced = tuple(conflicting)
        reason = decision.reason if not why_not else f"{why_not}: {decision.reason}"
        self.writes.append(WriteRecord(at, action, reason, delivery.result, values, delivery.detail, forced))
        if self.metrics is not None:
            self.metrics.record_write(action, delivery.result, at)
        if delivery.result in ("ok", "conflict"):  # the zones go with the new offer; none with another writer's
            self.zone_offers.settle(dict(target) if delivery.result == "ok" and target is not None else None)
        if delivery.result == "ok":
            self.last_write_at = at
            self.ours = dict(values)
            self._ours_rv = str(getattr(delivery, "resource_version", "") or "")
            if self.metrics is not None:
                self.metrics.record_offer({r: int(_parse(r, v)) for r, v in values.items()})
            return TickOutcome(at, "published" if target is not None else gone_state, reason, action, "ok", "", values)
        if delivery.result == "conflict":
            managers = sorted({m for m, _ in delivery.conflicts}) or ["another field manager"]
            if self.metrics is not None:
                self.metrics.set_yielded(managers)
            return TickOutcome(at, "yielded", f"the apiserver refused the write: {delivery.detail}; another writer "
                                              f"({', '.join(managers)}) owns the fields", action, "conflict",
                               delivery.detail)
        return TickOutcome(at, "error", f"{action} failed ({delivery.result}): {delivery.detail}", action,
                           delivery.result, delivery.detail)

    def _write_document(self) -> None:
        node = self.store.snapshot().node
        error = write_document(self.document_path, node_name=node.name if node is not None else "",
                               values=self.ours, report=self.view())
        if error and error != self.document_error:
            log.warning("capacity: cannot write %s", error)
        self.document_error = error

    def _takeover(self, at: float, manager: str) -> None:
        self._takeovers.append((at, manager))
        recent = sum(1 for t, m in self._takeovers if m == manager and at - t < _HOUR_S)
        log.warning("capacity: took the batch/mid fields over from field manager %s (capacity.take_over_from)",
                    manager)
        if recent > self.settings.max_takeovers_per_hour:
            self._live_writer, self._live_writer_until = manager, at + _HOUR_S
            log.warning("capacity: %s took the fields back %d times within an hour: it is a live writer; this agent "
                        "yields to it for an hour", manager, recent)

    def _record_offer(self, current: Mapping[str, int], owners: Mapping[str, tuple[str, ...]]) -> None:
        if self.metrics is not None:
            self.metrics.record_offer({r: v for r, v in current.items()
                                       if self.settings.field_manager in owners.get(r, ())})

    def _log_state(self, outcome: TickOutcome) -> None:
        """One line per change of state (and per new error text), not per tick."""
        key = outcome.state if outcome.state not in ("error", "yielded") else f"{outcome.state}:{outcome.reason}"
        if key == self._logged_state:
            return
        first = not self._logged_state
        self._logged_state = key
        if outcome.state in ("error", "yielded", "degraded"):
            log.warning("capacity: %s: %s", outcome.state, outcome.reason)
        elif not first or outcome.state not in ("warming-up", "off"):
            log.info("capacity: %s: %s", outcome.state, outcome.reason)

    # -- loop --------------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Tick every interval until stopped. The offer stays on the Node at shutdown (a restart keeps it);
        `hookserver cleanup` withdraws it."""

        async def once() -> None:
            await asyncio.to_thread(self.tick)

        self._running = True
        self._tick_finished = self.monotonic()
        try:
            await run_every(self.settings.interval_s, once, stop, name="capacity publisher",
                            run_first_immediately=True)
        finally:
            self._running = False

    # -- reports -----------------------------------------------------------------------------------
    def view(self) -> dict[str, Any]:
        """`hookctl capacity`: the offer, every term of the formula, the state and why, the last and next write."""
        return capacity_report(self)


def _parse(resource: str, text: str) -> int:
    return parse_quantity(text, field=resource).value()
