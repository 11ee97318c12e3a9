"""A hook call's books: its event in the audit (door, rpc, pod, container, latency, result) and its metrics,
and each plugin's decision. Kept at once for skips and failures; for an "ok" NRI call, after its reply
(`record_later`), exactly as they would have been kept before it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from hookserver.dispatch.learning import StoreLearner
from hookserver.dispatch.result import Deferred, DispatchResult
from hookserver.hooks.context import PodRequest
from hookserver.hooks.outcome import StageOutcome
from hookserver.observability.metrics import HookMetrics
from hookserver.store.state import StateStore

__all__ = ["CallBooks"]

log = logging.getLogger("hookserver.dispatch")


class CallBooks:
    def __init__(
        self, store: StateStore, learner: StoreLearner, *, metrics: HookMetrics | None, perf_clock: Callable[[], float]
    ) -> None:
        self.store = store
        self.learner = learner
        self.metrics = metrics
        self._perf = perf_clock

    def finish(
        self, result: DispatchResult, door: str, rpc: str, pod_key: str, container: str, started: float
    ) -> DispatchResult:
        latency = self._perf() - started
        self.store.audit.add_event(
            self.store.clock(), door, rpc, pod_key, container, latency, result.result, result.error
        )
        if self.metrics is not None:
            outcome = result.outcome
            if outcome is None:
                self.metrics.queue_call(door, rpc, result.result, latency)
            else:
                self.metrics.queue_call(door, rpc, result.result, latency, outcome.stage.wire, outcome.outcomes)
        return result

    def record_decisions(self, door: str, outcome: StageOutcome, pod: PodRequest, container: str = "") -> None:
        """Audit each plugin's decision for `pod` (and `container`) as coming from `door`."""
        self.store.audit.add_decisions(
            self.store.clock(), door, outcome.stage.value, pod.key, pod.uid, container, outcome.outcomes
        )

    def record_later(self, later: list[Deferred]) -> int:
        """Do the bookkeeping `dispatch_container` left in `later`, in call order, and empty it. A record
        that fails is logged and skipped (its reply is long gone); returns how many failed."""
        failed = 0
        store, metrics = self.store, self.metrics
        audit = store.audit
        for request, snap, door, rpc, result, latency, ran in later:
            outcome = result.outcome
            assert outcome is not None  # only "ok" calls are deferred
            pod = request.pod
            try:
                stage = outcome.stage
                self.learner.learn_container(stage, request, snap)
                now, pod_key, wire = store.clock(), pod.key, stage.wire
                audit.add_decisions(now, door, wire, pod_key, pod.uid, request.name, outcome.outcomes)
                audit.add_event(now, door, rpc, pod_key, request.name, latency, "ok", "")
                if metrics is not None:
                    metrics.queue_call(door, rpc, "ok", latency, wire, outcome.outcomes if ran else ())
            except Exception:  # noqa: BLE001 - bookkeeping after the reply: nothing left to fail but the record
                failed += 1
                log.exception("%s %s for %s: recording the call failed", door, rpc, pod.key)
        later.clear()
        return failed
