"""GPU/RDMA capacity and labels on the Node (koord-manager's gpudeviceresource and rdmadevicereource rules),
written with the informer's NodeCapacityWriter and NodeLabelWriter under the "never two writers" rule."""

from __future__ import annotations

from typing import Any

import pytest

from hookserver.devices.node_resources import NodeDeviceResources, node_labels, node_resources
from hookserver.devices.rdma import RdmaDevice
from hookserver.devices.report import build_device
from hookserver.informer.device import NodeLabelWriter
from hookserver.informer.node_capacity import NodeCapacityWriter
from tests.devices.apiserver import NODES, SsaApiserver
from tests.devices.test_report import gpu

MANAGER = "hookserver-devices"
RDMA = RdmaDevice(bus_id="0000:3b:00.0", names=("mlx5_0",), minor=0, numa_node=0, pcie_root="pci0000:3a",
                  healthy=True)


def _eight_one_sick() -> dict[str, Any]:
    gpus = [gpu(m) for m in range(8)]
    gpus[3] = gpu(3, healthy=False, reason="Xid48: double bit ECC")
    return build_device(node_name="n1", gpus=gpus, driver_version="550.54.15", rdma=[RDMA])


def test_sums_over_healthy_devices_only() -> None:
    assert node_resources(_eight_one_sick()) == {
        "koordinator.sh/gpu": "700",
        "koordinator.sh/gpu-core": "700",
        "koordinator.sh/gpu-memory": "560Gi",
        "koordinator.sh/gpu-memory-ratio": "700",
        "koordinator.sh/rdma": "100",
    }
    all_sick = build_device(node_name="n1", gpus=[gpu(0, healthy=False)])
    assert node_resources(all_sick) == {}  # koord-manager resets them: no healthy GPU
    assert node_labels(_eight_one_sick()) == {"node.koordinator.sh/gpu-driver-version": "550.54.15",
                                              "node.koordinator.sh/gpu-model": "A100-SXM4-80GB",
                                              "node.koordinator.sh/gpu-vendor": "nvidia"}


def _share(api: SsaApiserver, *, evidence: list[str] | None = None, now: list[float] | None = None,
           labels: bool = True) -> NodeDeviceResources:
    clock = now if now is not None else [1_800_000_000.0]
    said = evidence if evidence is not None else [""]
    return NodeDeviceResources(
        resources=NodeCapacityWriter(api, node_name="n1", field_manager=MANAGER, sleep=lambda s: None),
        labels=NodeLabelWriter(api, node_name="n1", field_manager=MANAGER + "-labels", sleep=lambda s: None) if labels else None,
        koord_manager_evidence=lambda: said[0], clock=lambda: clock[0])


def test_published_beside_batch_capacity_and_other_labels_and_withdrawn_when_no_gpu_is_healthy() -> None:
    api = SsaApiserver()
    api.add_node("n1", labels={"team": "ml"})
    api.apply_as("hookserver", NODES + "n1/status", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                                                      "status": {"capacity": {"kubernetes.io/batch-cpu": "4000"},
                                                                 "allocatable": {"kubernetes.io/batch-cpu": "4000"}}})
    share = _share(api)
    assert share.step(_eight_one_sick()).state == "published"
    node = api.get(NODES + "n1")
    assert node is not None
    assert node["status"]["allocatable"]["koordinator.sh/gpu-core"] == "700"
    assert node["status"]["capacity"]["koordinator.sh/rdma"] == "100"
    assert node["status"]["allocatable"]["kubernetes.io/batch-cpu"] == "4000"  # batch capacity's manager untouched
    assert node["metadata"]["labels"]["team"] == "ml"
    assert node["metadata"]["labels"]["node.koordinator.sh/gpu-model"] == "A100-SXM4-80GB"
    calls = len(api.calls)
    assert share.step(_eight_one_sick()).state == "unchanged" and len(api.calls) == calls
    # every GPU unhealthy, no RDMA: the GPU resources go, the vendor label stays (the Device still has it)
    gone = share.step(build_device(node_name="n1", gpus=[gpu(0, healthy=False)]))
    assert gone.state == "published"
    node = api.get(NODES + "n1")
    assert node is not None
    assert not any(k.startswith("koordinator.sh/") for k in node["status"]["allocatable"])
    assert node["status"]["allocatable"]["kubernetes.io/batch-cpu"] == "4000"


def test_labels_are_not_written_without_a_label_sink() -> None:
    api = SsaApiserver()
    api.add_node("n1")
    share = _share(api, labels=False)
    assert share.step(_eight_one_sick()).state == "published"
    assert all(path.endswith("/status") for _, path, _, _ in api.calls)
    node = api.get(NODES + "n1")
    assert node is not None and "node.koordinator.sh/gpu-vendor" not in node["metadata"].get("labels", {})


def test_koord_manager_publishes_and_the_agent_takes_back_only_its_own() -> None:
    api = SsaApiserver()
    api.add_node("n1")
    evidence = [""]
    share = _share(api, evidence=evidence)
    assert share.step(_eight_one_sick()).state == "published"
    api.apply_as("koordinator-manager", NODES + "n1/status",
                 {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                  "status": {"capacity": {"koordinator.sh/gpu-core": "700"}, "allocatable": {"koordinator.sh/gpu-core": "700"}}})
    evidence[0] = "NodeSLO n1 exists"
    assert share.step(_eight_one_sick()).state == "withdrawn"
    node = api.get(NODES + "n1")
    assert node is not None
    assert node["status"]["allocatable"] == {"cpu": "8", "koordinator.sh/gpu-core": "700"}  # koord-manager's stays
    assert "node.koordinator.sh/gpu-vendor" not in node["metadata"].get("labels", {})
    calls = len(api.calls)
    assert share.step(_eight_one_sick()).state == "koord-manager" and len(api.calls) == calls


def test_a_field_another_manager_owns_with_another_value_is_yielded_and_not_retried_for_an_hour() -> None:
    api = SsaApiserver()
    api.add_node("n1")
    api.apply_as("koordinator-manager", NODES + "n1/status",
                 {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                  "status": {"capacity": {"koordinator.sh/gpu-core": "800"}, "allocatable": {"koordinator.sh/gpu-core": "800"}}})
    now = [1_800_000_000.0]
    share = _share(api, now=now)
    outcome = share.step(_eight_one_sick())
    assert outcome.state == "yielded" and "koordinator-manager" in outcome.detail
    node = api.get(NODES + "n1")
    assert node is not None and node["status"]["allocatable"]["koordinator.sh/gpu-core"] == "800"
    calls = len(api.calls)
    for _ in range(10):
        now[0] += 60
        assert share.step(_eight_one_sick()).state == "yielded"
    assert len(api.calls) == calls  # no write storm against the other writer
    now[0] += 3600
    share.step(_eight_one_sick())
    assert len(api.calls) == calls + 1  # tried again after the hour


def test_the_label_writer_refuses_other_keys() -> None:
    writer = NodeLabelWriter(SsaApiserver(), node_name="n1", field_manager=MANAGER)
    with pytest.raises(ValueError, match="team"):
        writer.apply({"team": "ml"})


def test_an_unknown_publisher_setting_is_refused() -> None:
    with pytest.raises(ValueError, match="publisher"):
        NodeDeviceResources(resources=None, publisher="both")


def test_the_hand_written_eight_gpu_node_offers_its_seven_healthy_gpus_and_one_rdma_pf() -> None:
    import json
    from pathlib import Path

    device = json.loads((Path(__file__).parent / "fixtures" / "device_8gpu_rdma.json").read_text())
    assert node_resources(device) == {
        "koordinator.sh/gpu": "700",
        "koordinator.sh/gpu-core": "700",
        "koordinator.sh/gpu-memory": "1006397Mi",  # 7 x 143771Mi
        "koordinator.sh/gpu-memory-ratio": "700",
        "koordinator.sh/rdma": "100",  # the PF whose port is down is not offered
    }
