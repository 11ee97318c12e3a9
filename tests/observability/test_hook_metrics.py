"""Hook-call metrics are queued on the hot path and folded in when read: a scrape sees every call before it."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from hookserver.dispatch import HookDispatcher
from hookserver.hooks import ContainerRequest, HookRegistry, PodRequest, Stage
from hookserver.hooks.plugins import BatchResourcePlugin
from hookserver.observability.metrics import _FOLD_AT, HookMetrics
from hookserver.store import StateStore
from tests.reference_example import BE_LABELS, SPEC_KEY, WORKED_SPEC_JSON


def _dispatch(n: int) -> tuple[CollectorRegistry, HookMetrics]:
    registry = CollectorRegistry()
    metrics = HookMetrics(registry)
    dispatcher = HookDispatcher(
        registry=HookRegistry([BatchResourcePlugin()]), store=StateStore(), executor=None, metrics=metrics
    )
    pod = PodRequest("ns", "p", "uid-1", labels=BE_LABELS, annotations={SPEC_KEY: WORKED_SPEC_JSON})
    for i in range(n):
        dispatcher.dispatch_container(
            Stage.PRE_CREATE_CONTAINER, ContainerRequest(pod=pod, name="a", container_id=f"c{i}"), door="nri",
            rpc="CreateContainer",
        )
    return registry, metrics


def test_a_scrape_sees_every_call_made_before_it() -> None:
    registry, _metrics = _dispatch(5)
    labels = {"door": "nri", "rpc": "CreateContainer", "result": "ok"}
    assert registry.get_sample_value("hookserver_hook_calls_total", labels) == 5
    assert registry.get_sample_value(
        "hookserver_hook_latency_seconds_count", {"door": "nri", "rpc": "CreateContainer"}
    ) == 5
    assert registry.get_sample_value(
        "hookserver_hook_plugin_duration_seconds_count", {"plugin": "BatchResource", "stage": "PreCreateContainer"}
    ) == 5
    assert b'hookserver_hook_calls_total{door="nri",result="ok",rpc="CreateContainer"} 5.0' in generate_latest(registry)


def test_the_queue_is_bounded_without_scrapes() -> None:
    _registry, metrics = _dispatch(_FOLD_AT + 10)
    assert len(metrics._pending) < _FOLD_AT  # folded on the way: no unbounded growth when nobody scrapes


def test_bulk_fold_matches_observing_one_by_one() -> None:
    from prometheus_client import Histogram

    from hookserver.observability.metrics import LATENCY_BUCKETS_S, _observe_all

    values = [0.0, 0.00005, 0.0001, 0.00010001, 0.001, 0.0049, 2.5, 3.0, 100.0] + list(LATENCY_BUCKETS_S)
    one, bulk = CollectorRegistry(), CollectorRegistry()
    h_one = Histogram("x_seconds", "x", buckets=LATENCY_BUCKETS_S, registry=one)
    h_bulk = Histogram("x_seconds", "x", buckets=LATENCY_BUCKETS_S, registry=bulk)
    for v in values:
        h_one.observe(v)
    _observe_all(h_bulk, values)
    def samples(registry: CollectorRegistry) -> list[bytes]:
        return [line for line in generate_latest(registry).splitlines() if b"_created" not in line]

    assert samples(one) == samples(bulk)
    assert any(b'le="0.001"' in line for line in samples(bulk))
