"""Hook-call metrics are queued on the hot path and folded in when read, or by the folder thread once enough are
queued (never by the caller): a scrape sees every call before it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, generate_latest

from hookserver.aio.hotgate import HotGate

from hookserver.dispatch import HookDispatcher
from hookserver.hooks import ContainerRequest, HookRegistry, PodRequest, Stage
from hookserver.hooks.plugins import BatchResourcePlugin
from hookserver.observability.metrics import _FOLD_AT, _FOLD_SLICE, _INLINE_AT, HookMetrics
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


def _wait_until(predicate: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _spy_folds(metrics: HookMetrics) -> list[str]:
    """The names of the threads that folded calls, one entry per slice."""
    threads: list[str] = []
    fold_some = metrics._fold_some

    def spy(limit: int) -> None:
        threads.append(threading.current_thread().name)
        fold_some(limit)

    metrics._fold_some = spy  # type: ignore[method-assign]
    return threads


def test_the_queue_is_bounded_without_scrapes_and_the_caller_never_folds() -> None:
    registry = CollectorRegistry()
    metrics = HookMetrics(registry, gate=HotGate())
    folded_on = _spy_folds(metrics)
    for _ in range(_FOLD_AT + 10):
        metrics.queue_call("nri", "CreateContainer", "ok", 0.0001)
    # The call that crossed the threshold returned without folding (it used to fold 2,048 calls, 3-5 ms).
    assert threading.current_thread().name not in folded_on
    assert _wait_until(lambda: len(metrics._pending) < _FOLD_AT)  # folded by the folder thread, no scrape
    assert set(folded_on) == {"metrics-fold"}
    assert len(folded_on) >= _FOLD_AT // _FOLD_SLICE  # in slices, a wait at the hot gate before each
    labels = {"door": "nri", "rpc": "CreateContainer", "result": "ok"}
    assert registry.get_sample_value("hookserver_hook_calls_total", labels) == _FOLD_AT + 10  # nothing lost


def test_the_folder_steps_aside_while_a_call_is_in_flight() -> None:
    gate = HotGate()
    gate.configure(enabled=True, linger_s=0.0, max_defer_s=30.0)
    door = gate.door("nri", threadsafe=False)
    metrics = HookMetrics(CollectorRegistry(), gate=gate)
    folded_on = _spy_folds(metrics)
    door.enter()  # a call is being answered: the folder waits at the gate before its first slice
    try:
        for _ in range(_FOLD_AT):
            metrics.queue_call("nri", "CreateContainer", "ok", 0.0001)
        assert _wait_until(lambda: metrics._folder is not None and metrics._folder.is_alive())
        time.sleep(0.3)
        assert folded_on == [] and len(metrics._pending) == _FOLD_AT
    finally:
        door.leave()
    assert _wait_until(lambda: not metrics._pending)
    assert gate.stats()["pauses"] == 1 and folded_on  # it waited once, then folded


def test_without_a_folder_the_queue_is_still_bounded() -> None:
    metrics = HookMetrics(CollectorRegistry(), gate=HotGate())
    metrics._wake_folder = lambda: None  # type: ignore[method-assign]  # as if no folder thread could run
    for _ in range(_INLINE_AT + 10):
        metrics.queue_call("nri", "CreateContainer", "ok", 0.0001)
    assert len(metrics._pending) < _INLINE_AT


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
