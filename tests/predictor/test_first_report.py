"""The first NodeMetric report is due one *spec* interval after the start, also when the informer stores the
spec after the report loop began (issue 21: the loop took its first sleep from the 60 s default and nothing
was reported 41 s after start with a 30 s spec interval)."""

from __future__ import annotations

import asyncio
import time

from hookserver.predictor import NodeMetricReporter
from hookserver.slo.nodemetric import NodeMetricSpec


class Sink:
    target = "file"
    where = "memory"

    def __init__(self) -> None:
        self.at: list[float] = []

    def deliver(self, status: object) -> object:
        from hookserver.predictor.reporter import _Done

        self.at.append(time.monotonic())
        return _Done("ok", "")


def test_the_first_report_follows_the_spec_that_arrives_after_the_start(store, make_service) -> None:  # type: ignore[no-untyped-def]
    service = make_service(min_report_interval_s=0.5, default_report_interval_s=60.0)
    sink = Sink()
    reporter = NodeMetricReporter(service, sink, settings=service.settings)  # type: ignore[arg-type]

    async def scenario() -> float:
        stop = asyncio.Event()
        started = time.monotonic()
        task = asyncio.create_task(reporter.run(stop))
        await asyncio.sleep(0.2)  # the informer has not listed the NodeMetric yet: the default (60 s) applies
        store.set_node_metric(NodeMetricSpec.model_validate({"metricCollectPolicy": {"reportIntervalSeconds": 1}}))
        for _ in range(60):
            if sink.at:
                break
            await asyncio.sleep(0.1)
        stop.set()
        await asyncio.wait_for(task, 5)
        return started

    started = asyncio.run(scenario())
    assert sink.at, "no report within 6 s although the spec asks for one every second"
    assert sink.at[0] - started < 2.5  # one spec interval (1 s) after the start, plus the re-plan step
    assert reporter.reports >= 1


def test_the_report_policy_is_read_without_copying_the_container_map(store, make_service) -> None:  # type: ignore[no-untyped-def]
    """`policy()` runs every second on the event loop: a container recorded since the last snapshot (every
    CreateContainer records one) must not make it copy the container map there."""
    from hookserver.store import ContainerRecord

    service = make_service(min_report_interval_s=0.5, default_report_interval_s=60.0)
    reporter = NodeMetricReporter(service, Sink(), settings=service.settings)  # type: ignore[arg-type]
    store.set_node_metric(NodeMetricSpec.model_validate({"metricCollectPolicy": {"reportIntervalSeconds": 7}}))
    store.snapshot()
    store.upsert_container(ContainerRecord(id="c1", pod_uid="p1", name="main"))
    assert reporter.policy().report_interval_s == 7  # the spec stored last
    assert store._snapshot is None  # no full snapshot was built for it
