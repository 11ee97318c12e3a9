"""RDMA discovery on fixture sys trees (koordlet's metricsadvisor/devices/rdma rules)."""

from __future__ import annotations

import os
from pathlib import Path

from hookserver.devices.rdma import RdmaDevice, discover_rdma
from tests.devices.sysfs import add_vf, pci_function, rdma_device, roots


def test_no_infiniband_class_is_no_device_and_no_problem(tmp_path: Path) -> None:
    found = discover_rdma(roots(tmp_path))
    assert found.devices == () and found.problems == ()


def test_one_pf_with_vfs(tmp_path: Path) -> None:
    pf = pci_function(tmp_path, "pci0000:3a", "0000:3b:00.0", numa="1", numvfs=2, parent="0000:3a:02.0")
    add_vf(tmp_path, pf, 1, "0000:3b:00.3")
    add_vf(tmp_path, pf, 0, "0000:3b:00.2")
    rdma_device(tmp_path, "mlx5_0", pf, ports={"1": "4: ACTIVE", "2": "4: ACTIVE"})
    found = discover_rdma(roots(tmp_path))
    assert found.problems == ()
    assert found.devices == (RdmaDevice(bus_id="0000:3b:00.0", names=("mlx5_0",), minor=0, numa_node=1,
                                        pcie_root="pci0000:3a", healthy=True, vf_enabled=True,
                                        vfs=("0000:3b:00.2", "0000:3b:00.3")),)


def test_vfs_with_their_own_rdma_devices_are_not_devices(tmp_path: Path) -> None:
    pf = pci_function(tmp_path, "pci0000:00", "0000:5e:00.0", numvfs=1)
    add_vf(tmp_path, pf, 0, "0000:5e:00.2")
    rdma_device(tmp_path, "mlx5_1", pf)
    rdma_device(tmp_path, "mlx5_7", tmp_path / "devices" / "pci0000:00" / "0000:5e:00.2")
    found = discover_rdma(roots(tmp_path))
    assert [d.bus_id for d in found.devices] == ["0000:5e:00.0"]
    assert found.devices[0].minor == 1 and found.devices[0].vfs == ("0000:5e:00.2",)


def test_numa_minus_one_is_zero_a_down_port_is_unhealthy_and_numvfs_zero_is_no_vf_group(tmp_path: Path) -> None:
    fn = pci_function(tmp_path, "pci0000:80", "0000:81:00.0", numa="-1", numvfs=0)
    rdma_device(tmp_path, "mlx5_2", fn, ports={"1": "4: ACTIVE", "2": "1: DOWN"})
    (device,) = discover_rdma(roots(tmp_path)).devices
    assert (device.numa_node, device.healthy, device.vf_enabled, device.pcie_root) == (0, False, False, "pci0000:80")


def test_a_malformed_entry_is_named_and_the_others_still_reported(tmp_path: Path) -> None:
    good = pci_function(tmp_path, "pci0000:00", "0000:3b:00.0")
    rdma_device(tmp_path, "mlx5_0", good)
    # a dangling device link
    bad = tmp_path / "class" / "infiniband" / "mlx5_9"
    bad.mkdir(parents=True)
    os.symlink("../../../devices/pci0000:00/0000:99:00.0", bad / "device")
    # a name koordlet cannot take a minor from
    odd = pci_function(tmp_path, "pci0000:00", "0000:3c:00.0")
    rdma_device(tmp_path, "rxe0", odd)
    # an unreadable NUMA node
    broken = pci_function(tmp_path, "pci0000:00", "0000:3d:00.0", numa="garbage")
    rdma_device(tmp_path, "mlx5_4", broken)
    # not a network function
    gpu = pci_function(tmp_path, "pci0000:00", "0000:3e:00.0", pci_class="0x030200")
    rdma_device(tmp_path, "mlx5_5", gpu)
    found = discover_rdma(roots(tmp_path))
    assert [d.bus_id for d in found.devices] == ["0000:3b:00.0"]
    text = "\n".join(found.problems)
    assert len(found.problems) == 4, text
    assert "mlx5_9" in text and "'rxe0'" in text and "numa_node" in text and "0x030200" in text
