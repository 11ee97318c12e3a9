"""Throttling, system, BE, host applications, PSI, page cache and node info, from scripted trees."""

from __future__ import annotations

from typing import Any

import pytest

from collectors.host_application import host_applications
from collectors.node_info import NODE_TOPOLOGY_KEY
from collectors.pod_throttled import throttled_ratio
from collectors.system_resource import system_usage
from hookserver.system.cgroupnames import CgroupDriver
from hookserver.store.state import StateStore
from hookserver.store.timeseries import series_key
from hookserver.system.topology import NodeTopology
from tests.collectors.fakehost import make_scheduler
from tests.collectors.fakehost import FakeClock, FakeHost, make_container, make_pod

POD = "kubepods/burstable/poduid-a"
BE_POD = "kubepods/besteffort/poduid-b"
NODE = {"node": "node-1"}


def _last(store: StateStore, metric: str, **labels: str) -> float | None:
    last = store.series.last(series_key(metric, **labels))
    return None if last is None else last[1]


def test_throttled_ratio_is_the_delta_ratio(host: FakeHost, clock: FakeClock, store: StateStore) -> None:
    store.upsert_pod(make_pod("uid-a", cgroup_parent="/" + POD, qos_class="LS"))
    store.upsert_container(make_container("c1", "uid-a", cgroup_parent="/" + POD))
    host.set_cpu_usage(POD, 1, nr_periods=1000, nr_throttled=100)
    host.set_cpu_usage(POD + "/c1", 1, nr_periods=10, nr_throttled=0)
    sched = make_scheduler(host, clock, store)
    sched.run_once()
    clock.advance(1)
    host.set_cpu_usage(POD, 2, nr_periods=1040, nr_throttled=130)  # 30 of 40 periods throttled
    host.set_cpu_usage(POD + "/c1", 2, nr_periods=10, nr_throttled=0)  # no period elapsed
    sched.run_once()
    assert _last(store, "pod_cpu_throttled_ratio", pod="uid-a", qos="LS") == 0.75
    assert _last(store, "container_cpu_throttled_ratio", pod="uid-a", container="c1", qos="LS") == 0.0


def test_throttled_ratio_function() -> None:
    assert throttled_ratio((100, 10), (200, 60)) == 0.5
    assert throttled_ratio((100, 10), (100, 10)) == 0.0
    assert throttled_ratio((100, 10), (50, 10)) is None  # counters reset


def test_system_is_node_minus_pods_minus_host_apps_never_negative() -> None:
    assert system_usage(4.0, 1.5, 0.5) == 2.0
    assert system_usage(1.0, 1.5, 0.5) == 0.0


def _usage_world(host: FakeHost, store: StateStore, node_busy: tuple[int, int]) -> None:
    host.set_proc_stat(user=node_busy[0], system=0, idle=node_busy[1], ncpu=4)
    host.set_meminfo(total_kb=1000, free_kb=100, available_kb=400)  # node memory used 600 KiB


def test_system_and_be_resources(host: FakeHost, clock: FakeClock, store: StateStore) -> None:
    store.upsert_pod(make_pod("uid-a", cgroup_parent="/" + POD, qos_class="LS"))
    store.upsert_pod(make_pod("uid-b", cgroup_parent="/" + BE_POD, qos_class="BE", batch_cpu={"app": "2000", "side": "500"}))
    store.set_node_slo({"spec": {"hostApplications": [{"name": "nginx", "qos": "LS", "cgroupPath": {"parentDir": "host-latency-sensitive", "relativePath": "nginx"}}]}})
    app = "host-latency-sensitive/nginx"
    _usage_world(host, store, (1000, 1000))
    host.set_cpu_usage(POD, 0)
    host.set_cpu_usage(BE_POD, 0)
    host.set_cpu_usage(app, 0)
    host.set_cpu_usage("kubepods/besteffort", 0)
    host.set_cpu_limit("kubepods/besteffort", quota_us=300_000, period_us=100_000, cpus="0-3")
    host.set_memory(POD, active_anon=100 * 1024, inactive_anon=0)
    host.set_memory(BE_POD, active_anon=50 * 1024, inactive_anon=0)
    host.set_memory(app, active_anon=20 * 1024, inactive_anon=0)
    sched = make_scheduler(host, clock, store, containers=False)
    sched.run_once()
    assert store.series.keys("system_cpu_usage") == []  # pods have no rate yet: not combined
    clock.advance(1)
    _usage_world(host, store, (1300, 1100))  # Δbusy 300 of Δtotal 400 on 4 CPUs = 3 cores
    host.set_cpu_usage(POD, 1_000_000_000)  # 1 core
    host.set_cpu_usage(BE_POD, 500_000_000)  # 0.5 core
    host.set_cpu_usage(app, 250_000_000)  # 0.25 core
    host.set_cpu_usage("kubepods/besteffort", 600_000_000)  # BE QoS dir (pods + sandboxes): 0.6 core
    sched.run_once()
    assert _last(store, "node_cpu_usage", **NODE) == 3.0
    assert _last(store, "host_app_cpu_usage", app="nginx", qos="LS") == 0.25
    assert _last(store, "host_app_memory_usage", app="nginx", qos="LS") == 20 * 1024
    assert _last(store, "system_cpu_usage", **NODE) == 3.0 - 1.5 - 0.25
    assert _last(store, "system_memory_usage", **NODE) == (600 - 150 - 20) * 1024
    assert _last(store, "be_cpu_usage", **NODE) == pytest.approx(0.6)
    assert _last(store, "be_cpu_request", **NODE) == 2.5
    assert _last(store, "be_cpu_real_limit", **NODE) == 3.0  # min(quota 3 cores, cpuset 4)
    host.set_cpu_limit("kubepods/besteffort", quota_us=-1, cpus="0-1")
    clock.advance(1)
    sched.run_once()
    assert _last(store, "be_cpu_real_limit", **NODE) == 2.0  # cpuset only
    host.set_cpu_limit("kubepods/besteffort", quota_us=-1, cpus="")
    clock.advance(1)
    sched.run_once()
    assert _last(store, "be_cpu_real_limit", **NODE) == 4.0  # nothing suppresses BE: the node's CPUs


def test_host_applications_from_nodeslo_shapes() -> None:
    class App:
        def __init__(self, **kw: Any) -> None:
            self.__dict__.update(kw)

    slo = {
        "hostApplications": [
            {"name": "nginx", "qos": "LS"},
            {"name": "batch", "qos": "BE", "cgroupPath": {"base": "KubepodsBesteffort", "parentDir": "host", "relativePath": "x"}},
            {"name": "bad", "cgroupPath": {"relativePath": "../../etc"}},
            {"qos": "LS"},
            {"name": "odd", "cgroupPath": {"base": "Elsewhere"}},
        ]
    }
    apps, problems = host_applications(slo, CgroupDriver.SYSTEMD)
    assert [(a.name, a.rel_dir) for a in apps] == [
        ("nginx", "host-latency-sensitive/nginx"),
        ("batch", "kubepods.slice/kubepods-besteffort.slice/host/x"),
    ]
    assert len(problems) == 3 and any("'..'" in p for p in problems) and any("Elsewhere" in p for p in problems)
    model = App(spec=App(host_applications=[App(name="db", qos="LSR", cgroup_path=None)]))
    apps, problems = host_applications(model, CgroupDriver.CGROUPFS)
    assert [(a.name, a.qos, a.rel_dir) for a in apps] == [("db", "LSR", "host-latency-sensitive/db")]
    assert host_applications(None, CgroupDriver.CGROUPFS) == ([], [])
    # koordinator's GetHostAppCgroupRelativePath: a cgroupPath fills nothing in (no default parentDir), and a
    # SYSTEM application without one sits at the root under its name; the reconciler writes its cpuset there too
    apps, _ = host_applications({"hostApplications": [{"name": "a", "cgroupPath": {"relativePath": "yarn/a"}},
                                                      {"name": "s", "qos": "SYSTEM"}]}, CgroupDriver.CGROUPFS)
    assert [a.rel_dir for a in apps] == ["yarn/a", "s"]


def test_psi_node_and_v2_cgroups(host: FakeHost, clock: FakeClock, store: StateStore) -> None:
    store.upsert_pod(make_pod("uid-a", cgroup_parent="/" + POD, qos_class="LS"))
    for resource, base in (("cpu", 1.0), ("memory", 2.0), ("io", 3.0)):
        host.set_pressure(resource, (base, base + 0.5, base + 0.25, 100), (base / 2, 0.0, 0.0, 10))
    host.set_cgroup_pressure(POD, "cpu", (12.5, 5.0, 1.0, 99), (7.25, 1.0, 0.5, 33))
    host.set_cgroup_pressure(POD, "memory", (0.5, 0.0, 0.0, 1), (0.25, 0.0, 0.0, 1))
    sched = make_scheduler(host, clock, store)
    sched.run_once()
    assert len(store.series.keys("node_psi")) == 3 * 2 * 3
    assert _last(store, "node_psi", resource="memory", degree="some", window="avg60", **NODE) == 2.5
    assert _last(store, "node_psi", resource="io", degree="full", window="avg10", **NODE) == 1.5
    if host.version == 2:
        assert len(store.series.keys("pod_psi")) == 2 * 2  # cpu, memory x some, full; avg10 only
        assert _last(store, "pod_psi", pod="uid-a", qos="LS", resource="cpu", degree="full", window="avg10") == 7.25
    else:
        assert store.series.keys("pod_psi") == []


def test_psi_disabled_with_reason_when_the_kernel_has_none(host_v1: FakeHost, clock: FakeClock, store: StateStore) -> None:
    sched = make_scheduler(host_v1, clock, store)
    sched.run_once()
    psi = sched.status()["collectors"]["psi"]
    assert psi["enabled"] is False and "PSI" in psi["disabled_reason"] and psi["runs"] == 0


def test_page_cache_when_enabled(host: FakeHost, clock: FakeClock, store: StateStore) -> None:
    store.upsert_pod(make_pod("uid-a", cgroup_parent="/" + POD, qos_class="LS"))
    host.set_meminfo(total_kb=1000, free_kb=100, available_kb=400, buffers_kb=10, cached_kb=200)
    host.set_memory(POD, active_anon=1, inactive_anon=1, active_file=3000, inactive_file=1000)
    off = make_scheduler(host, clock, store)
    off.run_once()
    assert off.status()["collectors"]["page_cache"]["disabled_reason"] == "disabled in settings"
    assert store.series.keys("node_page_cache") == []
    on = make_scheduler(host, clock, store, page_cache={"enabled": True})
    on.run_once()
    assert _last(on.store, "node_page_cache", **NODE) == 210 * 1024
    assert _last(on.store, "pod_page_cache", pod="uid-a", qos="LS") == 4000


def test_node_info_topology_and_numa(host_v1: FakeHost, clock: FakeClock, store: StateStore) -> None:
    # 2 sockets x 2 cores x 2 threads, one NUMA node and one L3 per socket.
    cpus = [(c, (c // 2) % 2, c // 4, c // 4, c // 4) for c in range(8)]
    host_v1.set_topology(cpus, {0: (8 * 1024 * 1024, 3 * 1024 * 1024), 1: (8 * 1024 * 1024, 7 * 1024 * 1024)})
    sched = make_scheduler(host_v1, clock, store)
    sched.run_once()
    topo = store.series.get_static(NODE_TOPOLOGY_KEY)
    assert isinstance(topo, NodeTopology)
    assert (topo.num_cpus, topo.num_cores, topo.num_sockets, topo.num_numa_nodes) == (8, 4, 2, 2)
    assert [(c.cpu, c.core, c.socket, c.numa_node, c.l3) for c in topo.cpus] == cpus
    assert _last(store, "node_cpu_cores", **NODE) == 4
    assert _last(store, "numa_memory_used", numa="1", **NODE) == 1024 * 1024 * 1024
    assert _last(store, "numa_memory_total", numa="0", **NODE) == 8 * 1024 * 1024 * 1024


def test_a_bad_batch_cpu_quantity_costs_only_the_request_sum(host_v2: FakeHost, clock: FakeClock, store: StateStore) -> None:
    store.upsert_pod(make_pod("uid-b", cgroup_parent="/" + BE_POD, qos_class="BE", batch_cpu={"app": "lots"}))
    store.upsert_pod(make_pod("uid-c", cgroup_parent="/kubepods/besteffort/poduid-c", qos_class="BE", batch_cpu={"app": "1500"}))
    host_v2.set_memory(BE_POD, active_anon=8, inactive_anon=0)
    sched = make_scheduler(host_v2, clock, store)
    sched.run_once()
    problems = sched.status()["targets_problems"]
    assert len(problems) == 1 and "uid-b" in problems[0] and "batch-cpu" in problems[0] and "'lots'" in problems[0]
    assert _last(store, "pod_memory_usage", pod="uid-b", qos="BE") == 8
    assert _last(store, "be_cpu_request", **NODE) == 1.5
