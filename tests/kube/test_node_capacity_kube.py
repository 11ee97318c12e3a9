"""The server-side apply writers against a real kube-apiserver (1.20, /tmp/kube-e2e): the Node capacity
writer and the NodeMetric spec writer through the real ApiClientTransport (so the kubernetes client's REST
layer really sends application/apply-patch+yaml), koord-manager's writes made as the apiserver sees them
(`?fieldManager=koordinator-manager`), and node_from_json on the real GET of the Node.

These are also the reference for the fake's ownership model (tests/informer/fake_ssa.py): the same
sequences, the answers the real server gives. Nodes come from `kube_nodes` (unique names, cleaned up
with their NodeMetric); the shared slo.koordinator.sh CRD from `slo_crds`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from hookserver.informer import NodeCapacityWriter, NodeMetricSpecWriter
from hookserver.informer.convert import node_from_json
from hookserver.informer.nodemetric_status import NodeMetricStatusWriter
from hookserver.informer.transport import ApiClientTransport, load_client_configuration
from hookserver.koord_resources import BATCH_CPU, BATCH_MEMORY, MID_CPU
from tests.kube.conftest import SLO_API, NodeFactory
from tests.kube.kubehttp import KubeHttp
from tests.kube.tcpproxy import CuttableProxy

KOORD = "koordinator-manager"
VALUES = {BATCH_CPU: "1500", BATCH_MEMORY: "2Gi"}
APPLY = "application/apply-patch+yaml"
SPEC: dict[str, Any] = {"metricCollectPolicy": {"aggregateDurationSeconds": 300, "reportIntervalSeconds": 60,
                                                "nodeAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]}}}


class Recording:
    """The real transport, with the methods it was asked to send counted."""

    def __init__(self, inner: ApiClientTransport) -> None:
        self.inner = inner
        self.methods: list[str] = []

    def request_json(self, method: str, path: str, body: Any = None, **kwargs: Any) -> tuple[int, Any]:
        self.methods.append(method)
        return self.inner.request_json(method, path, body, **kwargs)


@pytest.fixture
def transport(kube_kubeconfig: str) -> Iterator[ApiClientTransport]:
    api = ApiClientTransport(load_client_configuration(kube_kubeconfig))
    try:
        yield api
    finally:
        api.close()


def koord_patch(kube: KubeHttp, node: str, status: Mapping[str, Any]) -> None:
    """koord-manager's noderesource controller updating the Node's status (an Update, not an apply)."""
    kube.must(kube.request("PATCH", f"/api/v1/nodes/{node}/status", {"status": status},
                           query={"fieldManager": KOORD}, content_type="application/merge-patch+json"), "koord patch")


def koord_apply(kube: KubeHttp, path: str, obj: Mapping[str, Any]) -> Any:
    return kube.request("PATCH", path, obj, query={"fieldManager": KOORD, "force": "false"}, content_type=APPLY)


def owners(kube: KubeHttp, node: str) -> dict[str, tuple[str, ...]]:
    got = kube.must(kube.get(f"/api/v1/nodes/{node}"), "get node")
    return dict(node_from_json(got, source="apiserver", now=0.0).published_owners)


def node_status(kube: KubeHttp, node: str) -> dict[str, Any]:
    return dict(kube.must(kube.get(f"/api/v1/nodes/{node}"), "get node")["status"])


# -- Node capacity -----------------------------------------------------------------------------------

def test_apply_writes_both_maps_and_the_informer_sees_us_as_owner(
        kube: KubeHttp, kube_nodes: NodeFactory, transport: ApiClientTransport) -> None:
    node = kube_nodes.make("cap")["metadata"]["name"]
    delivery = NodeCapacityWriter(transport, node_name=node).apply(VALUES)
    assert delivery.result == "ok", delivery.detail
    assert dict(delivery.node_values) == VALUES
    status = node_status(kube, node)
    for key in ("capacity", "allocatable"):
        assert {name: status[key][name] for name in VALUES} == VALUES
    assert status["capacity"]["cpu"] == "8"  # the node's own resources are untouched
    assert owners(kube, node) == {BATCH_CPU: ("hookserver",), BATCH_MEMORY: ("hookserver",)}
    got = kube.get(f"/api/v1/nodes/{node}").body
    assert delivery.resource_version == got["metadata"]["resourceVersion"]
    entry = next(e for e in got["metadata"]["managedFields"] if e["manager"] == "hookserver")
    assert entry["operation"] == "Apply"  # a real apply, not an update: the content type reached the server
    assert entry["fieldsV1"] == {"f:status": {key: {f"f:{name}": {} for name in VALUES}
                                              for key in ("f:allocatable", "f:capacity")}}


def test_a_repeated_apply_changes_nothing_and_quantities_may_come_back_canonical(
        kube: KubeHttp, kube_nodes: NodeFactory, transport: ApiClientTransport) -> None:
    node = kube_nodes.make("cap")["metadata"]["name"]
    w = NodeCapacityWriter(transport, node_name=node)
    first = w.apply(VALUES)
    again = w.apply(dict(VALUES))
    assert again.result == "ok" and again.resource_version == first.resource_version  # a no-op is not written
    decimal = w.apply({BATCH_CPU: "1.5", BATCH_MEMORY: "2Gi"})
    assert decimal.result == "ok" and decimal.node_values[BATCH_CPU] == "1500m"  # sent as given, stored canonical


def test_withdraw_takes_back_only_what_we_alone_own(
        kube: KubeHttp, kube_nodes: NodeFactory, transport: ApiClientTransport) -> None:
    node = kube_nodes.make("cap")["metadata"]["name"]
    w = NodeCapacityWriter(transport, node_name=node)
    koord_patch(kube, node, {"capacity": {MID_CPU: "500"}, "allocatable": {MID_CPU: "500"}})
    assert w.apply({**VALUES, MID_CPU: "500"}).result == "ok"  # equal to koord-manager's: shared, no conflict
    assert owners(kube, node)[MID_CPU] == ("hookserver", KOORD)
    assert w.apply({BATCH_CPU: "1500", MID_CPU: "500"}).result == "ok"  # a name left out goes
    assert BATCH_MEMORY not in node_status(kube, node)["allocatable"]
    withdrawn = w.withdraw()
    assert withdrawn.result == "ok" and dict(withdrawn.node_values) == {MID_CPU: "500"}
    status = node_status(kube, node)
    assert BATCH_CPU not in status["capacity"] and BATCH_CPU not in status["allocatable"]
    assert status["capacity"][MID_CPU] == status["allocatable"][MID_CPU] == "500"  # koord-manager's stays
    assert owners(kube, node) == {MID_CPU: (KOORD,)}


def test_koord_managers_write_is_a_conflict_naming_it_and_force_takes_over(
        kube: KubeHttp, kube_nodes: NodeFactory, transport: ApiClientTransport) -> None:
    node = kube_nodes.make("cap")["metadata"]["name"]
    w = NodeCapacityWriter(transport, node_name=node)
    assert w.apply(VALUES).result == "ok"
    koord_patch(kube, node, {"allocatable": {BATCH_CPU: "900"}})
    assert owners(kube, node)[BATCH_CPU] == ("hookserver", KOORD)  # our capacity, its allocatable
    before = kube.get(f"/api/v1/nodes/{node}").body
    refused = w.apply({BATCH_CPU: "1600", BATCH_MEMORY: "3Gi"})
    assert refused.result == "conflict" and refused.attempts == 1, refused
    assert refused.conflicts == ((KOORD, f".status.allocatable.{BATCH_CPU}"),)
    assert kube.get(f"/api/v1/nodes/{node}").body["metadata"]["resourceVersion"] == \
        before["metadata"]["resourceVersion"]  # nothing changed, batch-memory included
    koord_patch(kube, node, {"capacity": {BATCH_CPU: "900"}})
    assert owners(kube, node)[BATCH_CPU] == (KOORD,)
    forced = w.apply({BATCH_CPU: "1600", BATCH_MEMORY: "3Gi"}, force=True)
    assert forced.result == "ok" and forced.node_values[BATCH_CPU] == "1600"
    assert owners(kube, node)[BATCH_CPU] == ("hookserver",)


def test_koord_managers_own_apply_of_the_same_value_is_shared(
        kube: KubeHttp, kube_nodes: NodeFactory, transport: ApiClientTransport) -> None:
    node = kube_nodes.make("cap")["metadata"]["name"]
    assert NodeCapacityWriter(transport, node_name=node).apply(VALUES).result == "ok"
    reply = koord_apply(kube, f"/api/v1/nodes/{node}/status", {
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": node},
        "status": {"capacity": {BATCH_CPU: "1500"}, "allocatable": {BATCH_CPU: "1500"}}})
    assert reply.ok, reply.body
    assert owners(kube, node) == {BATCH_CPU: ("hookserver", KOORD), BATCH_MEMORY: ("hookserver",)}
    other = koord_apply(kube, f"/api/v1/nodes/{node}/status", {
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": node},
        "status": {"capacity": {BATCH_MEMORY: "1Gi"}}})
    assert other.status == 409  # the other way round too: koord-manager cannot silently take ours
    assert other.body["details"]["causes"][0]["message"] == 'conflict with "hookserver"'


def test_the_kubelets_resources_are_never_overwritten(
        kube: KubeHttp, kube_nodes: NodeFactory, transport: ApiClientTransport) -> None:
    node = kube_nodes.make("cap")["metadata"]["name"]  # created by the admin's client: it owns cpu/memory
    delivery = NodeCapacityWriter(transport, node_name=node).apply({"cpu": "64"})
    assert delivery.result == "conflict"
    assert {field for _m, field in delivery.conflicts} == {".status.capacity.cpu", ".status.allocatable.cpu"}
    assert node_status(kube, node)["capacity"]["cpu"] == "8"


def test_missing_node_and_outage_are_results(
        kube: KubeHttp, kube_nodes: NodeFactory, transport: ApiClientTransport, proxy: CuttableProxy,
        tmp_path: Path) -> None:
    missing = NodeCapacityWriter(transport, node_name="hookserver-e2e-no-such-node").apply(VALUES)
    assert (missing.result, missing.detail) == ("not_found", "node hookserver-e2e-no-such-node does not exist")
    node = kube_nodes.make("cap")["metadata"]["name"]
    via_proxy = ApiClientTransport(load_client_configuration(
        kube.with_server(proxy.url).kubeconfig(str(tmp_path))), connect_timeout_s=2)
    try:
        w = NodeCapacityWriter(via_proxy, node_name=node, timeout_s=5)
        assert w.apply(VALUES).result == "ok"
        proxy.cut()
        down = w.apply({BATCH_CPU: "1"})
        assert (down.result, down.attempts) == ("error", 1) and down.detail
        proxy.restore()
        assert w.apply({BATCH_CPU: "1"}).result == "ok"
    finally:
        via_proxy.close()


# -- NodeMetric spec ---------------------------------------------------------------------------------

def metric(name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": name},
            "spec": dict(spec)}


def test_nodemetric_created_kept_in_step_and_left_alone(
        kube: KubeHttp, kube_nodes: NodeFactory, slo_crds: None, transport: ApiClientTransport) -> None:
    node = kube_nodes.make("spec")["metadata"]["name"]
    recording = Recording(transport)
    w = NodeMetricSpecWriter(recording, node_name=node)
    created = w.ensure(SPEC)
    assert created.result == "created", created.detail
    assert kube.get(f"{SLO_API}/nodemetrics/{node}").body["spec"] == SPEC
    recording.methods.clear()
    same = w.ensure(SPEC)
    assert (same.result, same.resource_version) == ("unchanged", created.resource_version)
    assert recording.methods == ["GET"]  # the real managedFields ('.' marks and all) showed nothing to do
    status = NodeMetricStatusWriter(transport, node_name=node).deliver({"updateTime": "2026-11-26T00:00:00Z"})
    assert status.result == "ok"
    recording.methods.clear()
    assert w.ensure(SPEC).result == "unchanged" and recording.methods == ["GET"]
    smaller = {"metricCollectPolicy": {"reportIntervalSeconds": 30}}
    updated = w.ensure(smaller)
    assert updated.result == "updated", updated.detail
    stored = kube.get(f"{SLO_API}/nodemetrics/{node}").body
    assert stored["spec"] == smaller and stored["status"] == {"updateTime": "2026-11-26T00:00:00Z"}


def test_nodemetric_koord_managers_spec_is_a_conflict_and_an_equal_one_is_shared(
        kube: KubeHttp, kube_nodes: NodeFactory, slo_crds: None, transport: ApiClientTransport) -> None:
    node = kube_nodes.make("spec")["metadata"]["name"]
    path = f"{SLO_API}/nodemetrics/{node}"
    theirs = {"metricCollectPolicy": {"aggregateDurationSeconds": 600, "reportIntervalSeconds": 60},
              "nodeMemoryCollectPolicy": "usageWithoutPageCache"}
    assert koord_apply(kube, path, metric(node, theirs)).status == 201
    before = kube.get(path).body
    w = NodeMetricSpecWriter(transport, node_name=node)
    refused = w.ensure(SPEC)
    assert refused.result == "conflict", refused
    assert refused.conflicts == ((KOORD, ".spec.metricCollectPolicy.aggregateDurationSeconds"),)
    assert kube.get(path).body["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    shared = w.ensure({"metricCollectPolicy": {"aggregateDurationSeconds": 600, "reportIntervalSeconds": 60}})
    assert shared.result == "unchanged", shared  # equal values: now ours too, the spec as it was
    assert kube.get(path).body["spec"] == theirs
    managers = {e["manager"] for e in kube.get(path).body["metadata"]["managedFields"]}
    assert managers == {"hookserver", KOORD}


def test_nodemetric_missing_crd_is_not_found(kube: KubeHttp, transport: ApiClientTransport) -> None:
    delivery = NodeMetricSpecWriter(transport, node_name="hookserver-e2e-x",
                                    group_path="/apis/slo-absent.hookserver.test/v1alpha1").ensure(SPEC)
    assert delivery.result == "not_found" and "not installed" in delivery.detail
