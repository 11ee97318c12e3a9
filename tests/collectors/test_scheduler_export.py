"""The scheduler's loops and status, failure isolation, and the Prometheus export."""

from __future__ import annotations

import asyncio
import time

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from collectors import CollectorSettings, build_collectors
from collectors.base import BaseCollector, CycleContext
from collectors.export import StoreExporter
from collectors.scheduler import CollectorScheduler
from collectors.targets import TargetResolver
from hookserver.config import Settings
from hookserver.executor.settings import CgroupSettings
from hookserver.system.cgroupnames import CgroupDriver, ContainerRuntime
from hookserver.store.state import StateStore
from hookserver.store.timeseries import series_key
from hookserver.system.roots import SystemRoots
from tests.collectors.fakehost import make_scheduler
from tests.collectors.fakehost import FakeClock, FakeHost, make_container, make_pod

POD = "kubepods/burstable/poduid-a"


def _samples(registry: CollectorRegistry) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out


def test_export_uses_koordlet_style_names_labels_and_drops_stale_series(host_v1: FakeHost, clock: FakeClock, store: StateStore) -> None:
    host = host_v1
    store.upsert_pod(make_pod("uid-a", name="web-0", namespace="shop", cgroup_parent="/" + POD, qos_class="LS", priority_class="koord-prod"))
    store.upsert_container(make_container("cid-1", "uid-a", name="nginx", cgroup_parent="/" + POD))
    host.set_proc_stat(user=0, system=0, idle=0, ncpu=2)
    host.set_meminfo(total_kb=1000, free_kb=100, available_kb=250)
    host.set_cpu_usage(POD, 0)
    host.set_cpu_usage(POD + "/cid-1", 0)
    host.set_memory(POD, active_anon=4096, inactive_anon=0)
    registry = CollectorRegistry()
    sched = make_scheduler(host, clock, store, registry=registry)
    sched.run_once()
    clock.advance(1)
    host.set_proc_stat(user=50, system=50, idle=100, ncpu=2)
    host.set_cpu_usage(POD, 500_000_000)
    sched.run_once()
    got = _samples(registry)
    assert got["hookserver_node_used_cpu_cores"] == [({"node": "node-1"}, 1.0)]
    assert got["hookserver_node_used_memory_bytes"] == [({"node": "node-1"}, 750 * 1024.0)]
    pod_labels = {
        "node": "node-1", "pod_uid": "uid-a", "pod_name": "web-0", "pod_namespace": "shop", "qos": "LS",
        "priority_class": "koord-prod",
    }
    assert got["hookserver_pod_used_cpu_cores"] == [(pod_labels, 0.5)]
    assert got["hookserver_container_used_cpu_cores"] == [(pod_labels | {"container_id": "cid-1", "container_name": "nginx"}, 0.0)]
    enabled = {labels["collector"]: (labels["reason"], value) for labels, value in got["hookserver_collector_enabled"]}
    assert enabled["pod_resource"] == ("", 1.0)
    assert enabled["page_cache"] == ("disabled in settings", 0.0)
    runs = {labels["collector"]: value for labels, value in got["hookserver_collector_runs_total"]}
    assert runs["node_resource"] == 2.0
    durations = {labels["collector"]: value for labels, value in got["hookserver_collector_run_duration_seconds_count"]}
    assert durations["pod_resource"] == 2.0
    assert got["hookserver_timeseries_series"][0][1] == len(store.series)
    # A minute later, with no new samples, nothing measured is exported as if it were current.
    clock.advance(60)
    later = _samples(registry)
    assert "hookserver_pod_used_cpu_cores" not in later and "hookserver_node_used_cpu_cores" not in later
    assert "hookserver_collector_runs_total" in later


def test_a_second_exporter_claiming_the_same_names_is_refused(store: StateStore) -> None:
    registry = CollectorRegistry()
    registry.register(StoreExporter(store, node_name="n"))
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        registry.register(StoreExporter(store, node_name="n"))


class _Boom(BaseCollector):
    name = "node_info"

    def collect(self, ctx: CycleContext) -> None:
        raise RuntimeError("sysfs exploded")


class _Counter(BaseCollector):
    name = "node_resource"

    def __init__(self) -> None:
        self.calls = 0

    def collect(self, ctx: CycleContext) -> None:
        self.calls += 1
        ctx.emit("node_cpu_usage", ctx.node_labels, float(self.calls))


def _scheduler(store: StateStore, collectors: list[BaseCollector], **settings: object) -> CollectorScheduler:
    resolver = TargetResolver(driver=CgroupDriver.CGROUPFS, runtime=ContainerRuntime.CONTAINERD, exists=lambda _r: False)
    return CollectorScheduler(
        collectors, settings=CollectorSettings.model_validate(settings), store=store, resolver=resolver, node_name="n"  # type: ignore[arg-type]
    )


def test_one_failing_collector_does_not_stop_the_others() -> None:
    store = StateStore()
    counter = _Counter()
    sched = _scheduler(store, [_Boom(), counter], node_info={"interval_s": 1.0})
    sched.run_once()
    sched.run_once()
    status = sched.status()["collectors"]
    assert status["node_info"]["failures"] == 2 and status["node_info"]["last_error"] == "RuntimeError: sysfs exploded"
    assert status["node_resource"]["failures"] == 0 and counter.calls == 2
    assert store.series.last(series_key("node_cpu_usage", node="n"))[1] == 2.0  # type: ignore[index]


class _BadProbe(_Counter):
    name = "gpu"

    def probe(self) -> str:
        raise OSError("driver wedged")


def test_a_probe_that_raises_disables_only_that_collector() -> None:
    sched = _scheduler(StateStore(), [_BadProbe(), _Counter()])
    sched.run_once()
    status = sched.status()["collectors"]
    assert status["gpu"]["enabled"] is False and status["gpu"]["disabled_reason"] == "probe failed: OSError: driver wedged"
    assert status["node_resource"]["runs"] == 1


def test_requirements_and_disabled_collectors_are_reported() -> None:
    from collectors.system_resource import SystemResourceCollector

    sched = _scheduler(StateStore(), [SystemResourceCollector(), _Counter()], pod_resource={"enabled": False})
    status = sched.status()["collectors"]
    assert status["system_resource"]["enabled"] is False
    assert "pod_resource" in status["system_resource"]["disabled_reason"]
    assert sched.groups() == {1.0: ("node_resource",)}


def test_run_loops_on_intervals_and_stops_promptly() -> None:
    store = StateStore()
    fast, slow = _Counter(), _Boom()
    sched = _scheduler(store, [fast, slow], node_resource={"interval_s": 0.02}, node_info={"interval_s": 0.2})

    async def main() -> float:
        stop = asyncio.Event()
        task = asyncio.create_task(sched.run(stop))
        deadline = time.monotonic() + 5
        while fast.calls < 5 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        stop.set()
        started = time.monotonic()
        await asyncio.wait_for(task, 2)
        return time.monotonic() - started

    stopped_in = asyncio.run(main())
    assert fast.calls >= 5
    status = sched.status()["collectors"]
    assert status["node_info"]["runs"] >= 1 and status["node_info"]["failures"] == status["node_info"]["runs"]
    assert status["node_resource"]["last_duration_s"] is not None
    assert stopped_in < 0.5
    assert len(store.series.points(series_key("node_cpu_usage", node="n"))) == fast.calls


def test_build_collectors_with_plain_settings_on_the_real_host() -> None:
    """The default wiring builds and runs one cycle on this machine without raising."""
    store = StateStore()
    registry = CollectorRegistry()
    sched = build_collectors(Settings(node_name="here", cgroup=CgroupSettings()), store=store, roots=SystemRoots(), registry=registry)
    sched.run_once()
    status = sched.status()
    assert status["cgroup_version"] in ("v1", "v2") and status["cgroup_driver"] in ("systemd", "cgroupfs")
    assert status["collectors"]["node_resource"]["failures"] == 0
    assert status["collectors"]["gpu"]["enabled"] in (True, False)
    if not status["collectors"]["gpu"]["enabled"]:
        assert status["collectors"]["gpu"]["disabled_reason"]
    assert store.series.last(series_key("node_memory_usage", node="here")) is not None
    sched.close()
