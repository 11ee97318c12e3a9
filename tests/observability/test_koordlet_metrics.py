"""koordlet-named series: names, labels and bucket bounds as koordlet has them, values from our data."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from hookserver.observability.koordlet_metrics import (
    RUNTIME_HOOK_BUCKETS_MS,
    KoordletHookMetrics,
    register_store_series,
)
from hookserver.observability.metrics import HookMetrics
from hookserver.store import StateStore
from hookserver.store.records import NodeRecord, PodRecord
from hookserver.store.timeseries_types import series_key

HOOK = "koordlet_runtime_hook_invoked_duration_milliseconds"


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_runtime_hook_histogram_has_koordlets_buckets_and_milliseconds() -> None:
    # koordlet: ExponentialBuckets(0.01, 4, 8)
    assert RUNTIME_HOOK_BUCKETS_MS == (0.01, 0.04, 0.16, 0.64, 2.56, 10.24, 40.96, 163.84)
    registry = CollectorRegistry()
    metrics = HookMetrics(registry, koordlet=KoordletHookMetrics(registry, node="n1"))
    metrics.observe_plugin("batchresource", "PreRunPodSandbox", 0.00005)            # 0.05 ms, ok
    metrics.observe_plugin("batchresource", "PreRunPodSandbox", 0.003, "OSError")   # 3 ms, failed
    ok = {"node": "n1", "hook": "batchresource", "stage": "PreRunPodSandbox", "status": "succeeded"}
    failed = dict(ok, status="failed")

    def bucket(labels: dict[str, str], le: str) -> Any:
        return registry.get_sample_value(f"{HOOK}_bucket", dict(labels, le=le))

    assert bucket(ok, "0.04") == 0 and bucket(ok, "0.16") == 1
    assert registry.get_sample_value(f"{HOOK}_sum", ok) == 0.05
    assert bucket(failed, "2.56") == 0 and bucket(failed, "10.24") == 1
    assert registry.get_sample_value(f"{HOOK}_count", failed) == 1
    # the hookserver_* histogram is fed by the same call, in seconds
    assert registry.get_sample_value(
        "hookserver_hook_plugin_duration_seconds_count", {"plugin": "batchresource", "stage": "PreRunPodSandbox"}) == 2


def test_hook_metrics_without_koordlet_companion_still_work() -> None:
    registry = CollectorRegistry()
    HookMetrics(registry).observe_plugin("p", "s", 0.001)
    assert registry.get_sample_value(f"{HOOK}_count", {"node": "n", "hook": "p", "stage": "s",
                                                      "status": "succeeded"}) is None


def _store(clock: Clock) -> StateStore:
    store = StateStore(clock=clock)
    store.upsert_pod(PodRecord(uid="u-ls", namespace="a", name="web", qos_class="LS"))
    store.upsert_pod(PodRecord(uid="u-be1", namespace="b", name="job1", qos_class="BE"))
    store.upsert_pod(PodRecord(uid="u-be2", namespace="b", name="job2", qos_class="BE"))
    store.upsert_pod(PodRecord(uid="u-none", namespace="c", name="plain"))
    series = store.series
    series.append(series_key("node_cpu_usage"), 3.5, ts=clock.now, interval_s=1)
    series.append(series_key("node_memory_usage"), 8e9, ts=clock.now, interval_s=1)
    for uid, cpu, mem in (("u-ls", 1.25, 1e9), ("u-be1", 0.5, 2e8), ("u-be2", 0.25, 1e8), ("u-none", 0.1, 5e7),
                          ("u-gone", 9.0, 9e9)):
        series.append(series_key("pod_cpu_usage", pod=uid), cpu, ts=clock.now, interval_s=1)
        series.append(series_key("pod_memory_usage", pod=uid), mem, ts=clock.now, interval_s=1)
    series.append(series_key("host_app_cpu_usage", app="nginx", qos="LS", priority="koord-prod"), 0.75,
                  ts=clock.now, interval_s=1)
    series.append(series_key("host_app_memory_usage", app="nginx", qos="LS", priority="koord-prod"), 3e8,
                  ts=clock.now, interval_s=1)
    return store


def test_store_series_under_koordlet_names_and_usage_by_qos() -> None:
    clock = Clock(1000.0)
    registry = CollectorRegistry()
    nri = {"state": "ready", "reconnects": 3}
    register_store_series(registry, _store(clock), node="n1", started_at=900.0, nri_status=lambda: nri)
    get = registry.get_sample_value
    assert get("koordlet_start_time", {"node": "n1"}) == 900.0
    assert get("koordlet_node_used_cpu_cores", {"node": "n1"}) == 3.5
    assert get("koordlet_node_used_memory_bytes", {"node": "n1"}) == 8e9
    app = {"node": "n1", "host_application_name": "nginx", "priority_class": "koord-prod", "qos": "LS"}
    assert get("koordlet_host_application_resource_usage", dict(app, resource="cpu")) == 0.75
    assert get("koordlet_host_application_resource_usage", dict(app, resource="memory")) == 3e8
    # BE = 0.5 + 0.25; a pod the store does not know (gone) counts as NONE with the unlabelled one
    assert get("hookserver_qos_used_cpu_cores", {"node": "n1", "qos": "BE"}) == 0.75
    assert get("hookserver_qos_used_cpu_cores", {"node": "n1", "qos": "LS"}) == 1.25
    assert get("hookserver_qos_used_cpu_cores", {"node": "n1", "qos": "NONE"}) == 9.1
    assert get("hookserver_qos_used_memory_bytes", {"node": "n1", "qos": "BE"}) == 3e8
    assert get("hookserver_nri_connection_state", {"node": "n1", "state": "ready"}) == 1.0
    assert get("hookserver_nri_connection_state", {"node": "n1", "state": "backoff"}) == 0.0
    assert get("hookserver_nri_reconnects_total", {"node": "n1"}) == 3.0
    nri["state"] = "backoff"
    assert get("hookserver_nri_connection_state", {"node": "n1", "state": "ready"}) == 0.0
    assert get("hookserver_nri_connection_state", {"node": "n1", "state": "backoff"}) == 1.0


def test_stale_samples_are_not_exported_and_nri_off_says_disabled() -> None:
    clock = Clock(1000.0)
    registry = CollectorRegistry()
    register_store_series(registry, _store(clock), node="n1", started_at=900.0)
    clock.now += 6.0  # interval 1 s: stale after max(3 * 1, 5) s
    get = registry.get_sample_value
    assert get("koordlet_node_used_cpu_cores", {"node": "n1"}) is None
    assert get("hookserver_qos_used_cpu_cores", {"node": "n1", "qos": "BE"}) is None
    assert get("hookserver_nri_connection_state", {"node": "n1", "state": "disabled"}) == 1.0
    text = generate_latest(registry).decode()
    assert "koordlet_start_time" in text


def test_a_second_registration_of_a_koordlet_family_is_refused() -> None:
    """Two areas claiming the same koordlet name must fail at startup, not export two conflicting series."""
    registry = CollectorRegistry()
    register_store_series(registry, StateStore(), node="n", started_at=0.0)
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        register_store_series(registry, StateStore(), node="n", started_at=0.0)


def test_batch_allocatable_as_koordlet_records_it() -> None:
    """koordlet: batch-cpu as Value() with unit integer (milli-cores), batch-memory in bytes, 0 when absent."""
    store = StateStore()
    registry = CollectorRegistry()
    register_store_series(registry, store, node="n1", started_at=0.0)
    get = registry.get_sample_value
    cpu = {"node": "n1", "resource": "kubernetes.io/batch-cpu", "unit": "integer"}
    memory = {"node": "n1", "resource": "kubernetes.io/batch-memory", "unit": "byte"}
    assert get("koordlet_node_resource_allocatable", cpu) is None  # no node known yet
    store.set_node(NodeRecord(name="n1", allocatable={"kubernetes.io/batch-cpu": "12500",
                                                       "kubernetes.io/batch-memory": "20Gi", "cpu": "16"}))
    assert get("koordlet_node_resource_allocatable", cpu) == 12500.0
    assert get("koordlet_node_resource_allocatable", memory) == 20 * 2**30
    store.set_node(NodeRecord(name="n1", allocatable={"kubernetes.io/batch-cpu": "lots"}))
    assert get("koordlet_node_resource_allocatable", cpu) is None      # malformed: left out, scrape still works
    assert get("koordlet_node_resource_allocatable", memory) == 0.0    # absent: 0
