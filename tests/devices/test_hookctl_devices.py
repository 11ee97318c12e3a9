"""`hookctl devices` (and `-o json`) over the real debug socket, and its answer when the report is off."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hookserver.cli.hookctl import main as hookctl_main
from hookserver.debug.render_devices import render_devices
from hookserver.debug.server import DebugServer
from hookserver.devices.node_resources import NodeDeviceResources
from hookserver.devices.publisher import DevicePublisher, LocalDeviceSink
from hookserver.devices.rdma import RdmaDevice, RdmaDiscovery
from hookserver.store import StateStore
from tests.devices.test_report import gpu


def test_hookctl_devices_over_the_debug_socket(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rdma = RdmaDiscovery((RdmaDevice(bus_id="0000:3b:00.0", names=("mlx5_0",), minor=0, numa_node=1,
                                     pcie_root="pci0000:3a", healthy=True, vf_enabled=True, vfs=("0000:3b:00.2",)),),
                         ("mlx5_9: /sys/class/infiniband/mlx5_9/device does not lead to a PCI function",))
    publisher = DevicePublisher(
        node_name="n1", sink=LocalDeviceSink(str(tmp_path / "device.json")),
        gpus=lambda: [gpu(0), gpu(1, healthy=False, reason="Xid79: GPU has fallen off the bus")],
        driver_version=lambda: "550.54.15", rdma=lambda: rdma, node_resources=NodeDeviceResources(resources=None))
    publisher.tick()
    store = StateStore()
    server = DebugServer(str(tmp_path / "d.sock"), store=store, providers={"devices": lambda args: publisher.view()})
    bare = DebugServer(str(tmp_path / "n.sock"), store=store, providers={})
    server.start()
    bare.start()
    try:
        capsys.readouterr()
        assert hookctl_main(["--socket", str(tmp_path / "d.sock"), "devices"]) == 0
        out = capsys.readouterr().out
        assert "gpu 1  GPU-0001  UNHEALTHY (Xid79: GPU has fallen off the bus" in out
        assert "gpu 0  GPU-0000  healthy  [gpu-core 100, gpu-memory 80Gi, gpu-memory-ratio 100]" in out
        assert "rdma 0  0000:3b:00.0  healthy  [rdma 100]  numa 1 pci0000:3a 0000:3b:00.0  VFs: 0000:3b:00.2" in out
        assert "node.koordinator.sh/gpu-model: A100-SXM4-80GB" in out
        assert "left out: mlx5_9" in out
        assert "koordinator.sh/gpu-core: 100" in out  # the healthy GPU only
        assert hookctl_main(["--socket", str(tmp_path / "d.sock"), "devices", "-o", "json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["document"]["kind"] == "Device" and len(doc["document"]["spec"]["devices"]) == 3
        assert hookctl_main(["--socket", str(tmp_path / "n.sock"), "devices"]) == 1
        assert "devices.enabled" in capsys.readouterr().err
    finally:
        server.stop(0.1)
        bare.stop(0.1)


def test_render_before_the_first_round() -> None:
    text = render_devices({"node": "n1", "last_result": "pending", "target": "file", "where": "/x", "document": {}})
    assert text.endswith("(no document built yet)") and "devices: none" in text
