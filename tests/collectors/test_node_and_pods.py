"""Node and pod/container usage from scripted counter progressions, on cgroup v1 and v2: exact rates."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hookserver.store.state import StateStore
from hookserver.store.timeseries import series_key
from tests.collectors.fakehost import make_scheduler
from tests.collectors.fakehost import FakeClock, FakeHost, make_container, make_pod

GiB_KB = 1024 * 1024
NODE = (("node", "node-1"),)
POD_DIR = "kubepods/burstable/poduid-a"


def _last(store: StateStore, metric: str, **labels: str) -> float | None:
    last = store.series.last(series_key(metric, **labels))
    return None if last is None else last[1]


def test_node_cpu_from_proc_stat_deltas_and_memory_from_meminfo(host: FakeHost, clock: FakeClock, store: StateStore) -> None:
    host.set_proc_stat(user=1000, system=500, idle=8000, iowait=300, irq=10, softirq=20, steal=5, ncpu=4)
    host.set_meminfo(total_kb=16 * GiB_KB, free_kb=4 * GiB_KB, available_kb=10 * GiB_KB, buffers_kb=1024, cached_kb=2048)
    sched = make_scheduler(host, clock, store)
    sched.run_once()
    assert _last(store, "node_cpu_usage", node="node-1") is None  # first reading only primes
    assert _last(store, "node_memory_usage", node="node-1") == 6 * GiB_KB * 1024
    assert _last(store, "node_memory_usage_with_cache", node="node-1") == 12 * GiB_KB * 1024
    clock.advance(1)
    # Δbusy = user 150 + system 50 + irq 5 + softirq 10 + steal 5 = 220 (guest is inside user, not added again);
    # Δtotal = 220 + idle 150 + iowait 30 = 400.
    host.set_proc_stat(user=1150, system=550, idle=8150, iowait=330, irq=15, softirq=30, steal=10, guest=999, ncpu=4)
    host.set_meminfo(total_kb=16 * GiB_KB, free_kb=3 * GiB_KB, available_kb=9 * GiB_KB)
    sched.run_once()
    assert _last(store, "node_cpu_usage", node="node-1") == 220 / 400 * 4
    assert _last(store, "node_memory_usage", node="node-1") == 7 * GiB_KB * 1024
    assert _last(store, "node_memory_total", node="node-1") == 16 * GiB_KB * 1024


def test_node_counter_going_backwards_gives_no_sample(host: FakeHost, clock: FakeClock, store: StateStore) -> None:
    host.set_proc_stat(user=1000, system=0, idle=1000)
    host.set_meminfo(total_kb=100, free_kb=50, available_kb=None, buffers_kb=10, cached_kb=20)
    sched = make_scheduler(host, clock, store)
    sched.run_once()
    clock.advance(1)
    host.set_proc_stat(user=10, system=0, idle=10)  # e.g. a restored /proc snapshot: never negative usage
    sched.run_once()
    assert store.series.keys("node_cpu_usage") == []
    # Without MemAvailable (kernel < 3.14): available = free + buffers + cached.
    assert _last(store, "node_memory_usage", node="node-1") == (100 - 80) * 1024


def test_malformed_proc_stat_is_a_counted_failure_naming_the_file(host: FakeHost, clock: FakeClock, store: StateStore) -> None:
    (host.proc / "stat").write_text("cpu  1 2 x 4\n")
    host.set_meminfo(total_kb=100, free_kb=50, available_kb=60)
    sched = make_scheduler(host, clock, store)
    sched.run_once()
    state = sched.status()["collectors"]["node_resource"]
    assert state["failures"] == 1
    assert str(host.proc / "stat") in state["last_error"]
    assert "non-integer" in state["last_error"]
    # The rest of the cycle still ran.
    assert sched.status()["collectors"]["pod_resource"]["runs"] == 1


def _pod_world(host: FakeHost, store: StateStore) -> None:
    store.upsert_pod(make_pod("uid-a", cgroup_parent="/" + POD_DIR, qos_class="LS", priority_class="koord-prod"))
    store.upsert_container(make_container("cid-1", "uid-a", cgroup_parent="/" + POD_DIR))
    store.upsert_container(make_container("containerd://cid-2", "uid-a", name="sidecar", cgroup_parent="/" + POD_DIR))


def test_pod_and_container_cpu_rates_and_memory(host: FakeHost, clock: FakeClock, store: StateStore) -> None:
    _pod_world(host, store)
    host.set_cpu_usage(POD_DIR, 5_000_000_000)
    host.set_cpu_usage(POD_DIR + "/cid-1", 3_000_000_000)
    host.set_cpu_usage(POD_DIR + "/cid-2", 1_000_000_000)
    host.set_memory(POD_DIR, active_anon=4000, inactive_anon=1000, unevictable=500, active_file=30000, inactive_file=10000, current=50000)
    host.set_memory(POD_DIR + "/cid-1", active_anon=3000, inactive_anon=0, current=3500)
    sched = make_scheduler(host, clock, store)
    sched.run_once()
    pod = {"pod": "uid-a", "qos": "LS", "priority": "koord-prod"}
    assert _last(store, "pod_cpu_usage", **pod) is None
    clock.advance(2.0)
    host.set_cpu_usage(POD_DIR, 8_000_000_000)  # +3 s of CPU in 2 s = 1.5 cores
    host.set_cpu_usage(POD_DIR + "/cid-1", 4_000_000_000)  # 0.5 cores
    host.set_cpu_usage(POD_DIR + "/cid-2", 1_500_000_000)  # 0.25 cores
    sched.run_once()
    assert _last(store, "pod_cpu_usage", **pod) == 1.5
    assert _last(store, "container_cpu_usage", container="cid-1", **pod) == 0.5
    assert _last(store, "container_cpu_usage", container="containerd://cid-2", **pod) == 0.25
    assert _last(store, "pod_memory_usage", **pod) == 5500  # anon + unevictable
    with_cache = 50000 if host.version == 2 else 5500 + 40000  # v2: memory.current; v1: + file LRU lists
    assert _last(store, "pod_memory_usage_with_cache", **pod) == with_cache
    assert _last(store, "container_memory_usage", container="cid-1", **pod) == 3000


def test_pod_dir_is_derived_when_the_pod_has_no_cgroup_parent(host: FakeHost, clock: FakeClock, store: StateStore) -> None:
    store.upsert_pod(make_pod("uid-be", kube_qos="BestEffort", qos_class="BE"))
    store.upsert_pod(make_pod("uid-g", kube_qos="Guaranteed"))
    store.upsert_pod(make_pod("uid-probe"))  # kube QoS unknown: the resolver probes the three QoS dirs
    host.set_memory("kubepods/besteffort/poduid-be", active_anon=1, inactive_anon=0)
    host.set_memory("kubepods/poduid-g", active_anon=2, inactive_anon=0)
    host.set_memory("kubepods/burstable/poduid-probe", active_anon=3, inactive_anon=0)
    sched = make_scheduler(host, clock, store)
    sched.run_once()
    assert _last(store, "pod_memory_usage", pod="uid-be", qos="BE") == 1
    assert _last(store, "pod_memory_usage", pod="uid-g", qos="LS") == 2
    assert _last(store, "pod_memory_usage", pod="uid-probe") == 3


def test_containers_only_the_pod_statuses_list_are_collected(host: FakeHost, clock: FakeClock, store: StateStore) -> None:
    # A pod the kubelet started while the agent was away: no hook ever told us its containers, the informer's
    # container statuses did. Its containers are measured like hooked ones (and a hooked one is not doubled).
    pod = replace(
        make_pod("uid-a", cgroup_parent="/" + POD_DIR, qos_class="LS", priority_class="koord-prod"),
        container_ids={"app": "containerd://cid-1", "sidecar": "containerd://cid-2"},
    )
    store.upsert_pod(pod)
    store.upsert_container(make_container("cid-1", "uid-a", cgroup_parent="/" + POD_DIR))
    host.set_cpu_usage(POD_DIR + "/cid-1", 1_000_000_000)
    host.set_cpu_usage(POD_DIR + "/cid-2", 1_000_000_000)
    sched = make_scheduler(host, clock, store)
    sched.run_once()
    clock.advance(2.0)
    host.set_cpu_usage(POD_DIR + "/cid-1", 2_000_000_000)  # 0.5 cores
    host.set_cpu_usage(POD_DIR + "/cid-2", 1_500_000_000)  # 0.25 cores
    sched.run_once()
    labels = {"pod": "uid-a", "qos": "LS", "priority": "koord-prod"}
    assert _last(store, "container_cpu_usage", container="cid-1", **labels) == 0.5
    assert _last(store, "container_cpu_usage", container="containerd://cid-2", **labels) == 0.25
    assert len(store.series.keys("container_cpu_usage")) == 2


def test_systemd_driver_paths(host: FakeHost, clock: FakeClock, store: StateStore) -> None:
    store.upsert_pod(make_pod("ab-cd", kube_qos="Burstable"))
    store.upsert_container(make_container("cid", "ab-cd"))
    slice_dir = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podab_cd.slice"
    host.set_memory(slice_dir, active_anon=7, inactive_anon=0)
    host.set_memory(slice_dir + "/cri-containerd-cid.scope", active_anon=5, inactive_anon=0)
    sched = make_scheduler(host, clock, store, driver="systemd")
    sched.run_once()
    assert _last(store, "pod_memory_usage", pod="ab-cd", qos="LS") == 7
    assert _last(store, "container_memory_usage", pod="ab-cd", container="cid", qos="LS") == 5


def test_crafted_cgroup_parent_is_refused_and_others_still_collected(host: FakeHost, clock: FakeClock, store: StateStore) -> None:
    _pod_world(host, store)
    store.upsert_pod(make_pod("evil", cgroup_parent="/kubepods/../../etc"))
    host.set_memory(POD_DIR, active_anon=10, inactive_anon=0)
    sched = make_scheduler(host, clock, store)
    sched.run_once()
    problems = sched.status()["targets_problems"]
    assert len(problems) == 1 and "evil" in problems[0] and ".." in problems[0]
    assert _last(store, "pod_memory_usage", pod="uid-a", qos="LS", priority="koord-prod") == 10
    assert not store.series.select("pod_memory_usage", {"pod": "evil"})


def test_a_vanished_or_recreated_cgroup_loses_nothing_else(host: FakeHost, clock: FakeClock, store: StateStore) -> None:
    _pod_world(host, store)
    store.upsert_pod(make_pod("uid-b", cgroup_parent="/kubepods/burstable/poduid-b"))
    host.set_cpu_usage(POD_DIR, 10_000_000_000)
    host.set_cpu_usage("kubepods/burstable/poduid-b", 1_000_000_000)
    sched = make_scheduler(host, clock, store, containers=False)
    sched.run_once()
    clock.advance(1)
    host.remove_cgroup("kubepods/burstable/poduid-b")
    host.set_cpu_usage(POD_DIR, 1_000)  # recreated: counter restarted, must re-prime, not go negative
    sched.run_once()
    state = sched.status()["collectors"]["pod_resource"]
    assert state["failures"] == 0 and state["missing_total"] == 1
    assert store.series.keys("pod_cpu_usage") == []
    clock.advance(1)
    host.set_cpu_usage(POD_DIR, 250_001_000)
    sched.run_once()
    assert _last(store, "pod_cpu_usage", pod="uid-a", qos="LS", priority="koord-prod") == pytest.approx(0.25)


def test_garbage_in_a_pod_file_names_the_file_and_skips_only_that_pod(host_v1: FakeHost, clock: FakeClock, store: StateStore) -> None:
    host = host_v1
    _pod_world(host, store)
    store.upsert_pod(make_pod("uid-b", cgroup_parent="/kubepods/burstable/poduid-b"))
    host.write_raw("cpuacct", "kubepods/burstable/poduid-b", "cpuacct.usage", "garbage\n")
    host.set_memory(POD_DIR, active_anon=10, inactive_anon=0)
    sched = make_scheduler(host, clock, store, containers=False)
    sched.run_once()
    state = sched.status()["collectors"]["pod_resource"]
    assert state["failures"] == 0 and state["read_errors_total"] == 1
    assert "poduid-b/cpuacct.usage" in state["last_error"] and "garbage" in state["last_error"]
    assert _last(store, "pod_memory_usage", pod="uid-a", qos="LS", priority="koord-prod") == 10
