"""QoS metrics under koordlet's exact names (no `_total` on koordlet_pod_eviction) plus plan durations."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from hookserver.eviction import EvictionStatus
from hookserver.store import StateStore
from qos.cpu.suppress import CPUSuppress
from qos.framework.evictions import EvictionGuard
from qos.eviction.memory import EvictState, MemoryEvict
from qos.framework.metrics import QoSMetrics
from qos.registry import gate_registry
from qos.framework.runner import QoSRunner
from qos.snapshot.model import BETier, NodeUsage
from tests.qos.helpers import run_round, LEVELS, TIER, FixedSnapshots, RecordingBackend, node, pod, slo, snapshot, topology
from tests.reference_example import PlanRecorder


def test_exposition_names_and_values() -> None:
    registry = CollectorRegistry()
    metrics = QoSMetrics(registry, node="node-a")
    pods = (pod("ls", "LS", cpu=2.0), pod("p1", mem=300e6), pod("p2", mem=500e6))
    snap = snapshot(node=node(memory=10_000_000_000), pods=pods, slo=slo(enable=True),
                    usage=NodeUsage(cpu_cores=4.0, memory_bytes=7.25e9), topology=topology(8),
                    be_tier=BETier(TIER, frozenset(range(8)), -1, cpuset_levels=LEVELS))
    reconcilers = [CPUSuppress(), MemoryEvict()]
    backend = RecordingBackend({"p2": EvictionStatus.REFUSED})
    runner = QoSRunner(
        reconcilers, gates=gate_registry(reconcilers).resolve([("test", {"BEMemoryEvict": True})]),
        snapshots=FixedSnapshots(snap), store=StateStore(), executor=PlanRecorder(),
        evictions=EvictionGuard(backend), metrics=metrics, clock=lambda: 1000.0, mono=lambda: 1000.0,
    )
    runner._state["MemoryEvict"] = EvictState(0.0)
    run_round(runner)
    text = generate_latest(registry).decode()
    # budget 5200 − 2000 − max(2000, 0) = 1200m → 2 CPUs (the floor).
    assert 'koordlet_be_suppress_cpu_cores{node="node-a",type="cpuset"} 2.0' in text
    assert 'koordlet_be_suppress_ls_used_cpu_cores{node="node-a"} 2.0' in text
    # p2 refused (429), p1 evicted: the koordlet counter counts evictions done, ours every outcome.
    assert "# TYPE koordlet_pod_eviction untyped" in text
    assert 'koordlet_pod_eviction{node="node-a",reason="EvictPodByNodeMemoryUsage"} 1.0' in text
    assert "koordlet_pod_eviction_total" not in text
    assert ('hookserver_qos_evictions_total{reason="EvictPodByNodeMemoryUsage",reconciler="MemoryEvict",'
            'status="refused"} 1.0') in text
    assert 'hookserver_qos_plan_duration_seconds_count{reconciler="CPUSuppress"} 1.0' in text
    assert 'hookserver_qos_rounds_total{reconciler="CPUSuppress",result="planned"} 1.0' in text
    metrics.export("CPUBurst", {"burst_containers": 3.0})
    assert 'hookserver_qos_value{name="burst_containers",reconciler="CPUBurst"} 3.0' in generate_latest(registry).decode()
