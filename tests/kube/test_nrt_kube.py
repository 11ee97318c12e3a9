"""The NodeResourceTopology report against a real kube-apiserver (1.20): with the CRD missing (one warning, no
storm), then installed (tests/kube/nrt/): the object created by server-side apply with koordinator's
annotations and zones as the apiserver stores them, an unchanged document never re-sent, a change applied, the
manifest's ClusterRole enough for it (create, then patch) and nothing more (no delete, no read), and the zones'
batch figures beside the real Node's offer.

The CRD is cluster-wide: these tests remove it first (to see it missing) and remove it again at the end if it
was not there before."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hookserver.capacity import CapacityPublisher, CapacitySettings
from hookserver.capacity.numa_link import link_numa_zones
from hookserver.informer import NodeCapacityWriter
from hookserver.informer.nrt import NRT_RESOURCE_PATH, NodeResourceTopologyWriter
from hookserver.informer.transport import ApiClientTransport, load_client_configuration
from hookserver.koord_resources import BATCH_CPU, BATCH_MEMORY
from hookserver.quantity import parse_quantity
from hookserver.store import PodRecord, StateStore
from hookserver.topology import ANNOTATION_RESOURCE_STATUS
from hookserver.topology.publisher import TopologyPublisher
from tests.capacity.world import World
from tests.kube.conftest import NodeFactory
from tests.kube.kubehttp import KubeHttp
from tests.kube.test_rbac import Agent, agent, koordinator_namespace  # noqa: F401 - fixtures
from tests.topology.sysfs import (
    one_socket_two_numa_four_cpus_each,
    two_sockets_two_numa_eight_cores_two_threads,
    write_tree,
)

CRD = Path(__file__).parent / "nrt" / "noderesourcetopologies.yaml"
CRD_NAME = "noderesourcetopologies.topology.node.k8s.io"
CRD_PATH = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}"


def _wait(what: str, ok: Any, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ok():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not true after {timeout_s} s")
        time.sleep(0.1)


def _remove_crd(kube: KubeHttp) -> None:
    if kube.get(CRD_PATH).status != 404:
        kube.delete(CRD_PATH)
    _wait("CRD gone", lambda: kube.get(CRD_PATH).status == 404)
    _wait("NRT resource gone", lambda: kube.get(NRT_RESOURCE_PATH).status == 404)


@pytest.fixture(scope="module")
def crd_state(kube: KubeHttp) -> Iterator[dict[str, bool]]:
    state = {"was_there": kube.get(CRD_PATH).ok}
    yield state
    if not state["was_there"]:
        _remove_crd(kube)


def _install_crd(kube: KubeHttp) -> None:
    if kube.get(CRD_PATH).status == 404:
        kube.must(kube.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", yaml.safe_load(CRD.read_text())),
                  "create NRT CRD")
    _wait("NRT resource served", lambda: kube.get(NRT_RESOURCE_PATH).ok)


class Recording:
    def __init__(self, inner: ApiClientTransport) -> None:
        self.inner = inner
        self.calls = 0

    def request_json(self, method: str, path: str, body: Any = None, **kwargs: Any) -> tuple[int, Any]:
        self.calls += 1
        return self.inner.request_json(method, path, body, **kwargs)


def _publisher(tmp_path: Path, transport: Any, node: str, store: StateStore) -> TopologyPublisher:
    roots = write_tree(tmp_path, *two_sockets_two_numa_eight_cores_two_threads(), smt=True)
    writer = NodeResourceTopologyWriter(transport, node_name=node)
    return TopologyPublisher(store=store, roots=roots, node_name=node, sink=writer)


def test_missing_crd_is_one_warning(kube: KubeHttp, kube_kubeconfig: str, crd_state: dict[str, bool],
                                    tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _remove_crd(kube)
    transport = Recording(ApiClientTransport(load_client_configuration(kube_kubeconfig)))
    publisher = _publisher(tmp_path, transport, "hookserver-e2e-nrt-missing", StateStore())
    with caplog.at_level(logging.INFO, logger="hookserver.topology.publisher"):
        assert [publisher.tick() for _ in range(5)] == ["crd_missing"] * 5
    assert transport.calls == 5  # one request a round, no retries within it
    assert len(caplog.records) == 1 and "not installed" in caplog.records[0].getMessage()
    transport.inner.close()


def test_the_report_is_created_kept_and_never_rewritten_unchanged(
    kube: KubeHttp, kube_kubeconfig: str, kube_nodes: NodeFactory, crd_state: dict[str, bool], tmp_path: Path
) -> None:
    _install_crd(kube)
    node = kube_nodes.make("nrt")["metadata"]["name"]
    path = f"{NRT_RESOURCE_PATH}/{node}"
    transport = Recording(ApiClientTransport(load_client_configuration(kube_kubeconfig)))
    store = StateStore()
    publisher = _publisher(tmp_path, transport, node, store)
    try:
        assert publisher.tick() == "ok", publisher.last_detail
        stored = kube.must(kube.get(path), "get NRT")
        assert stored["topologyPolicies"] == ["None"]
        assert stored["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "Koordinator"}
        assert [z["name"] for z in stored["zones"]] == ["node-0", "node-1", "node-2", "node-3"]
        assert stored["zones"][0]["resources"][0] == {"name": "cpu", "capacity": "16", "allocatable": "16", "available": "16"}
        ann = stored["metadata"]["annotations"]
        assert json.loads(ann["node.koordinator.sh/cpu-shared-pools"])[0] == {"socket": 0, "node": 0, "cpuset": "0-7,32-39"}
        assert ann["node.koordinator.sh/pod-cpu-allocs"] == "null"
        assert [m["manager"] for m in stored["metadata"]["managedFields"]] == ["hookserver"]
        version = stored["metadata"]["resourceVersion"]
        calls = transport.calls
        assert [publisher.tick() for _ in range(3)] == ["unchanged"] * 3
        assert transport.calls == calls  # nothing sent
        assert kube.get(path).body["metadata"]["resourceVersion"] == version
        store.upsert_pod(PodRecord(uid="u1", namespace="ns", name="lse", labels={"koordinator.sh/qosClass": "LSE"},
                                   annotations={ANNOTATION_RESOURCE_STATUS: '{"cpuset":"0-1,32-33"}'}, phase="Running"))
        assert publisher.tick() == "ok"
        after = kube.get(path).body
        assert after["metadata"]["resourceVersion"] != version
        pools = json.loads(after["metadata"]["annotations"]["node.koordinator.sh/cpu-shared-pools"])
        assert pools[0] == {"socket": 0, "node": 0, "cpuset": "2-7,34-39"}
    finally:
        kube.delete(path)
        transport.inner.close()


def test_the_node_owns_its_nrt_on_the_real_apiserver(
    kube: KubeHttp, kube_kubeconfig: str, kube_nodes: NodeFactory, crd_state: dict[str, bool], tmp_path: Path
) -> None:
    """koordlet's controller reference: the stored NRT names the real Node (its uid) as its owner, so the
    apiserver's garbage collector removes the report with the Node."""
    from hookserver.store import NodeRecord

    _install_crd(kube)
    made = kube_nodes.make("nrt-owner")
    node, uid = made["metadata"]["name"], made["metadata"]["uid"]
    path = f"{NRT_RESOURCE_PATH}/{node}"
    transport = ApiClientTransport(load_client_configuration(kube_kubeconfig))
    store = StateStore()
    store.set_node(NodeRecord(name=node, uid=uid))
    publisher = _publisher(tmp_path, transport, node, store)
    try:
        assert publisher.tick() == "ok", publisher.last_detail
        (owner,) = kube.must(kube.get(path), "get NRT")["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == ("Node", node, uid, True)
    finally:
        kube.delete(path)
        transport.close()


def test_kubelet_allocs_and_hugepages_as_the_apiserver_stores_them(
    kube: KubeHttp, kube_kubeconfig: str, kube_nodes: NodeFactory, crd_state: dict[str, bool], tmp_path: Path
) -> None:
    """The kubelet's static CPU manager (a real `cpu_manager_state` file) and, with HugePageReport on, a NUMA
    node's hugepage pools: the stored object carries `pod-cpu-allocs`, the policy, pools without the kubelet's
    CPUs, and the zones' hugepages with memory less the pools (node-0: 64 GiB - 2 GiB - 1 GiB = 61 GiB)."""
    _install_crd(kube)
    node = kube_nodes.make("nrt-kubelet")["metadata"]["name"]
    path = f"{NRT_RESOURCE_PATH}/{node}"
    kubelet = tmp_path / "kubelet"
    kubelet.mkdir()
    (kubelet / "cpu_manager_state").write_text(json.dumps({
        "policyName": "static", "defaultCpuSet": "0,3-63",
        "entries": {"uid-g": {"app": "1-2"}}, "checksum": 1}))
    roots = write_tree(tmp_path, *two_sockets_two_numa_eight_cores_two_threads(), smt=True)
    for size_kb, pages in ((2048, 1024), (1048576, 1)):
        pool = tmp_path / "sys/devices/system/node/node0/hugepages" / f"hugepages-{size_kb}kB"
        pool.mkdir(parents=True)
        (pool / "nr_hugepages").write_text(f"{pages}\n")
        (pool / "free_hugepages").write_text(f"{pages}\n")
    transport = ApiClientTransport(load_client_configuration(kube_kubeconfig))
    store = StateStore()
    store.upsert_pod(PodRecord(uid="uid-g", namespace="ns", name="guaranteed", phase="Running"))
    publisher = TopologyPublisher(store=store, roots=roots, node_name=node,
                                  sink=NodeResourceTopologyWriter(transport, node_name=node),
                                  kubelet_root_dir=str(kubelet), hugepage_report=True)
    try:
        assert publisher.tick() == "ok", publisher.last_detail
        stored = kube.must(kube.get(path), "get NRT")
        ann = stored["metadata"]["annotations"]
        assert json.loads(ann["node.koordinator.sh/pod-cpu-allocs"]) == [
            {"namespace": "ns", "name": "guaranteed", "uid": "uid-g", "cpuset": "1-2", "managedByKubelet": True}]
        assert json.loads(ann["kubelet.koordinator.sh/cpu-manager-policy"]) == {"policy": "static"}
        assert json.loads(ann["node.koordinator.sh/cpu-shared-pools"])[0] == {"socket": 0, "node": 0,
                                                                               "cpuset": "0,3-7,32-39"}
        zone0 = {r["name"]: r["capacity"] for r in stored["zones"][0]["resources"]}
        assert (zone0["hugepages-2Mi"], zone0["hugepages-1Gi"], zone0["memory"]) == ("2Gi", "1Gi", "61Gi")
        zone1 = {r["name"]: r["capacity"] for r in stored["zones"][1]["resources"]}
        assert (zone1["hugepages-2Mi"], zone1["hugepages-1Gi"], zone1["memory"]) == ("0", "0", "64Gi")
    finally:
        kube.delete(path)
        transport.close()


def test_zones_koord_manager_writes_into_are_left_to_it_and_the_report_goes_on(
    kube: KubeHttp, kube_kubeconfig: str, kube_nodes: NodeFactory, crd_state: dict[str, bool], tmp_path: Path
) -> None:
    """koord-manager's batchresource plugin writes each zone's batch figures into the NRT with an Update (manager
    "koord-manager"), so it owns the zones list; our next apply conflicted on `.zones` at every tick and the
    cpu-shared-pools annotation stopped following the node. On the real apiserver: the zones are yielded (its
    figures stay), the annotation keeps following."""
    _install_crd(kube)
    node = kube_nodes.make("nrt-km")["metadata"]["name"]
    path = f"{NRT_RESOURCE_PATH}/{node}"
    transport = ApiClientTransport(load_client_configuration(kube_kubeconfig))
    store = StateStore()
    publisher = _publisher(tmp_path, transport, node, store)
    try:
        assert publisher.tick() == "ok", publisher.last_detail
        stored = kube.must(kube.get(path), "get NRT")
        for zone in stored["zones"]:  # what koord-manager's PreUpdate adds, per zone
            zone["resources"] += [
                {"name": "kubernetes.io/batch-cpu", "capacity": "3000", "allocatable": "3000", "available": "3000"},
                {"name": "kubernetes.io/batch-memory", "capacity": "4Gi", "allocatable": "4Gi", "available": "4Gi"},
            ]
        stored["metadata"].pop("managedFields", None)
        kube.must(kube.request("PUT", path, stored, query={"fieldManager": "koord-manager"}), "koord-manager update")
        store.upsert_pod(PodRecord(uid="u1", namespace="ns", name="lsr", labels={"koordinator.sh/qosClass": "LSR"},
                                   annotations={ANNOTATION_RESOURCE_STATUS: '{"cpuset":"0-1,32-33"}'}, phase="Running"))
        assert publisher.tick() == "ok", publisher.last_detail
        assert "zones left to koord-manager" in publisher.last_detail
        after = kube.must(kube.get(path), "get NRT")
        pools = json.loads(after["metadata"]["annotations"]["node.koordinator.sh/cpu-shared-pools"])
        assert pools[0] == {"socket": 0, "node": 0, "cpuset": "2-7,34-39"}  # the report still follows the node
        for zone in after["zones"]:  # and koord-manager's figures are still there
            assert {r["name"] for r in zone["resources"]} >= {"cpu", "memory", "kubernetes.io/batch-cpu",
                                                              "kubernetes.io/batch-memory"}
    finally:
        kube.delete(path)
        transport.close()


def test_the_clusterrole_allows_create_and_patch_and_nothing_else(
    agent: Agent, kube: KubeHttp, kube_nodes: NodeFactory, crd_state: dict[str, bool], tmp_path: Path  # noqa: F811
) -> None:
    _install_crd(kube)
    node = kube_nodes.make("nrt-sa")["metadata"]["name"]
    path = f"{NRT_RESOURCE_PATH}/{node}"
    transport = ApiClientTransport(load_client_configuration(agent.kubeconfig))
    store = StateStore()
    publisher = _publisher(tmp_path, transport, node, store)
    try:
        assert publisher.tick() == "ok", publisher.last_detail  # the apply creates: authorized as create
        store.upsert_pod(PodRecord(uid="u1", namespace="ns", name="lsr", labels={"koordinator.sh/qosClass": "LSR"},
                                   annotations={ANNOTATION_RESOURCE_STATUS: '{"cpuset":"5"}'}, phase="Running"))
        assert publisher.tick() == "ok", publisher.last_detail  # and changes: authorized as patch
        assert "5" not in json.loads(kube.get(path).body["metadata"]["annotations"][
            "node.koordinator.sh/cpu-shared-pools"])[0]["cpuset"].split(",")
        sa = agent.client
        assert sa.get(path).status == 403
        assert sa.delete(path).status == 403
        assert sa.get(NRT_RESOURCE_PATH).status == 403
    finally:
        kube.delete(path)
        transport.close()


def test_the_zones_carry_batch_figures_that_add_up_to_the_nodes_offer(
    kube: KubeHttp, kube_kubeconfig: str, kube_nodes: NodeFactory, crd_state: dict[str, bool], tmp_path: Path
) -> None:
    """NUMA-level batch capacity as the apiserver stores it: the capacity publisher writes the offer to a real
    Node and the NRT publisher, joined to it by `link_numa_zones`, puts each zone's batch-cpu / batch-memory into
    the real NRT. The scripted node (tests/capacity/world.py: 8 cores / 32 GiB, kubelet reserving 500m / 2 GiB,
    system 500m / 1 GiB) over two sysfs zones of 4 CPUs / 16 GiB gives, by hand, 2150 and 10093173146 per zone
    and 4300 and 20186346292 for the node (tests/capacity/test_numa_nrt.py)."""
    _install_crd(kube)
    node = kube_nodes.make("nrt-batch")["metadata"]["name"]
    path = f"{NRT_RESOURCE_PATH}/{node}"
    transport = ApiClientTransport(load_client_configuration(kube_kubeconfig))
    world = World()
    capacity = CapacityPublisher(store=world.store, settings=CapacitySettings(warmup_s=10.0),
                                 sink=NodeCapacityWriter(transport, node_name=node), standalone=False,
                                 clock=world.clock)
    roots = write_tree(tmp_path, *one_socket_two_numa_four_cpus_each())
    topology = TopologyPublisher(store=world.store, roots=roots, node_name=node,
                                 sink=NodeResourceTopologyWriter(transport, node_name=node))
    link_numa_zones(capacity, topology)
    try:
        assert topology.tick() == "ok", topology.last_detail
        world.sample(30)
        outcome = capacity.tick()
        assert outcome.state == "published", outcome
        assert topology.tick() == "ok", topology.last_detail
        stored = kube.must(kube.get(path), "get NRT")
        zones = {z["name"]: {r["name"]: r for r in z["resources"]} for z in stored["zones"]}
        for name in ("node-0", "node-1"):
            assert zones[name][BATCH_CPU] == {"name": BATCH_CPU, "capacity": "2150", "allocatable": "2150",
                                              "available": "2150"}
            assert zones[name][BATCH_MEMORY]["allocatable"] == "10093173146"
        offered = kube.must(kube.get(f"/api/v1/nodes/{node}"), "get node")["status"]["allocatable"]
        assert sum(parse_quantity(z[BATCH_CPU]["allocatable"]).value() for z in zones.values()) == \
            parse_quantity(offered[BATCH_CPU]).value() == 4300
        assert sum(parse_quantity(z[BATCH_MEMORY]["allocatable"]).value() for z in zones.values()) == \
            parse_quantity(offered[BATCH_MEMORY]).value() == 20186346292
        assert [m["manager"] for m in stored["metadata"]["managedFields"]] == ["hookserver"]
    finally:
        kube.delete(path)
        transport.close()
