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
