"""The slo-controller-config ConfigMap source against a real kube-apiserver: the counterpart of
tests/informer/test_slo_configmap.py. The ConfigMap lives in a unique namespace named by
informer.slo_configmap; the informer lists and watches it by name, and the store follows its edits, the
Node's labels and colocation-strategy annotation, a NodeSLO object, and its deletion."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from hookserver.informer import Informer
from hookserver.slo.colocation import ANNOTATION_COLOCATION_STRATEGY
from hookserver.store import StateStore
from tests.informer.conftest import eventually
from tests.kube.conftest import SLO_API, NodeFactory
from tests.kube.kubehttp import KubeHttp
from tests.kube.test_informer_apiserver import SLO_VERSION, running

NAME = "slo-controller-config"
COLOCATION: dict[str, Any] = {
    "enable": True, "cpuReclaimThresholdPercent": 50,
    "nodeConfigs": [
        {"name": "a", "nodeSelector": {"matchLabels": {"pool": "a"}}, "memoryReclaimThresholdPercent": 40},
        {"name": "b", "nodeSelector": {"matchLabels": {"pool": "b"}}, "memoryReclaimThresholdPercent": 20},
    ],
}


@pytest.fixture
def admin_kubeconfig(kube: KubeHttp, tmp_path: Path) -> str:
    return kube.kubeconfig(str(tmp_path))


def _source(informer: Informer) -> dict[str, Any]:
    return next(s for s in informer.status()["sources"] if s["resource"] == "slo-configmap")


def _data(colocation: dict[str, Any], suppress: int) -> dict[str, str]:
    return {"colocation-config": json.dumps(colocation),
            "resource-threshold-config": json.dumps({"clusterStrategy": {"enable": True,
                                                                         "cpuSuppressThresholdPercent": suppress}})}


def test_the_store_follows_the_configmap_the_node_and_a_nodeslo(
    kube: KubeHttp, kube_namespace: str, kube_nodes: NodeFactory, admin_kubeconfig: str, slo_crds: None
) -> None:
    ns = kube_namespace
    cms = f"/api/v1/namespaces/{ns}/configmaps"
    node = kube_nodes.make("coloc", labels={"pool": "a"})["metadata"]["name"]
    kube.must(kube.post(cms, {"metadata": {"name": NAME}, "data": _data(COLOCATION, 55)}), "configmap")
    # another ConfigMap beside it: never ours
    kube.must(kube.post(cms, {"metadata": {"name": "other"}, "data": _data({"enable": False}, 10)}), "other")
    origin = f"configmap {ns}/{NAME}"

    async def scenario() -> float:
        store = StateStore()
        async with running(admin_kubeconfig, node, store, slo_configmap=f"{ns}/{NAME}") as informer:
            assert await informer.wait_synced(15), informer.status()
            snap = store.snapshot()
            assert snap.colocation.enabled and snap.colocation.strategy.cpu_reclaim_threshold_percent == 50
            assert snap.colocation.strategy.memory_reclaim_threshold_percent == 40
            assert snap.node_slo.resource_used_threshold_with_be.cpu_suppress_threshold_percent == 55
            assert snap.node_slo_sources["resourceUsedThresholdWithBE"] == \
                f"{origin}: resource-threshold-config clusterStrategy"

            started = time.monotonic()
            kube.must(kube.merge_patch(f"{cms}/{NAME}", {"data": _data({**COLOCATION, "cpuReclaimThresholdPercent": 30},
                                                                       55)}), "edit")
            await eventually(lambda: store.snapshot().colocation.strategy.cpu_reclaim_threshold_percent == 30,
                             timeout_s=10, what="the edit")
            followed_s = time.monotonic() - started

            # an edit koordinator refuses too (min=0); an unknown policy it takes and computes as usage
            kube.must(kube.merge_patch(f"{cms}/{NAME}", {"data": {"colocation-config": json.dumps(
                {**COLOCATION, "cpuReclaimThresholdPercent": -5})}}), "invalid edit")
            await eventually(lambda: "last_error" in informer.slo_report()["colocation"], timeout_s=10,
                             what="the rejection")
            assert "colocation-config.cpuReclaimThresholdPercent" in informer.slo_report()["colocation"]["last_error"]
            assert store.snapshot().colocation.strategy.cpu_reclaim_threshold_percent == 30

            kube.must(kube.merge_patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {"pool": "b"}}}), "relabel")
            kube.must(kube.merge_patch(f"{cms}/{NAME}", {"data": _data(COLOCATION, 55)}), "fix")
            await eventually(lambda: store.snapshot().colocation.strategy.memory_reclaim_threshold_percent == 20,
                             timeout_s=10, what="nodeConfigs[b]")
            kube.must(kube.merge_patch(f"/api/v1/nodes/{node}", {"metadata": {"annotations": {
                ANNOTATION_COLOCATION_STRATEGY: json.dumps({"cpuReclaimThresholdPercent": 10})}}}), "annotate")
            await eventually(lambda: store.snapshot().colocation.strategy.cpu_reclaim_threshold_percent == 10,
                             timeout_s=10, what="the annotation")

            kube.must(kube.post(f"{SLO_API}/nodeslos", {
                "apiVersion": SLO_VERSION, "kind": "NodeSLO", "metadata": {"name": node},
                "spec": {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 44}}}), "nodeslo")
            await eventually(lambda: store.snapshot().node_slo_sources["resourceUsedThresholdWithBE"] ==
                             f"nodeslo/{node}", timeout_s=10, what="the NodeSLO object wins")
            assert store.snapshot().node_slo.resource_used_threshold_with_be.cpu_suppress_threshold_percent == 44

            kube.must(kube.delete(f"{cms}/{NAME}"), "delete")
            await eventually(lambda: not store.snapshot().colocation.enabled, timeout_s=10, what="the delete")
            assert store.snapshot().colocation.strategy.cpu_reclaim_threshold_percent == 60
            source = _source(informer)
            assert source["connected"] and source["errors"] == 0 and source["lists"] == 1, source
            assert source["skipped"] == 1 and not store.snapshot().stale
        return followed_s

    followed_s = asyncio.run(scenario())
    print(f"ConfigMap edit in the store after {followed_s:.2f} s")
    assert followed_s < 2.0


def test_a_cluster_at_150_percent_reclaim_gets_an_offer_on_the_real_node(
    kube: KubeHttp, kube_namespace: str, kube_nodes: NodeFactory, admin_kubeconfig: str, slo_crds: None
) -> None:
    """koordinator validates the reclaim thresholds as min=0 only; operators set them above 100 to offer more
    batch than the margin would. Read from a real ConfigMap through the informer (accepted, no error), the
    capacity publisher's offer (8 cores / 32Gi, reserved 500m / 2Gi, system 500m / 1Gi, no pods) goes onto a real
    Node: 8000 - 8000 x (100 - 150) % - max(500, 500) = 11500 milli-cores; 32Gi - int(32Gi x (100 - 120) %) -
    max(1Gi, 2Gi) = 39084202393 bytes (worked by hand, as koord-manager's formula gives it)."""
    from hookserver.capacity import CapacityPublisher, CapacitySettings
    from hookserver.informer import NodeCapacityWriter
    from hookserver.informer.transport import ApiClientTransport, load_client_configuration
    from hookserver.koord_resources import BATCH_CPU, BATCH_MEMORY
    from tests.capacity.world import World

    ns = kube_namespace
    node = kube_nodes.make("coloc150")["metadata"]["name"]
    colocation = {"enable": True, "cpuReclaimThresholdPercent": 150, "memoryReclaimThresholdPercent": 120}
    kube.must(kube.post(f"/api/v1/namespaces/{ns}/configmaps",
                        {"metadata": {"name": NAME}, "data": _data(colocation, 65)}), "configmap")

    async def read() -> StateStore:
        store = StateStore()
        async with running(admin_kubeconfig, node, store, slo_configmap=f"{ns}/{NAME}") as informer:
            assert await informer.wait_synced(15), informer.status()
            assert "last_error" not in informer.slo_report()["colocation"], informer.slo_report()
        return store

    strategy = asyncio.run(read()).snapshot().colocation
    assert (strategy.strategy.cpu_reclaim_threshold_percent, strategy.strategy.memory_reclaim_threshold_percent) == (150, 120)
    world = World()
    world.store.set_colocation(strategy)
    transport = ApiClientTransport(load_client_configuration(admin_kubeconfig))
    try:
        publisher = CapacityPublisher(store=world.store, settings=CapacitySettings(warmup_s=10.0),
                                      sink=NodeCapacityWriter(transport, node_name=node), standalone=False,
                                      clock=world.clock)
        world.sample(15)
        outcome = publisher.tick()
        assert outcome.state == "published", outcome
        allocatable = kube.must(kube.get(f"/api/v1/nodes/{node}"), "get node")["status"]["allocatable"]
        assert allocatable[BATCH_CPU] == "11500"
        assert int(allocatable[BATCH_MEMORY]) == 39_084_202_393
    finally:
        transport.close()
