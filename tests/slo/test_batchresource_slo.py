"""The contract with the batchresource hook: it reads the effective NodeSLO from the store snapshot."""

from __future__ import annotations

import json

import pytest

from hookserver.hooks.context import ContainerRequest, PodRequest, frozen_map
from hookserver.hooks.plugins.batchresource import BatchResourcePlugin
from hookserver.slo import parse_slo_document
from hookserver.store import StateStore
from hookserver.view import NodeView

SPEC = {"containers": {"main": {"requests": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "1Gi"},
                                "limits": {"kubernetes.io/batch-cpu": "2000", "kubernetes.io/batch-memory": "2Gi"}}}}


def _pod() -> PodRequest:
    return PodRequest(namespace="ns", name="be", uid="u1", labels=frozen_map({"koordinator.sh/qosClass": "BE"}),
                      annotations=frozen_map({"node.koordinator.sh/extended-resource-spec": json.dumps(SPEC)}))


@pytest.mark.parametrize(
    ("threshold", "quota"),
    [
        ({"enable": True, "cpuSuppressPolicy": "cfsQuota"}, -1),
        ({"enable": True, "cpuSuppressPolicy": "cpuset"}, 200000),
        ({"enable": False, "cpuSuppressPolicy": "cfsQuota"}, 200000),
    ],
)
def test_pod_and_container_quota_follow_the_effective_nodeslo(threshold: dict[str, object], quota: int) -> None:
    # The effective NodeSLO as a standalone node gets it: a ConfigMap node strategy for this node's labels.
    document = parse_slo_document({"kind": "ConfigMap", "data": {"resource-threshold-config": json.dumps({
        "clusterStrategy": {"enable": False},
        "nodeStrategies": [{"name": "colo", "nodeSelector": {"matchLabels": {"pool": "colo"}}, **threshold}],
    })}}, origin="test")
    resolved = document.resolve({"pool": "colo"})
    store = StateStore()
    store.set_node_slo(resolved.spec, resolved.sources)
    plugin = BatchResourcePlugin()
    view = NodeView.of(store.snapshot())
    pod_result = plugin.pre_run_pod_sandbox(_pod(), view)
    container_result = plugin.pre_create_container(ContainerRequest(pod=_pod(), name="main"), view)
    assert pod_result.resources.cpu_quota_us == quota
    assert container_result.resources.cpu_quota_us == quota
    assert pod_result.resources.cpu_shares == 1024  # shares never depend on the suppress policy
