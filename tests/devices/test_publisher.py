"""The device publisher: only changed text is sent, health reaches the object within one tick, a missing CRD
is one warning, the state dir always holds the document; with the informer's server-side-apply writer."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from collectors.gpu import GPU_DEVICES_KEY
from collectors.nvml import GpuDevice
from hookserver.devices.publisher import DevicePublisher, LocalDeviceSink, rfc3339
from hookserver.devices.rdma import RdmaDiscovery
from hookserver.devices.settings import DeviceSettings
from hookserver.informer.device import DEVICE_RESOURCE_PATH, DeviceWriter
from hookserver.store import StateStore
from hookserver.system.roots import SystemRoots
from hookserver.wiring.devices import build_device_publisher
from tests.devices.apiserver import SsaApiserver
from tests.devices.sysfs import pci_function, rdma_device
from tests.devices.test_report import gpu


class Inventory:
    """What the GPU collector keeps in the store, changed by the test between ticks."""

    def __init__(self, *gpus: GpuDevice) -> None:
        self.gpus = list(gpus)

    def __call__(self) -> list[GpuDevice]:
        return list(self.gpus)


def _publisher(tmp_path: Path, api: SsaApiserver, inventory: Inventory, now: list[float]) -> DevicePublisher:
    writer = DeviceWriter(api, node_name="n1", sleep=lambda s: None)
    return DevicePublisher(node_name="n1", sink=writer, gpus=inventory, driver_version=lambda: "550.54.15",
                           node_uid=lambda: "uid-1", document_path=str(tmp_path / "state" / "device.json"),
                           clock=lambda: now[0])


def test_unchanged_writes_nothing_and_a_health_change_is_sent_at_the_next_tick(tmp_path: Path) -> None:
    api, inventory, now = SsaApiserver(), Inventory(gpu(0), gpu(1)), [1_800_000_000.0]
    publisher = _publisher(tmp_path, api, inventory, now)
    assert publisher.tick() == "ok"
    method, path, body, params = api.calls[0]
    assert (path, params) == (f"{DEVICE_RESOURCE_PATH}/n1", {"fieldManager": "hookserver", "force": "false"})
    for _ in range(5):
        now[0] += 3
        assert publisher.tick() == "unchanged"
    assert len(api.calls) == 1
    # GPU 1 falls off the bus: the next tick carries it, with the time it was first seen
    inventory.gpus[1] = gpu(1, healthy=False, reason="Xid79: GPU has fallen off the bus")
    now[0] += 3
    seen_at = now[0]
    assert publisher.tick() == "ok" and len(api.calls) == 2
    stored = api.get(f"{DEVICE_RESOURCE_PATH}/n1")
    assert stored is not None
    sick = stored["spec"]["devices"][1]
    assert sick["health"] is False and sick["conditions"][0]["lastTransitionTime"] == rfc3339(seen_at)
    # still unhealthy later: same text, no write (the transition time is kept, not renewed)
    now[0] += 30
    assert publisher.tick() == "unchanged" and len(api.calls) == 2
    # it disappears from the inventory: sent at once
    inventory.gpus = [gpu(0)]
    assert publisher.tick() == "ok"
    stored = api.get(f"{DEVICE_RESOURCE_PATH}/n1")
    assert stored is not None and [d["id"] for d in stored["spec"]["devices"]] == ["GPU-0000"]
    saved = json.loads((tmp_path / "state" / "device.json").read_text())
    assert saved == api.calls[-1][2]


def test_a_missing_crd_is_one_warning_and_its_end_one_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    api, now = SsaApiserver(crd=False), [1_800_000_000.0]
    publisher = _publisher(tmp_path, api, Inventory(gpu(0)), now)
    with caplog.at_level(logging.INFO, logger="hookserver.devices.publisher"):
        assert {publisher.tick() for _ in range(10)} == {"crd_missing"}
        assert len(api.calls) == 10  # retried every round, so the CRD's arrival is noticed
        # the state dir has the document even though the apiserver has not
        assert json.loads((tmp_path / "state" / "device.json").read_text())["kind"] == "Device"
        api.crd = True
        assert publisher.tick() == "ok"
        assert publisher.tick() == "unchanged"
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert "not delivered (crd_missing)" in lines[0] and "devices.scheduling.koordinator.sh" in lines[0]
    assert "delivered again" in lines[1]


def test_another_writer_of_the_device_is_a_conflict_not_an_overwrite(tmp_path: Path) -> None:
    api, now = SsaApiserver(), [1_800_000_000.0]
    api.apply_as("koordlet", f"{DEVICE_RESOURCE_PATH}/n1",
                 {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Device", "metadata": {"name": "n1"},
                  "spec": {"devices": []}})
    publisher = _publisher(tmp_path, api, Inventory(gpu(0)), now)
    assert publisher.tick() == "conflict"
    assert "koordlet" in publisher.view()["last_detail"]
    stored = api.get(f"{DEVICE_RESOURCE_PATH}/n1")
    assert stored is not None and stored["spec"]["devices"] == []


def test_standalone_goes_to_the_state_dir_with_rdma_from_sysfs(tmp_path: Path) -> None:
    sys = tmp_path / "sys"
    rdma_device(sys, "mlx5_0", pci_function(sys, "pci0000:3a", "0000:3b:00.0"))
    store = StateStore()
    settings = DeviceSettings(enabled=True, rdma=True)
    publisher = build_device_publisher(settings, store=store, roots=SystemRoots(sys=str(sys)), node_name="n1",
                                       state_dir=str(tmp_path / "state"))
    assert publisher is not None
    store.series.put_static(GPU_DEVICES_KEY, (gpu(1), gpu(0)))
    assert publisher.tick() == "ok"
    saved = json.loads((tmp_path / "state" / "device.json").read_text())
    assert [(d["type"], d["minor"]) for d in saved["spec"]["devices"]] == [("gpu", 0), ("gpu", 1), ("rdma", 0)]
    assert publisher.tick() == "unchanged"
    view = publisher.view()
    assert view["target"] == "file" and view["node_resources"]["state"] == "standalone"
    assert view["node_resources"]["values"]["koordinator.sh/gpu-core"] == "200"
    assert build_device_publisher(DeviceSettings(), store=store, roots=SystemRoots(), node_name="n1",
                                  state_dir="") is None


def test_rdma_problems_are_logged_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    found = RdmaDiscovery((), ("mlx5_9: /sys/class/infiniband/mlx5_9/device does not lead to a PCI function",))
    publisher = DevicePublisher(node_name="n1", sink=LocalDeviceSink(str(tmp_path / "device.json")),
                                rdma=lambda: found)
    with caplog.at_level(logging.WARNING, logger="hookserver.devices.publisher"):
        for _ in range(5):
            publisher.tick()
    assert [r.getMessage() for r in caplog.records].count(
        "RDMA device left out of the Device report: " + found.problems[0]) == 1
    assert publisher.view()["problems"] == list(found.problems)


def test_the_wiring_reads_the_collectors_key() -> None:
    from hookserver.devices.inventory import GPU_DEVICES_STATIC

    # the area cannot import the collectors (sibling areas): the key is spelled twice, and this keeps them one
    assert GPU_DEVICES_STATIC == GPU_DEVICES_KEY


class Forbidden:
    def request_json(self, method: str, path: str, body: object = None, *, timeout_s: float,
                     content_type: str = "", params: object = None) -> tuple[int, object]:
        return 403, {"kind": "Status", "reason": "Forbidden", "message": "devices is forbidden"}


def test_forbidden_names_the_clusterrole_grant() -> None:
    delivery = DeviceWriter(Forbidden(), node_name="n1").apply({"kind": "Device"})
    assert delivery.result == "forbidden"
    assert "devices.scheduling.koordinator.sh" in delivery.detail and "devices is forbidden" in delivery.detail


def test_a_failing_inventory_is_an_error_round_logged_once_and_the_next_round_recovers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = [True]

    def gpus() -> list[GpuDevice]:
        if broken[0]:
            raise RuntimeError("NVML went away")
        return [gpu(0)]

    publisher = DevicePublisher(node_name="n1", sink=LocalDeviceSink(str(tmp_path / "device.json")), gpus=gpus)
    with caplog.at_level(logging.WARNING, logger="hookserver.devices.publisher"):
        assert [publisher.tick() for _ in range(3)] == ["error"] * 3
    assert len(caplog.records) == 1 and "NVML went away" in caplog.records[0].getMessage()
    broken[0] = False
    assert publisher.tick() == "ok"
    assert json.loads((tmp_path / "device.json").read_text())["spec"]["devices"][0]["id"] == "GPU-0000"
