"""The snapshot builder: store pods, node and NodeSLO, the collectors' series (fresh only) and the BE tier's
cgroup files on fixture trees (v1 and v2)."""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType

import pytest

from collectors.names import METRICS
from hookserver.slo.model import NodeSLOSpec
from hookserver.store import StateStore
from hookserver.store.records import NodeRecord, PodRecord
from hookserver.store.timeseries import series_key
from hookserver.system.cgroupnames import CgroupDriver
from qos.snapshot import builder as readers
from qos.snapshot.builder import CgroupView, SnapshotBuilder, node_facts


def test_the_series_qos_reads_are_the_collectors_names() -> None:
    for name in readers.SERIES_READ:
        assert name in METRICS, name
    from collectors.node_info import NODE_TOPOLOGY_KEY

    assert readers.NODE_TOPOLOGY_KEY == NODE_TOPOLOGY_KEY


def _v1_tree(root: Path) -> None:
    tier = "kubepods/besteffort"
    for sub in ("cpu", "cpuset"):
        (root / sub / tier / "podx" / "c1").mkdir(parents=True)
        (root / sub / tier / "pody").mkdir(parents=True)
    (root / "cpuset" / tier / "cpuset.cpus").write_text("0-3,8\n")
    (root / "cpu" / tier / "cpu.cfs_quota_us").write_text("250000\n")
    (root / "cpu" / tier / "cpu.cfs_period_us").write_text("100000\n")


def _store(now: float = 1000.0) -> StateStore:
    clock = [now]
    store = StateStore(clock=lambda: clock[0])
    specs = MappingProxyType({"main": (MappingProxyType({"kubernetes.io/batch-cpu": "1500", "cpu": "250m"}), MappingProxyType({}))})
    store.upsert_pod(PodRecord(uid="u-be", namespace="ns", name="be", qos_class="BE", kube_qos="BestEffort",
                               container_specs=specs, priority=3))
    store.upsert_pod(PodRecord(uid="u-ls", namespace="ns", name="ls", qos_class="LS", kube_qos="Burstable",
                               deletion_timestamp="2026-01-01T00:00:00Z"))
    store.set_node(NodeRecord(
        name="n", capacity=MappingProxyType({"cpu": "8", "memory": "32Gi"}),
        allocatable=MappingProxyType({"cpu": "7500m", "memory": "30Gi", "kubernetes.io/batch-cpu": "3000"}),
        annotations=MappingProxyType({
            "node.koordinator.sh/reservation": json.dumps({"resources": {"cpu": "1"}, "reservedCPUs": "0"}),
            "kubelet.koordinator.sh/cpu-manager-policy": json.dumps({"policy": "static"}),
        }),
    ))
    store.set_node_slo(NodeSLOSpec.model_validate({"resourceUsedThresholdWithBE": {"enable": True, "cpuEvictTimeWindowSeconds": 10}}))
    s = store.series
    s.append(series_key("pod_cpu_usage", pod="u-be", qos="BE"), 1.25, ts=now - 0.5)
    s.append(series_key("pod_cpu_usage", pod="u-ls", qos="LS"), 2.0, ts=now - 30)  # stale: not used
    s.append(series_key("pod_memory_usage", pod="u-be", qos="BE"), 1e9, ts=now - 0.5)
    s.append(series_key("node_cpu_usage"), 4.0, ts=now - 1)
    s.append(series_key("node_memory_usage"), 20e9, ts=now - 1)
    s.append(series_key("host_app_cpu_usage", app="agent", qos="LS"), 0.2, ts=now - 1)
    for i in range(12):
        ts = now - 11 + i
        s.append(series_key("be_cpu_usage"), 1.0 + i * 0.1, ts=ts)
        s.append(series_key("be_cpu_request"), 5.0, ts=ts)
        s.append(series_key("be_cpu_real_limit"), 2.0, ts=ts)
    return store


def test_build_from_store_series_and_a_v1_fixture(tmp_path: Path) -> None:
    _v1_tree(tmp_path)
    view = CgroupView(hierarchy_root=lambda sub: str(tmp_path / sub), v2=False, driver=CgroupDriver.CGROUPFS)
    snap = SnapshotBuilder(_store(), cgroups=view, collect_interval_s=1.0).build(evicted=frozenset({"u-gone"}))
    be, ls = sorted(snap.pods, key=lambda p: p.name)
    assert (be.qos, be.cpu_usage_cores, be.memory_usage_bytes, be.batch_cpu_request_milli, be.cpu_request_milli) == (
        "BE", 1.25, 1e9, 1500, 250)
    assert be.cgroup_dirs == ("kubepods/besteffort/podu-be",) and not be.terminating
    assert ls.cpu_usage_cores is None and ls.terminating  # stale sample dropped; deletionTimestamp set
    assert snap.usage.cpu_cores == 4.0 and snap.usage.host_apps[0].cpu_usage_cores == 0.2
    assert snap.node is not None and snap.node.cpu_capacity_milli == 8000
    assert snap.node.reserved_cpu_milli == 1000 and snap.node.reserved_cpus == frozenset({0})
    assert snap.node.kubelet_cpu_manager_policy == "static" and snap.node.batch_cpu_allocatable_milli == 3000
    tier = snap.be_tier
    assert tier is not None and tier.cpuset == frozenset({0, 1, 2, 3, 8}) and tier.quota_us == 250000
    assert tier.cpuset_levels == (
        ("kubepods/besteffort",),
        ("kubepods/besteffort/podx", "kubepods/besteffort/pody"),
        ("kubepods/besteffort/podx/c1",),
    )
    # BE window 10 s (NodeSLO): samples at now-10 .. now → 11 samples, usage 1.1 .. 2.1 → avg 1.6 cores.
    assert snap.be.window_s == 10 and snap.be.count == 11
    assert snap.be.avg_usage_milli == pytest.approx(1600) and snap.be.avg_limit_milli == pytest.approx(2000)
    assert snap.be.last_usage_milli == pytest.approx(2100)


def test_evicted_pods_count_as_terminating(tmp_path: Path) -> None:
    snap = SnapshotBuilder(_store(), cgroups=None).build(evicted=frozenset({"u-be"}))
    assert next(p for p in snap.pods if p.uid == "u-be").terminating


def test_v2_fixture_reads_cpu_max(tmp_path: Path) -> None:
    tier = tmp_path / "kubepods.slice" / "kubepods-besteffort.slice"
    tier.mkdir(parents=True)
    (tier / "cpu.max").write_text("max 100000\n")
    (tier / "cpuset.cpus").write_text("0-7\n")
    view = CgroupView(hierarchy_root=lambda sub: str(tmp_path), v2=True, driver=CgroupDriver.SYSTEMD)
    snap = SnapshotBuilder(_store(), cgroups=view).build()
    assert snap.be_tier is not None and snap.be_tier.quota_us == -1 and snap.be_tier.dir == "kubepods.slice/kubepods-besteffort.slice"
    (tier / "cpu.max").write_text("300000 100000\n")
    snap = SnapshotBuilder(_store(), cgroups=view).build()
    assert snap.be_tier is not None and snap.be_tier.quota_us == 300000


def test_a_bad_request_quantity_costs_only_that_request(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = _store()
    bad = MappingProxyType({"main": (MappingProxyType({"kubernetes.io/batch-cpu": "lots"}), MappingProxyType({}))})
    store.upsert_pod(PodRecord(uid="u-bad", namespace="ns", name="bad", qos_class="BE", container_specs=bad))
    snap = SnapshotBuilder(store, cgroups=None).build()
    assert next(p for p in snap.pods if p.uid == "u-bad").batch_cpu_request_milli == 0
    assert "request not counted" in caplog.text


def test_node_facts_without_annotations() -> None:
    facts = node_facts(NodeRecord(name="n", capacity=MappingProxyType({"cpu": "4"})))
    assert (facts.cpu_capacity_milli, facts.cpu_allocatable_milli, facts.reserved_cpu_milli) == (4000, 4000, 0)
    assert facts.batch_cpu_allocatable_milli == -1 and facts.kubelet_cpu_manager_policy == "none"


def test_containers_with_their_dirs_and_spec(tmp_path: Path) -> None:
    from hookserver.store.records import ContainerRecord

    store = _store()
    store.upsert_container(ContainerRecord(id="containerd://abc123", pod_uid="u-be", name="main"))
    store.upsert_container(ContainerRecord(id="pending:x", pod_uid="u-be", name="late"))
    store.upsert_container(ContainerRecord(id="def456", pod_uid="u-be", name="side",
                                           cgroup_parent="/kubepods/besteffort/podu-be"))
    view = CgroupView(hierarchy_root=lambda sub: str(tmp_path / sub), v2=False, driver=CgroupDriver.CGROUPFS)
    be = next(p for p in SnapshotBuilder(store, cgroups=view).build().pods if p.uid == "u-be")
    assert [(c.name, c.cgroup_dir) for c in be.containers] == [
        ("main", "kubepods/besteffort/podu-be/abc123"), ("side", "kubepods/besteffort/podu-be/def456"),
    ]
    assert be.containers[0].requests["kubernetes.io/batch-cpu"] == "1500" and dict(be.containers[1].limits) == {}


def test_containers_the_pod_statuses_list_without_hooks(tmp_path: Path) -> None:
    """A pod the informer lists but whose hooks never ran here (started before the agent, or hooked
    elsewhere) has container IDs only in its statuses: CPU burst and memory QoS must see them too."""
    from hookserver.store.records import ContainerRecord
    from hookserver.system.cgroupnames import ContainerRuntime

    store = _store()
    ids = MappingProxyType({"main": "containerd://abc123", "side": "docker://def456"})
    store.upsert_pod(PodRecord(uid="u-ls", namespace="ns", name="web", qos_class="LS", kube_qos="Burstable",
                               container_ids=ids))
    store.upsert_container(ContainerRecord(id="abc123", pod_uid="u-ls", name="main"))  # hooked too: once
    view = CgroupView(hierarchy_root=lambda sub: str(tmp_path / sub), v2=False, driver=CgroupDriver.SYSTEMD,
                      runtime=ContainerRuntime.CONTAINERD)
    ls = next(p for p in SnapshotBuilder(store, cgroups=view).build().pods if p.uid == "u-ls")
    pod_dir = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podu_ls.slice"
    assert [(c.name, c.cgroup_dir) for c in ls.containers] == [
        ("main", f"{pod_dir}/cri-containerd-abc123.scope"),
        ("side", f"{pod_dir}/docker-def456.scope"),  # the ID's runtime names the scope, not the node's default
    ]


def test_the_daemon_gives_the_qos_snapshot_the_configured_runtime(tmp_path: Path) -> None:
    """The daemon built the QoS view without the runtime: on a docker or CRI-O systemd node every container
    dir the QoS reconcilers planned for was a `cri-containerd-<id>.scope` that does not exist."""
    from hookserver.config import load_settings
    from hookserver.daemon import Daemon
    from hookserver.system.cgroupnames import ContainerRuntime

    for sub in ("cpu", "memory", "cpuset"):
        (tmp_path / "cg" / sub).mkdir(parents=True)
    settings = load_settings(overrides={
        "standalone": True, "state_dir": str(tmp_path), "hook": {"socket": str(tmp_path / "h.sock")},
        "debug": {"socket": str(tmp_path / "d.sock")}, "nri": {"enabled": False},
        "cgroup": {"root": str(tmp_path / "cg"), "driver": "systemd", "runtime": "cri-o"},
    }, environ={})
    daemon = Daemon(settings)
    try:
        assert daemon.qos_snapshots.cgroups is not None
        assert daemon.qos_snapshots.cgroups.runtime is ContainerRuntime.CRIO
    finally:
        daemon.http.stop()


def test_the_eviction_modes_inputs_requests_offer_and_node_cpu_window() -> None:
    store = StateStore(clock=lambda: 1000.0)
    specs = MappingProxyType({
        "a": (MappingProxyType({"kubernetes.io/batch-cpu": "1500", "kubernetes.io/batch-memory": "1Gi"}), MappingProxyType({})),
        "b": (MappingProxyType({"kubernetes.io/batch-cpu": "500", "cpu": "250m", "memory": "64Mi"}), MappingProxyType({})),
    })
    store.upsert_pod(PodRecord(uid="u-two", namespace="ns", name="two", qos_class="BE", container_specs=specs))
    store.set_node(NodeRecord(name="n", capacity=MappingProxyType({"cpu": "8", "memory": "32Gi"}), allocatable=MappingProxyType({
        "cpu": "8", "kubernetes.io/batch-cpu": "3000", "kubernetes.io/mid-cpu": "0", "kubernetes.io/batch-memory": "junk"})))
    store.set_node_slo(NodeSLOSpec.model_validate({"resourceUsedThresholdWithBE": {"cpuEvictTimeWindowSeconds": 10}}))
    for i in range(20):  # node CPU 2.0, 2.1, … 3.9 cores at 981 … 1000
        store.series.append(series_key("node_cpu_usage"), 2.0 + i * 0.1, ts=981.0 + i)
    snap = SnapshotBuilder(store, cgroups=None).build()
    two = snap.pods[0]
    assert dict(two.requests) == {"kubernetes.io/batch-cpu": 2000, "kubernetes.io/batch-memory": 1 << 30, "cpu": 250,
                                  "memory": 64 << 20}
    # a zero offer is kept as 0, an unreadable one counts as not offered
    assert snap.node is not None and dict(snap.node.extended_allocatable) == {
        "kubernetes.io/batch-cpu": 3000, "kubernetes.io/mid-cpu": 0}
    # the CPU-evict window is 10 s (NodeSLO): samples at 990 … 1000 (2.9 … 3.9 cores), average 3.4
    assert snap.usage.cpu_window_s == 10 and snap.usage.cpu_avg_count == 11
    assert snap.usage.cpu_cores_avg == pytest.approx(3.4)
