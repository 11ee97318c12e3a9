"""The Device report and the GPU share of the Node against a real kube-apiserver (1.20), with the CRD from
deploy/crds/: missing (one warning, no storm), then installed: the object created by server-side apply exactly
as built (nothing pruned by the schema), an unchanged document never re-sent, a GPU's health change applied,
koordlet as a second writer refused with 409 instead of overwritten; GPU capacity on a real Node beside the
batch capacity manager, yielded to koord-manager; and the ClusterRole enough (create, then patch), no more.

The CRD is cluster-wide: the tests remove it first (to see it missing) and again at the end if it was not
there before."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from collectors.nvml import GpuDevice
from hookserver.devices.node_resources import NodeDeviceResources
from hookserver.devices.publisher import DevicePublisher
from hookserver.devices.rdma import RdmaDevice, RdmaDiscovery
from hookserver.informer.device import DEVICE_RESOURCE_PATH, DeviceWriter
from hookserver.informer.node_capacity import NodeCapacityWriter
from hookserver.informer.transport import ApiClientTransport, load_client_configuration
from tests.kube.conftest import NodeFactory
from tests.kube.kubehttp import KubeHttp
from tests.kube.test_rbac import Agent, agent, koordinator_namespace  # noqa: F401 - fixtures

CRD = Path(__file__).resolve().parents[2] / "deploy" / "crds" / "scheduling.koordinator.sh_devices.yaml"
CRD_NAME = "devices.scheduling.koordinator.sh"
CRD_PATH = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}"
APPLY = "application/apply-patch+yaml"
GIB = 1024 ** 3


def _gpu(minor: int, *, healthy: bool = True, reason: str = "") -> GpuDevice:
    return GpuDevice(index=minor, uuid=f"GPU-e2e-{minor}", name="NVIDIA A100-SXM4-80GB", minor=minor,
                     memory_total_bytes=80 * GIB, bus_id=f"00000000:{0x10 + minor:02X}:00.0", numa_node=0,
                     pcie_root="pci0000:00", healthy=healthy, unhealthy_reason=reason)


RDMA = RdmaDiscovery((RdmaDevice(bus_id="0000:3b:00.0", names=("mlx5_0",), minor=0, numa_node=0,
                                 pcie_root="pci0000:3a", healthy=True, vf_enabled=True,
                                 vfs=("0000:3b:00.2", "0000:3b:00.3")),))


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
    _wait("Device resource gone", lambda: kube.get(DEVICE_RESOURCE_PATH).status == 404)


def _install_crd(kube: KubeHttp) -> None:
    if kube.get(CRD_PATH).status == 404:
        kube.must(kube.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", yaml.safe_load(CRD.read_text())),
                  "create Device CRD")
    _wait("Device resource served", lambda: kube.get(DEVICE_RESOURCE_PATH).ok)


@pytest.fixture(scope="module")
def crd_state(kube: KubeHttp) -> Iterator[dict[str, bool]]:
    state = {"was_there": kube.get(CRD_PATH).ok}
    yield state
    if not state["was_there"]:
        _remove_crd(kube)


class Recording:
    def __init__(self, inner: ApiClientTransport) -> None:
        self.inner = inner
        self.calls = 0

    def request_json(self, method: str, path: str, body: Any = None, **kwargs: Any) -> tuple[int, Any]:
        self.calls += 1
        return self.inner.request_json(method, path, body, **kwargs)


class Inventory:
    def __init__(self, *gpus: GpuDevice) -> None:
        self.gpus = list(gpus)

    def __call__(self) -> list[GpuDevice]:
        return list(self.gpus)


def test_missing_crd_is_one_warning(kube: KubeHttp, kube_kubeconfig: str, crd_state: dict[str, bool],
                                    caplog: pytest.LogCaptureFixture) -> None:
    _remove_crd(kube)
    transport = Recording(ApiClientTransport(load_client_configuration(kube_kubeconfig)))
    publisher = DevicePublisher(node_name="hookserver-e2e-device-missing", gpus=Inventory(_gpu(0)),
                                sink=DeviceWriter(transport, node_name="hookserver-e2e-device-missing"))
    with caplog.at_level(logging.INFO, logger="hookserver.devices.publisher"):
        assert [publisher.tick() for _ in range(5)] == ["crd_missing"] * 5
    assert transport.calls == 5
    assert len(caplog.records) == 1 and "not installed" in caplog.records[0].getMessage()
    transport.inner.close()


def test_the_device_is_created_kept_changed_on_health_and_defended_against_no_one(
    kube: KubeHttp, kube_kubeconfig: str, kube_nodes: NodeFactory, crd_state: dict[str, bool]
) -> None:
    _install_crd(kube)
    node = kube_nodes.make("device")
    name, uid = node["metadata"]["name"], node["metadata"]["uid"]
    path = f"{DEVICE_RESOURCE_PATH}/{name}"
    transport = Recording(ApiClientTransport(load_client_configuration(kube_kubeconfig)))
    inventory = Inventory(*(_gpu(m) for m in range(8)))
    publisher = DevicePublisher(node_name=name, sink=DeviceWriter(transport, node_name=name), gpus=inventory,
                                driver_version=lambda: "550.54.15", rdma=lambda: RDMA, node_uid=lambda: uid)
    try:
        assert publisher.tick() == "ok", publisher.last_detail
        stored = kube.must(kube.get(path), "get Device")
        assert stored["spec"] == publisher.document["spec"]  # the schema pruned nothing
        assert stored["metadata"]["labels"] == publisher.document["metadata"]["labels"]
        assert stored["metadata"]["ownerReferences"][0]["uid"] == uid
        assert [m["manager"] for m in stored["metadata"]["managedFields"]] == ["hookserver"]
        version = stored["metadata"]["resourceVersion"]
        calls = transport.calls
        assert [publisher.tick() for _ in range(3)] == ["unchanged"] * 3
        assert transport.calls == calls and kube.get(path).body["metadata"]["resourceVersion"] == version
        inventory.gpus[5] = _gpu(5, healthy=False, reason="Xid79: GPU has fallen off the bus")
        assert publisher.tick() == "ok"
        sick = kube.get(path).body["spec"]["devices"][5]
        assert sick["health"] is False and sick["conditions"][0]["reason"] == "Xid79"
        # koordlet still running: it takes the devices list; the agent's next change is refused, not forced
        taken = kube.request("PATCH", path, {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Device",
                                             "metadata": {"name": name}, "spec": {"devices": []}},
                             query={"fieldManager": "koordlet", "force": "true"}, content_type=APPLY)
        assert taken.ok, taken.reason()
        inventory.gpus[5] = _gpu(5)
        assert publisher.tick() == "conflict"
        assert "koordlet" in publisher.last_detail
        assert kube.get(path).body["spec"]["devices"] == []
    finally:
        kube.delete(path)
        transport.inner.close()


def test_gpu_capacity_beside_batch_capacity_and_yielded_to_koord_manager(
    kube: KubeHttp, kube_kubeconfig: str, kube_nodes: NodeFactory
) -> None:
    name = kube_nodes.make("gpu-capacity")["metadata"]["name"]
    transport = ApiClientTransport(load_client_configuration(kube_kubeconfig))
    batch = NodeCapacityWriter(transport, node_name=name)
    assert batch.apply({"kubernetes.io/batch-cpu": "1500"}).result == "ok"
    share = NodeDeviceResources(resources=NodeCapacityWriter(transport, node_name=name,
                                                             field_manager="hookserver-devices"))
    inventory = Inventory(_gpu(0), _gpu(1, healthy=False))
    publisher = DevicePublisher(node_name=name, sink=_Nowhere(), gpus=inventory, node_resources=share)
    try:
        publisher.tick()
        assert share.last.state == "published", share.last.detail
        status = kube.get(f"/api/v1/nodes/{name}").body["status"]
        assert status["allocatable"]["koordinator.sh/gpu-core"] == "100"
        assert status["capacity"]["koordinator.sh/gpu-memory"] == "80Gi"
        assert status["allocatable"]["kubernetes.io/batch-cpu"] == "1500"  # the batch manager's field stays
        taken = kube.request("PATCH", f"/api/v1/nodes/{name}/status", {
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"capacity": {"koordinator.sh/gpu-core": "200"}, "allocatable": {"koordinator.sh/gpu-core": "200"}}},
            query={"fieldManager": "koordinator-manager", "force": "true"}, content_type=APPLY)
        assert taken.ok, taken.reason()
        inventory.gpus = [_gpu(0), _gpu(1)]  # GPU 1 recovers: the agent wants 200 too, a shared value
        publisher.tick()
        assert share.last.state == "published", share.last
        inventory.gpus = [_gpu(0)]  # and then 100: koord-manager owns the field with 200 now
        publisher.tick()
        assert share.last.state == "yielded", share.last
        assert "koordinator-manager" in share.last.detail
        assert kube.get(f"/api/v1/nodes/{name}").body["status"]["allocatable"]["koordinator.sh/gpu-core"] == "200"
    finally:
        transport.close()


class _Nowhere:
    target = "file"
    where = "nowhere"

    def apply(self, document: Any) -> Any:
        class _Ok:
            result = "ok"
            detail = ""

        return _Ok()


def test_the_clusterrole_allows_create_and_patch_and_nothing_else(
    agent: Agent, kube: KubeHttp, kube_nodes: NodeFactory, crd_state: dict[str, bool]  # noqa: F811
) -> None:
    _install_crd(kube)
    name = kube_nodes.make("device-sa")["metadata"]["name"]
    path = f"{DEVICE_RESOURCE_PATH}/{name}"
    transport = ApiClientTransport(load_client_configuration(agent.kubeconfig))
    inventory = Inventory(_gpu(0))
    publisher = DevicePublisher(node_name=name, sink=DeviceWriter(transport, node_name=name), gpus=inventory)
    try:
        assert publisher.tick() == "ok", publisher.last_detail  # the apply creates: authorized as create
        inventory.gpus = [_gpu(0), _gpu(1)]
        assert publisher.tick() == "ok", publisher.last_detail  # and changes: authorized as patch
        assert len(kube.get(path).body["spec"]["devices"]) == 2
        sa = agent.client
        assert sa.get(path).status == 403
        assert sa.delete(path).status == 403
        assert sa.get(DEVICE_RESOURCE_PATH).status == 403
    finally:
        kube.delete(path)
        transport.close()
