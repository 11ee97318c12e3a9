"""The Eviction API backend against a REAL kube-apiserver (v1.20.2 from ../shared/tools/kube-e2e): it serves
policy/v1beta1 only, an eviction marks the pod terminating (no kubelet finishes it), a PodDisruptionBudget
whose status no controller has computed refuses a Running pod with 429 (a Pending pod ignores budgets), and the Event lands in core/v1.

Skipped unless HOOKSERVER_E2E_KUBECONFIG names the kubeconfig (`/tmp/kube-e2e/kubeconfig`).
Objects live in namespace `i9-qos` with per-run pod names; pods are deleted with grace 0 at the end.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from hookserver.eviction import EvictionRequest, EvictionStatus
from hookserver.informer.evictor import ApiEvictor
from hookserver.informer.transport import ApiClientTransport, load_client_configuration
from hookserver.store import StateStore
from qos.framework.evictions import EvictionGuard
from qos.eviction.memory import EvictState, MemoryEvict
from qos.registry import gate_registry
from qos.framework.runner import QoSRunner
from qos.snapshot.model import NodeUsage
from tests.qos.helpers import run_round, FixedSnapshots, node, pod, slo, snapshot

KUBECONFIG = os.environ.get("HOOKSERVER_E2E_KUBECONFIG", "")
pytestmark = pytest.mark.skipif(
    not KUBECONFIG, reason="HOOKSERVER_E2E_KUBECONFIG is unset (start ../shared/tools/kube-e2e, see its README)"
)
NS = "i9-qos"
NODE = "i9-node"


@pytest.fixture(scope="module")
def api() -> Iterator[ApiClientTransport]:
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    transport = ApiClientTransport(load_client_configuration(KUBECONFIG))
    status, _ = transport.request_json("GET", f"/api/v1/namespaces/{NS}", timeout_s=10)
    if status == 404:
        status, body = transport.request_json(
            "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}, timeout_s=10)
        assert status == 201, body
    yield transport
    transport.close()


@pytest.fixture
def names(api: ApiClientTransport) -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    for name in made:
        api.request_json("DELETE", f"/api/v1/namespaces/{NS}/pods/{name}", {"gracePeriodSeconds": 0}, timeout_s=10)
        api.request_json("DELETE", f"/apis/policy/v1beta1/namespaces/{NS}/poddisruptionbudgets/{name}", timeout_s=10)


def _create_pod(api: ApiClientTransport, made: list[str], name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    body = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"koordinator.sh/qosClass": "BE", **(labels or {})}},
        "spec": {"nodeName": NODE, "containers": [{"name": "main", "image": "busybox"}]},
    }
    status, created = api.request_json("POST", f"/api/v1/namespaces/{NS}/pods", body, timeout_s=10)
    assert status == 201, created
    made.append(name)
    return dict(created)


def _request(created: dict[str, Any]) -> EvictionRequest:
    meta = created["metadata"]
    return EvictionRequest(pod_uid=meta["uid"], namespace=NS, name=meta["name"], reason="EvictPodByNodeMemoryUsage",
                           message="node memory usage 72% >= threshold 70%: release 400000000 bytes")


def test_real_apiserver_v1beta1_eviction_event_and_terminating(api: ApiClientTransport, names: list[str]) -> None:
    run = uuid.uuid4().hex[:6]
    created = _create_pod(api, names, f"i9-evict-{run}")
    evictor = ApiEvictor(api, node_name=NODE)
    assert evictor.api_version() == "policy/v1beta1"
    result = evictor.evict(_request(created))
    assert result.status is EvictionStatus.EVICTED, result
    assert result.api_version == "policy/v1beta1" and result.event_created
    status, live = api.request_json("GET", f"/api/v1/namespaces/{NS}/pods/{created['metadata']['name']}", timeout_s=10)
    assert status == 200 and live["metadata"].get("deletionTimestamp")
    again = evictor.evict(_request(created))
    assert again.status is EvictionStatus.TERMINATING
    status, events = api.request_json(
        "GET", f"/api/v1/namespaces/{NS}/events?fieldSelector=involvedObject.uid%3D{created['metadata']['uid']}",
        timeout_s=10)
    assert status == 200
    reasons = [(e["reason"], e["type"], e["source"]["component"]) for e in events["items"]]
    assert reasons == [("evictPodSuccess", "Warning", "hookserver")]
    assert "EvictPodByNodeMemoryUsage" in events["items"][0]["message"]


def test_real_apiserver_pdb_refuses_with_429_until_it_allows(api: ApiClientTransport, names: list[str]) -> None:
    run = uuid.uuid4().hex[:6]
    name = f"i9-pdb-{run}"
    created = _create_pod(api, names, name, labels={"i9-pdb": run})
    # A Pending pod may be evicted whatever its budget says (no kubelet runs here): mark it Running first.
    created["status"] = {"phase": "Running"}
    status, body = api.request_json("PUT", f"/api/v1/namespaces/{NS}/pods/{name}/status", created, timeout_s=10)
    assert status == 200, body
    pdb = {"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": NS},
           "spec": {"minAvailable": 1, "selector": {"matchLabels": {"i9-pdb": run}}}}
    status, made = api.request_json("POST", f"/apis/policy/v1beta1/namespaces/{NS}/poddisruptionbudgets", pdb, timeout_s=10)
    assert status == 201, made
    t = [time.time()]
    evictor = ApiEvictor(api, node_name=NODE, clock=lambda: t[0])
    refused = evictor.evict(_request(created))
    assert refused.status is EvictionStatus.REFUSED and "429" in refused.detail
    print(f"the apiserver's PDB refusal: {refused.detail}")  # its retry-after (1.20 sends none: 5 s default)
    # inside the server's retry-after the evictor does not ask again (issue 21): it answers the refusal itself
    held = evictor.evict(_request(created))
    assert held.status is EvictionStatus.REFUSED and evictor.held == 1 and evictor.refused == 1
    t[0] += 601  # past any retry-after
    # No disruption controller runs here: we set the status it would compute, allowing one disruption.
    made["status"] = {"observedGeneration": made["metadata"].get("generation", 1), "disruptionsAllowed": 1,
                      "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}
    status, body = api.request_json(
        "PUT", f"/apis/policy/v1beta1/namespaces/{NS}/poddisruptionbudgets/{name}/status", made, timeout_s=10)
    assert status == 200, body
    assert evictor.evict(_request(created)).status is EvictionStatus.EVICTED


def test_real_apiserver_runner_evicts_once(api: ApiClientTransport, names: list[str]) -> None:
    run = uuid.uuid4().hex[:6]
    created = [_create_pod(api, names, f"i9-run-{run}-{i}") for i in range(3)]
    pods = tuple(
        replace(pod(c["metadata"]["name"], mem=m, namespace=NS), uid=c["metadata"]["uid"])
        for c, m in zip(created, (300e6, 500e6, 100e6), strict=True)
    )
    clock = [1000.0]
    snap = snapshot(node=node(memory=10_000_000_000), pods=pods, usage=NodeUsage(memory_bytes=7.25e9), slo=slo(enable=True))
    reconcilers = [MemoryEvict()]
    runner = QoSRunner(
        reconcilers, gates=gate_registry(reconcilers).resolve([("test", {"BEMemoryEvict": True})]),
        snapshots=FixedSnapshots(snap, clock=clock, mark_evicted=True), store=StateStore(clock=lambda: clock[0]),
        executor=None, evictions=EvictionGuard(ApiEvictor(api, node_name=NODE), clock=lambda: clock[0]),
        clock=lambda: clock[0], mono=lambda: clock[0],
    )
    runner._state["MemoryEvict"] = EvictState(0.0)
    run_round(runner)
    clock[0] += 1.0
    run_round(runner)  # cooling down: nothing
    terminating = []
    for c in created:
        _, live = api.request_json("GET", f"/api/v1/namespaces/{NS}/pods/{c['metadata']['name']}", timeout_s=10)
        terminating.append(bool(live["metadata"].get("deletionTimestamp")))
    assert terminating == [False, True, False]  # only the 500 MB pod, once


# -- the v1.7/v1.8 modes: pods of several priorities --------------------------------------------

PRIORITY_CLASSES = {"i9-batch-low": 5100, "i9-batch": 5300, "i9-mid": 7100, "i9-prod": 9100}


def _priority_classes(api: ApiClientTransport) -> None:
    for name, value in PRIORITY_CLASSES.items():
        status, body = api.request_json("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", {
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value,
        }, timeout_s=10)
        assert status in (201, 409), body


def _live_terminating(api: ApiClientTransport, name: str) -> bool:
    status, live = api.request_json("GET", f"/api/v1/namespaces/{NS}/pods/{name}", timeout_s=10)
    assert status == 200, live
    return bool(live["metadata"].get("deletionTimestamp"))


def test_real_apiserver_cpu_round_across_modes_by_priority(api: ApiClientTransport, names: list[str]) -> None:
    """CPUAllocatableEvict then CPUEvict in one round, on pods whose priorities the apiserver's Priority admission
    resolved from their PriorityClass; a second round after the cool-down sees them terminating (pending release)
    and evicts nobody else."""
    from types import MappingProxyType

    from qos.eviction.cpu import CPUEvict

    _priority_classes(api)
    run = uuid.uuid4().hex[:6]
    on = {"koordinator.sh/eviction-enabled": "true"}
    spec = {  # name: (PriorityClass, labels, batch-cpu or mid-cpu request, CPU used in cores)
        "b1": ("i9-batch-low", on, {"kubernetes.io/batch-cpu": 2000}, 0.5),
        "b2": ("i9-batch", on, {"kubernetes.io/batch-cpu": 4000}, 1.5),
        "b3": ("i9-batch", {}, {"kubernetes.io/batch-cpu": 3000}, 1.0),  # did not opt in
        "m1": ("i9-mid", on, {"kubernetes.io/mid-cpu": 1000}, 2.0),
        "p1": ("i9-prod", on, {}, 3.0),  # above every threshold
    }
    facts = []
    created: dict[str, dict[str, Any]] = {}
    for short, (pclass, labels, requests, used) in spec.items():
        name = f"i9-prio-{run}-{short}"
        body = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": {"koordinator.sh/qosClass": "LS", **labels}},
            "spec": {"nodeName": NODE, "priorityClassName": pclass, "containers": [{"name": "main", "image": "busybox"}]},
        }
        status, made = api.request_json("POST", f"/api/v1/namespaces/{NS}/pods", body, timeout_s=10)
        assert status == 201, made
        names.append(name)
        created[short] = made
        assert made["spec"]["priority"] == PRIORITY_CLASSES[pclass]  # admission resolved it
        facts.append(replace(
            pod(name, "LS", cpu=used, priority=made["spec"]["priority"], labels=made["metadata"]["labels"], namespace=NS),
            uid=made["metadata"]["uid"], requests=MappingProxyType(requests),
        ))
    t = slo(enable=True, cpuAllocatableEvictThresholdPercent=100, cpuAllocatableEvictLowerPercent=90,
            allocatableEvictPriorityThreshold=7999, cpuEvictThresholdPercent=80, cpuEvictLowerPercent=50,
            evictEnabledPriorityThreshold=7999)
    clock = [1000.0]
    snap = snapshot(
        slo=t, pods=tuple(facts), usage=NodeUsage(cpu_cores_avg=7.2, cpu_avg_count=60, cpu_window_s=60),
        node=node(cpu_milli=8000, extended_allocatable=MappingProxyType({"kubernetes.io/batch-cpu": 6000,
                                                                         "kubernetes.io/mid-cpu": 4000})),
    )
    reconcilers = [CPUEvict()]
    store = StateStore(clock=lambda: clock[0])
    runner = QoSRunner(
        reconcilers, gates=gate_registry(reconcilers).resolve([("test", {"CPUAllocatableEvict": True, "CPUEvict": True})]),
        snapshots=FixedSnapshots(snap, clock=clock, mark_evicted=True), store=store, executor=None,
        evictions=EvictionGuard(ApiEvictor(api, node_name=NODE), clock=lambda: clock[0]),
        clock=lambda: clock[0], mono=lambda: clock[0],
    )
    runner._state["CPUEvict"] = EvictState(0.0)
    # CPUAllocatableEvict: batch-cpu 2000 + 4000 + 3000 = 9000 = 150 % of 6000 > 100 %: release 9000 − 5400 = 3600;
    #   b1 (5100) 2000, then b2 (5300) 4000 → 6000. mid-cpu 1000 of 4000: fine.
    # CPUEvict: 7.2 of 8 cores = 90 % ≥ 80 %: release 8000 × (90 − 50) / 100 = 3200m used; b1 + b2 free 2000m;
    #   m1 (7100, 2000m) → 4000m. p1 (9100) and b3 (no opt-in) are never candidates.
    plans = run_round(runner)
    assert [i.request.name.rsplit("-", 1)[1] for i in walk_picked(plans[0])] == ["b1", "b2", "m1"]
    assert {s: _live_terminating(api, created[s]["metadata"]["name"]) for s in spec} == {
        "b1": True, "b2": True, "b3": False, "m1": True, "p1": False}
    assert [e.status for e in store.audit.evictions()] == ["evicted"] * 3
    reasons = [e.reason for e in store.audit.evictions()]
    assert reasons == ["EvictPodByCPUAllocatable", "EvictPodByCPUAllocatable", "EvictPodByNodeCPUUsage"]
    # 30 s later (past the 20 s cool-down), the node unchanged: the three are still terminating (no kubelet
    # finishes them), so they count as pending release and nobody else is evicted.
    clock[0] += 30.0
    plans = run_round(runner)
    assert plans and plans[0].numbers["CPUAllocatableEvict.pending_pods"] == 2
    assert plans[0].numbers["CPUEvict.pending_pods"] == 1 and plans[0].numbers["CPUEvict.would_evict"] == 0
    assert len(store.audit.evictions()) == 3
    assert not _live_terminating(api, created["b3"]["metadata"]["name"])
    assert not _live_terminating(api, created["p1"]["metadata"]["name"])


def walk_picked(plan: Any) -> list[Any]:
    from qos.framework.evict_round import walk

    return walk(plan.release_targets, plan.evictions, lambda item: True).picked()
