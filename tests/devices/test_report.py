"""The Device object against hand-written JSON in koordlet's shape (states_device_linux.go, device_types.go)."""

from __future__ import annotations

import json

from collectors.nvml import GpuDevice
from hookserver.devices.rdma import RdmaDevice
from hookserver.devices.report import build_device, canonical, gpu_model_label, sysfs_bus_id

GIB = 1024 ** 3


def gpu(minor: int, *, name: str = "NVIDIA A100-SXM4-80GB", healthy: bool = True, reason: str = "",
        numa: int | None = 0, root: str = "pci0000:00", memory: int = 80 * GIB) -> GpuDevice:
    return GpuDevice(index=minor, uuid=f"GPU-{minor:04d}", name=name, minor=minor, memory_total_bytes=memory,
                     bus_id=f"00000000:{0x10 + minor:02X}:00.0", numa_node=numa, pcie_root=root, healthy=healthy,
                     unhealthy_reason=reason)


OWNER = [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "uid-1", "controller": True,
          "blockOwnerDeletion": True}]


def test_no_devices_is_an_empty_spec_without_labels() -> None:
    doc = build_device(node_name="n1", node_uid="uid-1")
    assert doc == {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Device",
                   "metadata": {"name": "n1", "ownerReferences": OWNER}, "spec": {}}


def test_one_gpu_exactly_as_koordlet_writes_it() -> None:
    doc = build_device(node_name="n1", node_uid="uid-1", gpus=[gpu(0)], driver_version="535.104.05")
    expected = json.loads("""
    {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Device",
     "metadata": {"name": "n1",
                  "labels": {"node.koordinator.sh/gpu-driver-version": "535.104.05",
                             "node.koordinator.sh/gpu-model": "A100-SXM4-80GB",
                             "node.koordinator.sh/gpu-vendor": "nvidia"},
                  "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "uid-1",
                                       "controller": true, "blockOwnerDeletion": true}]},
     "spec": {"devices": [
       {"type": "gpu", "id": "GPU-0000", "minor": 0, "health": true,
        "resources": {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": "80Gi",
                      "koordinator.sh/gpu-memory-ratio": "100"},
        "topology": {"socketID": -1, "nodeID": 0, "pcieID": "pci0000:00", "busID": "0000:10:00.0"}}]}}
    """)
    assert doc == expected
    # Go's field order and sorted maps, so the text (what "unchanged" compares) is stable
    assert canonical(doc) == canonical(expected)


def test_eight_gpus_sorted_by_minor_and_rdma_after_them() -> None:
    gpus = [gpu(m, numa=m // 4, root=f"pci0000:{m // 4:02x}") for m in (5, 2, 7, 0, 1, 6, 3, 4)]
    rdma = [RdmaDevice(bus_id="0000:3b:00.0", names=("mlx5_0",), minor=0, numa_node=0, pcie_root="pci0000:3a",
                       healthy=True, vf_enabled=True, vfs=("0000:3b:00.3", "0000:3b:00.2"))]
    doc = build_device(node_name="n1", gpus=gpus, driver_version="550.54.15", rdma=rdma)
    devices = doc["spec"]["devices"]
    assert [(d["type"], d["minor"]) for d in devices] == [("gpu", m) for m in range(8)] + [("rdma", 0)]
    assert [d["topology"]["nodeID"] for d in devices[:8]] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert devices[8] == {
        "type": "rdma", "id": "0000:3b:00.0", "minor": 0, "health": True,
        "resources": {"koordinator.sh/rdma": "100"},
        "topology": {"socketID": -1, "nodeID": 0, "pcieID": "pci0000:3a", "busID": "0000:3b:00.0"},
        "vfGroups": [{"vfs": [{"minor": -1, "busID": "0000:3b:00.2"}, {"minor": -1, "busID": "0000:3b:00.3"}]}],
    }
    assert "ownerReferences" not in doc["metadata"]  # no Node uid known yet: no reference with an empty uid


def test_an_unhealthy_gpu_is_health_false_with_koordlets_condition() -> None:
    doc = build_device(node_name="n1", gpus=[gpu(0), gpu(1, healthy=False, reason="Xid79: GPU has fallen off the bus")],
                       unhealthy_since={"GPU-0001": "2026-11-29T04:00:00Z"})
    healthy, sick = doc["spec"]["devices"]
    assert healthy["health"] is True and "conditions" not in healthy
    assert sick["health"] is False
    assert sick["conditions"] == [{"type": "Healthy", "status": "False", "lastTransitionTime": "2026-11-29T04:00:00Z",
                                   "reason": "Xid79", "message": "GPU has fallen off the bus"}]
    other = build_device(node_name="n1", gpus=[gpu(0, healthy=False, reason="stopped answering NVML")])
    assert other["spec"]["devices"][0]["conditions"][0]["reason"] == "Unknown"
    assert other["spec"]["devices"][0]["conditions"][0]["message"] == "stopped answering NVML"


def test_topology_only_when_numa_root_and_bus_are_known() -> None:
    doc = build_device(node_name="n1", gpus=[gpu(0, numa=None), gpu(1, root=""), gpu(2, numa=1)])
    assert ["topology" in d for d in doc["spec"]["devices"]] == [False, False, True]


def test_model_and_driver_labels_follow_koordlets_normalisation() -> None:
    assert gpu_model_label(["NVIDIA A100 SXM4 80GB"] * 2) == "A100-SXM4-80GB"
    assert gpu_model_label(["Tesla T4"]) == "Tesla-T4"
    assert gpu_model_label(["Tesla T4", "Tesla P40"]) == ""
    mixed = build_device(node_name="n1", gpus=[gpu(0, name="Tesla T4"), gpu(1, name="Tesla P40")], driver_version="470")
    # mixed models: koordlet reports neither model nor driver version, the vendor still
    assert mixed["metadata"]["labels"] == {"node.koordinator.sh/gpu-vendor": "nvidia"}
    odd = build_device(node_name="n1", gpus=[gpu(0, name="NVIDIA H100 (rev/2)")], driver_version="550")
    assert "node.koordinator.sh/gpu-model" not in odd["metadata"]["labels"]  # not a valid label value


def test_memory_is_a_binary_quantity_and_bus_ids_are_sysfs_form() -> None:
    doc = build_device(node_name="n1", gpus=[gpu(0, memory=16160 * 1024 ** 2), gpu(1, memory=15 * GIB + 1)])
    mem = [d["resources"]["koordinator.sh/gpu-memory"] for d in doc["spec"]["devices"]]
    assert mem == ["16160Mi", str(15 * GIB + 1)]
    assert sysfs_bus_id("00000000:3B:00.0") == "0000:3b:00.0"
    assert sysfs_bus_id("0000:af:00.1") == "0000:af:00.1"


def test_eight_gpus_and_two_rdma_pfs_match_the_hand_written_document() -> None:
    """tests/devices/fixtures/device_8gpu_rdma.json: an 8 x H200 node with two RDMA PFs, GPU 6 fallen off the bus
    and one PF's port down, written out by hand in koordlet's field order."""
    from pathlib import Path

    fixture = Path(__file__).parent / "fixtures" / "device_8gpu_rdma.json"
    expected = json.loads(fixture.read_text())
    roots = [0x17, 0x3A, 0x5D, 0x80, 0x97, 0xB8, 0xD7, 0xE8]
    buses = [0x18, 0x3B, 0x5E, 0x81, 0x98, 0xB9, 0xD8, 0xE9]
    gpus = [GpuDevice(index=m, uuid=f"GPU-{m:04d}", name="NVIDIA H200", minor=m, memory_total_bytes=143771 * 1024 ** 2,
                      bus_id=f"00000000:{buses[m]:02X}:00.0", numa_node=m // 4, pcie_root=f"pci0000:{roots[m]:02x}",
                      healthy=m != 6, unhealthy_reason="Xid79: GPU has fallen off the bus" if m == 6 else "")
            for m in (3, 7, 0, 6, 1, 5, 2, 4)]  # NVML's order is not the minors'
    rdma = [RdmaDevice(bus_id="0000:9a:00.0", names=("mlx5_1",), minor=1, numa_node=1, pcie_root="pci0000:97",
                       healthy=False),
            RdmaDevice(bus_id="0000:1a:00.0", names=("mlx5_0",), minor=0, numa_node=0, pcie_root="pci0000:17",
                       healthy=True, vf_enabled=True, vfs=("0000:1a:00.2", "0000:1a:00.3"))]
    doc = build_device(node_name="gpu-node-1", node_uid="6f1c2a4e-0000-4000-8000-000000000001", gpus=gpus,
                       driver_version="550.90.07", rdma=rdma, unhealthy_since={"GPU-0006": "2026-11-29T04:00:00Z"})
    assert doc == expected
    assert canonical(doc) == canonical(expected)  # key order too: the text is what "unchanged" compares


def test_a_bus_id_in_a_pci_domain_past_16_bits_keeps_its_domain_and_a_bad_one_gives_no_topology() -> None:
    """The report and the collector spell bus ids one way (hookserver.gpu_inventory.sysfs_bus_id): a domain over
    0xffff keeps its digits (sysfs writes `10000:05:00.0`), and text that is no PCI address leaves the topology
    out instead of publishing it as a bus id."""
    from dataclasses import replace

    wide = replace(gpu(0), bus_id="00010000:05:00.0")
    junk = replace(gpu(1), bus_id="not-a-bus-id")
    devices = build_device(node_name="n1", gpus=[wide, junk])["spec"]["devices"]
    assert devices[0]["topology"]["busID"] == "10000:05:00.0"
    assert "topology" not in devices[1]
