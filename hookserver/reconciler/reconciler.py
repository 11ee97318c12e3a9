"""The reconciler front door: when to run a pass, on the daemon's loop; the pass itself runs in a thread.

Three triggers (koordlet's, reference §3.6), and a fourth of our own:
  * pod syncs: every pod add or relevant change the store reports (apiserver watch, kubelet poll, hook and
    NRI learning) marks the pod; marked pods are reconciled together, at most `pod_sync_rate_per_s` passes a
    second with a burst of `pod_sync_burst`;
  * rules: a NodeSLO or Node change (the CPU-suppress policy switches the quota rule, the cpu-normalization
    ratio scales it) re-applies every pod at once, as one leveled batch;
  * periodic: every `interval_s`, every pod, which also collects pods whose cgroups are gone;
  * catch-up (`catch_up`): pods a front door could not finish within its deadline (an NRI Synchronize cut
    short), reconciled at the next poll, before anything else and outside the rate limit.
The first pass runs once the informer has synced (so values come from the real NodeSLO and Node, not the
defaults), so a pod created while the agent was stopped is corrected at once. The store
listener only adds a UID to a set (it runs on the hook's thread); the loop polls that set every
`POLL_S`, so a hook never pays for waking the loop.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from hookserver.aio.periodic import sleep_or_stop
from hookserver.reconciler.settings import ReconcilerSettings
from hookserver.reconciler.ratelimit import TokenBucket
from hookserver.reconciler.reconcile import PodReconciler
from hookserver.reconciler.report import PassReport
from hookserver.store.changes import PodChange
from hookserver.store.state import StateStore, StoreSnapshot

__all__ = ["POLL_S", "Reconciler"]

log = logging.getLogger(__name__)

POLL_S = 0.1


class Reconciler:
    def __init__(
        self,
        settings: ReconcilerSettings,
        *,
        store: StateStore,
        engine: PodReconciler,
        ready: Callable[[], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self._ready = ready
        self.store = store
        self.engine = engine
        self._clock = clock
        self._bucket = TokenBucket(rate_per_s=settings.pod_sync_rate_per_s, burst=settings.pod_sync_burst, clock=clock)
        self._dirty: set[str] = set()
        self._urgent: set[str] = set()  # catch_up: run before anything else, not rate-limited
        self._urgent_why = ""
        self._lock = threading.Lock()
        self._rules: tuple[Any, ...] | None = None
        self._state = "stopped"
        self.last: PassReport | None = None
        self.last_error: str = ""
        self._last_error_at = 0.0
        self._passes_by_trigger: dict[str, int] = {}
        self._logged_errors: list[str] = []

    # -- store listener (any thread) -------------------------------------------------------------
    def on_pod_change(self, change: PodChange) -> None:
        if change.kind == "deleted":
            self.engine.pod_removed(change.uid)
            return
        with self._lock:
            self._dirty.add(change.uid)

    def catch_up(self, uids: set[str], why: str) -> None:
        """Reconcile these pods at the next poll (any thread), ahead of the rate limit and the periodic
        pass: work a front door could not finish in its budget (an NRI Synchronize cut short), so the
        cgroups get the hooks' values now, not at the next full pass. Counted as trigger `why`."""
        with self._lock:
            self._urgent |= uids
            self._urgent_why = why

    # -- the loop --------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        unsubscribe = self.store.subscribe_pods(self.on_pod_change)
        try:
            # Values decided before the informer has the NodeSLO and the Node would be the default rules':
            # wait for its first sync, so a restart never flaps a quota from -1 to a limit and back.
            self._state = "waiting for the informer's first sync"
            while self._ready is not None and not self._ready():
                if await sleep_or_stop(stop, POLL_S):
                    return
            self._state = "running"
            self._rules = _rule_inputs(self.store.pods_snapshot())
            with self._lock:
                self._urgent.clear()  # the first full pass covers them
            await self._pass(None, "start")
            next_full = self._clock() + self.settings.interval_s
            while not stop.is_set():
                # Every POLL_S on the event loop, the NRI hot path's thread: the pods' snapshot (node and NodeSLO
                # current), which is not rebuilt for container changes. A full one copied the container map
                # (~180 µs at 1,000 containers) on the loop after every CreateContainer of a pod wave.
                rules = _rule_inputs(self.store.pods_snapshot())
                if self._urgent:
                    with self._lock:
                        uids, self._urgent = self._urgent, set()
                        self._dirty -= uids
                    await self._pass(uids, self._urgent_why)
                elif not _same(rules, self._rules):
                    self._rules = rules
                    await self._pass(None, "rules")
                    next_full = self._clock() + self.settings.interval_s
                elif self._clock() >= next_full:
                    await self._pass(None, "periodic")
                    next_full = max(next_full + self.settings.interval_s, self._clock())
                elif self._dirty and self._bucket.take():
                    with self._lock:
                        uids, self._dirty = self._dirty, set()
                    await self._pass(uids, "pods")
                await sleep_or_stop(stop, min(POLL_S, max(0.0, next_full - self._clock())))
        finally:
            unsubscribe()
            self._state = "stopped"

    async def _pass(self, uids: set[str] | None, trigger: str) -> None:
        if uids is None:
            with self._lock:
                self._dirty.clear()  # a full pass covers them
        try:
            report = await asyncio.to_thread(self.engine.run, uids=uids, trigger=trigger)
        except Exception as exc:  # noqa: BLE001 - a failed pass is logged, counted and skipped (periodic-loop rule)
            log.warning("reconciler %s pass failed: %s", trigger, exc, exc_info=log.isEnabledFor(logging.DEBUG))
            self.last_error, self._last_error_at = f"{type(exc).__name__}: {exc}", self.store.clock()
            self.engine.totals["errors"] += 1
            return
        self.last = report
        self._passes_by_trigger[trigger] = self._passes_by_trigger.get(trigger, 0) + 1
        if report.errors:
            self.last_error, self._last_error_at = report.errors[0], report.started_at
            # The same failures every pass (a crafted cgroup parent, a broken annotation) are logged once,
            # then at DEBUG until they change; status and the errors metric keep counting them.
            level = logging.DEBUG if report.errors == self._logged_errors else logging.WARNING
            self._logged_errors = list(report.errors)
            log.log(level, "reconciler %s pass: %d error(s), first: %s", trigger, report.error_count, report.errors[0])
        if report.corrections or report.collected:
            log.info(
                "reconciler %s pass: %d value(s) corrected in %d pod(s) looked at, %d pod(s) collected, %.1f ms",
                trigger, report.corrections, report.pods, report.collected, report.duration_s * 1000,
            )

    # -- reports ---------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """For `hookctl status`: last pass, its cost and findings, running totals and GC."""
        last = self.last
        out: dict[str, Any] = {
            "state": self._state,
            "interval_s": self.settings.interval_s,
            "gc_grace_s": self.settings.gc_grace_s,
            "passes": dict(sorted(self._passes_by_trigger.items())),
            "corrections_total": self.engine.totals["corrections"],
            "writes_total": self.engine.totals["written"],
            "errors_total": self.engine.totals["errors"],
            "pods_collected_total": self.engine.totals["collected"],
            "pods_awaiting_gc": len(self.engine.gc),
            "pending_pod_syncs": len(self._dirty),
            "pending_catch_up": len(self._urgent),
            "last_error": self.last_error,
            "last_error_at": _iso(self._last_error_at),
        }
        if last is not None:
            out["last_pass"] = {
                "at": _iso(last.started_at),
                "trigger": last.trigger,
                "duration_ms": round(last.duration_s * 1000, 3),
                "pods": last.pods,
                "reconciled": last.reconciled,
                "skipped": dict(sorted(last.skipped.items())),
                "writes_planned": last.planned,
                "written": last.written,
                "corrections": last.corrections,
                "corrections_by_resource": dict(sorted(last.corrections_by_resource.items())),
                "drifted": last.drifted,
                "vanished": last.vanished,
                "errors": last.error_count,
                "collected": last.collected,
            }
        return out


def _rule_inputs(snap: StoreSnapshot) -> tuple[Any, ...]:
    """What hook rules are made of besides the pod: NodeSLO and the Node's labels and annotations."""
    node = snap.node
    return (snap.node_slo, node.annotations if node is not None else None, node.labels if node is not None else None)


def _same(a: tuple[Any, ...], b: tuple[Any, ...] | None) -> bool:
    if b is None:
        return False
    return all(x is y or x == y for x, y in zip(a, b, strict=True))


def _iso(ts: float) -> str:
    """Epoch seconds as ISO-8601 UTC (like the rest of `hookctl status`); never as ""."""
    if not ts:
        return ""
    return datetime.datetime.fromtimestamp(ts, tz=datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
