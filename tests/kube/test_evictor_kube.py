"""The Eviction API backend against a REAL kube-apiserver (v1.20.2 from ../shared/tools/kube-e2e): it serves
policy/v1beta1 only, an eviction marks the pod terminating (no kubelet finishes it), a PodDisruptionBudget
whose status no controller has computed refuses a Running pod with 429 (a Pending pod ignores budgets), and the Event lands in core/v1.

Skipped unless HOOKSERVER_E2E_KUBECONFIG names the kubeconfig (`/tmp/kube-e2e/kubeconfig`).
Objects live in namespace `i9-qos` with per-run pod names; pods are deleted with grace 0 at the end.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from hookserver.eviction import EvictionRequest, EvictionStatus
from hookserver.informer.evictor import ApiEvictor
from hookserver.informer.transport import ApiClientTransport, load_client_configuration
from hookserver.store import StateStore
from qos.evictions import EvictionGuard
from qos.memory_evict import EvictState, MemoryEvict
from qos.registry import gate_registry
from qos.runner import QoSRunner
from qos.snapshot import NodeUsage
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
    evictor = ApiEvictor(api, node_name=NODE)
    refused = evictor.evict(_request(created))
    assert refused.status is EvictionStatus.REFUSED and "429" in refused.detail
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
