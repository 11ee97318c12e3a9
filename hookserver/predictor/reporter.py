"""The NodeMetric status reporter: every `reportIntervalSeconds`, build the status and hand it to a sink.

Sinks: the informer's status patcher (apiserver mode; only the informer talks to the apiserver) or a file
under --state-dir (standalone). A sink returns what happened instead of raising, and the reporter logs only
changes of state (first failure, a different failure, recovery), so a missing NodeMetric or CRD, or an apiserver
outage, is one log line and a counter, and the next tick simply tries again with fresh numbers: an outage
loses only the reports that fell inside it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from hookserver.aio.periodic import sleep_or_stop
from hookserver.predictor.metrics import PredictorMetrics
from hookserver.predictor.nodemetric_gpu import GPU_DEVICES_STATIC, gpu_inventory
from hookserver.predictor.nodemetric_status import ReportPolicy, build_status, report_policy
from hookserver.predictor.predictors import ReclaimableReport
from hookserver.predictor.service import PredictorService
from hookserver.predictor.settings import PredictorSettings
from hookserver.kubewire import iso_time
from hookserver.system.atomicfile import write_json_atomically

__all__ = ["Delivery", "FileStatusSink", "NodeMetricReporter", "StatusSink"]

log = logging.getLogger(__name__)


class Delivery(Protocol):
    """What a sink reports: result is ok, not_found or error."""

    @property
    def result(self) -> str: ...

    @property
    def detail(self) -> str: ...

    @property
    def attempts(self) -> int: ...


class StatusSink(Protocol):
    target: str  # apiserver | file
    where: str  # the object path or the file

    def deliver(self, status: dict[str, Any]) -> Delivery: ...


@dataclass(frozen=True, slots=True)
class _Done:
    result: str
    detail: str = ""
    attempts: int = 1


class FileStatusSink:
    """Standalone mode: the status as a NodeMetric object in one JSON file, written atomically."""

    target = "file"

    def __init__(self, path: str, *, node_name: str) -> None:
        self.where = path
        self.node_name = node_name

    def deliver(self, status: dict[str, Any]) -> Delivery:
        doc = {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
               "metadata": {"name": self.node_name}, "status": status}
        problem = write_json_atomically(self.where, doc)
        return _Done("error", problem) if problem else _Done("ok")


# How often a report wait looks at the NodeMetric spec again (its interval may change meanwhile).
_REPLAN_S = 1.0


class NodeMetricReporter:
    def __init__(
        self,
        service: PredictorService,
        sink: StatusSink,
        *,
        settings: PredictorSettings,
        metrics: PredictorMetrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.service = service
        self.sink = sink
        self.settings = settings
        self.metrics = metrics
        self.clock = clock
        self.last_status: dict[str, Any] | None = None
        # The last prod-reclaimable computation: the capacity publisher's mid input (as koord-manager reads
        # status.prodReclaimableMetric).
        self.last_reclaimable: ReclaimableReport | None = None
        self.last_built_at = 0.0
        self.last_ok_at = 0.0
        self.last_result = ""
        self.last_error = ""
        self.last_error_at = 0.0
        self.reports = 0
        self.failures = 0
        self._state = ""  # what was last logged

    def policy(self) -> ReportPolicy:
        """The spec's policy. Looked at every second on the event loop (the NRI hot path's thread), so from the
        pods' snapshot, whose NodeMetric is current and which is not rebuilt for container changes."""
        s = self.settings
        return report_policy(self.service.store.pods_snapshot().node_metric,
                             min_report_s=s.min_report_interval_s, min_aggregate_s=s.min_aggregate_duration_s,
                             default_report_s=s.default_report_interval_s,
                             default_aggregate_s=s.default_aggregate_duration_s)

    def build(self, now: float) -> dict[str, Any]:
        policy = self.policy()
        for problem in policy.problems:
            log.debug("NodeMetric spec: %s", problem)
        reclaimable = self.service.reclaimable(window_s=policy.aggregate_s, now=now)
        self.last_reclaimable = reclaimable
        series = self.service.store.series
        status = build_status(self.service.store.snapshot(), series, now=now, policy=policy,
                              reclaimable=reclaimable, gpus=gpu_inventory(series.get_static(GPU_DEVICES_STATIC)))
        if self.metrics is not None:
            published = reclaimable.published
            self.metrics.record_prod_reported(published.cpu_milli, published.memory_bytes, ok=published.ok)
            # koordlet records the NodeMetricPromMetrics gauges from the status it is about to send.
            self.metrics.node_metric_usage.record(status)
        return status

    def report_once(self, now: float | None = None) -> Delivery:
        at = self.clock() if now is None else now
        started = time.perf_counter()
        status = self.build(at)
        self.last_status = status
        self.last_built_at = at
        delivery = self.sink.deliver(status)
        self.reports += 1
        self.last_result = delivery.result
        if delivery.result == "ok":
            self.last_ok_at = at
            if self._state not in ("", "ok"):
                log.info("NodeMetric status reported to %s again (after: %s)", self.sink.where, self.last_error)
            self._state = "ok"
        else:
            self.failures += 1
            self.last_error = delivery.detail
            self.last_error_at = at
            state = f"{delivery.result}:{delivery.detail}"
            if state != self._state:
                log.warning("NodeMetric status not reported to %s (%s): %s; retrying every report interval",
                            self.sink.where, delivery.result, delivery.detail)
            self._state = state
        if self.metrics is not None:
            self.metrics.reports.labels(self.sink.target, delivery.result).inc()
            self.metrics.report_duration.observe(time.perf_counter() - started)
        return delivery

    async def run(self, stop: asyncio.Event, *, mono: Callable[[], float] = time.monotonic) -> None:
        """Report every interval (re-read from the spec, as koordlet does) until stopped.

        The wait is re-planned every `_REPLAN_S` from the policy of that moment: the spec usually arrives
        from the informer after the loop started, and a first wait taken from the 60 s default then delayed
        the first report past the spec's own interval (issue 21). Now the first report is due one spec
        interval after the start (or at once when the spec says the start is already that long ago)."""
        last = mono()
        while not stop.is_set():
            while True:
                left = last + self.policy().report_interval_s - mono()
                if left <= 0:
                    break
                if await sleep_or_stop(stop, min(left, _REPLAN_S)):
                    return
            last = mono()
            try:
                await asyncio.to_thread(self.report_once)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a failed report is logged and counted, never fatal
                log.warning("NodeMetric report failed: %s", exc, exc_info=log.isEnabledFor(logging.DEBUG))
                self.failures += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                self.last_error_at = self.clock()
                if self.metrics is not None:
                    self.metrics.reports.labels(self.sink.target, "error").inc()

    def view(self) -> dict[str, Any]:
        """`hookctl nodemetric`: the last document built, when and where it went, the last error."""
        policy = self.policy()
        return {
            "target": self.sink.target,
            "where": self.sink.where,
            "policy": {"report_interval_s": policy.report_interval_s, "aggregate_s": policy.aggregate_s,
                       "durations_s": list(policy.durations_s), "memory_policy": policy.memory_policy,
                       "from_spec": policy.from_spec, "problems": list(policy.problems)},
            "reports": self.reports,
            "failures": self.failures,
            "last_built_at": iso_time(self.last_built_at),
            "last_result": self.last_result or None,
            "last_reported_at": iso_time(self.last_ok_at),
            "last_error": self.last_error or None,
            "last_error_at": iso_time(self.last_error_at),
            "status": self.last_status,
        }
