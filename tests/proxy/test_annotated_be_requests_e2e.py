"""End to end, standalone (no apiserver: the store knows the pods only from the proxy): BE pods announced over
the real RuntimeHookService on a unix socket are counted with the batch-cpu requests of their
extended-resource-spec annotation, by the QoS snapshot (PodFacts.batch_cpu_request_milli, the BE-satisfaction
evictor's input) and by the collectors (the `be_cpu_request` series); `hookctl explain` names the source.
Issue 39: on a real cgroup v1 node both were 0, since the kubelet announces a BE container with cpu.shares 2
and no quota.

Hand-worked inputs: pod be-0 has containers `a` (batch-cpu 500) and `b` (1500); pod be-1 has `main` (2000).
Sums: be-0 2000 milli-cores, be-1 2000, the node's BE request 4000 milli-cores = 4.0 cores.
"""

from __future__ import annotations

import json
from pathlib import Path

from hookserver.api import runtime_hook_pb2 as pb
from hookserver.debug.views import explain_view
from hookserver.koord_resources import ANNOTATION_EXTENDED_RESOURCE_SPEC as SPEC, BATCH_CPU, BATCH_MEMORY
from hookserver.store.timeseries import series_key
from qos.snapshot.builder import SnapshotBuilder
from tests.collectors.fakehost import FakeClock, FakeHost, make_scheduler
from tests.proxy.conftest import Harness, container_request, pod_request

PODS = {"be-0": {"a": "500", "b": "1500"}, "be-1": {"main": "2000"}}


def _annotation(containers: dict[str, str]) -> str:
    return json.dumps({"containers": {
        name: {"requests": {BATCH_CPU: cpu, BATCH_MEMORY: "256Mi"}, "limits": {BATCH_CPU: cpu, BATCH_MEMORY: "256Mi"}}
        for name, cpu in containers.items()}})


def _announce(h: Harness) -> None:
    """PreRunPodSandbox, then PreCreateContainer per container, as koord-runtime-proxy sends them: the
    container resources are the kubelet's for a BE container (shares 2, no quota)."""
    for pod, containers in PODS.items():
        uid, parent = f"uid-{pod}", f"/kubepods/besteffort/poduid-{pod}"
        sandbox = pod_request(annotations={SPEC: _annotation(containers)}, name=pod, uid=uid)
        sandbox.cgroup_parent = parent
        h.stub.PreRunPodSandboxHook(sandbox, timeout=5)
        for name in containers:
            req = container_request(name, annotations={SPEC: _annotation(containers)})
            req.pod_meta.CopyFrom(pb.PodSandboxMetadata(name=pod, uid=uid, namespace="default"))
            req.pod_cgroup_parent = parent
            req.container_meta.id = f"c-{pod}-{name}"
            h.stub.PreCreateContainerHook(req, timeout=5)


def test_the_snapshot_and_the_collectors_count_the_annotations_batch_requests(harness: Harness, tmp_path: Path) -> None:
    _announce(harness)
    snap = harness.store.snapshot()
    assert not any(p.container_specs for p in snap.pods.values())  # standalone: no pod spec anywhere
    assert {c.name for c in snap.containers.values()} == {"a", "b", "main"}

    facts = SnapshotBuilder(harness.store, cgroups=None).build(evicted=frozenset()).pods
    assert {p.name: (p.qos, p.batch_cpu_request_milli, p.cpu_request_milli) for p in facts} == {
        "be-0": ("BE", 2000, 0), "be-1": ("BE", 2000, 0)}

    rows = explain_view(harness.store, "default", "be-0")["pod"]["resources"]
    assert [(r["container"], r["source"], r["requests"].get(BATCH_CPU)) for r in rows] == [
        ("a", "extended-resource-spec annotation", "500"), ("b", "extended-resource-spec annotation", "1500")]

    clock = FakeClock()
    make_scheduler(FakeHost(tmp_path / "host", version=1), clock, harness.store, containers=False).run_once()
    last = harness.store.series.last(series_key("be_cpu_request", node="node-1"))
    assert last is not None and last[1] == 4.0
