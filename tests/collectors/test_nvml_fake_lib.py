"""The GPU collector through real pynvml and a compiled fake libnvidia-ml.so.1 (tests/fixtures/fake_nvml).

Each test writes a JSON fixture and a fixture host tree (sysfs PCI links, /proc/<pid>/cgroup), then runs
the collector in a child process that loads the fake exactly as a node loads the driver's library
(tests/collectors/fake_nvml.py says why a child). Steps rewrite the fixture between cycles to raise an XID,
make a device stop answering or take it away. The numbers asserted are the fixture's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from collectors.nvml import IGNORED_XIDS, pcie_root_of, sysfs_bus_id
from hookserver.system.roots import SystemRoots
from tests.collectors.fake_nvml import GiB, add_pci_device, fake_gpu, fake_nvml_lib, run_worker
from tests.collectors.fakehost import FakeHost

__all__ = ["fake_nvml_lib"]  # the session fixture, imported for pytest

POD_A = "kubepods/burstable/poduid-a"
POD_B = "kubepods/besteffort/poduid-b"
DRIVER = "550.54.15"
XID = 0x8  # nvmlEventTypeXidCriticalError


def _fixture(*devices: dict[str, Any], events: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    return {"driver_version": DRIVER, "devices": list(devices), "events": events or [], **extra}


def _run(lib: Path, tmp_path: Path, host: FakeHost, steps: list[dict[str, Any]],
         pods: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec = {"host": {"base": str(host.base), "version": host.version}, "pods": pods or [], "steps": steps}
    return run_worker(lib, tmp_path / "nvml.json", spec)


def _cycles(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [o for o in report["observations"] if "status" in o]


def _value(obs: dict[str, Any], metric: str, **labels: str) -> float | None:
    found = [s["value"] for s in obs["samples"]
             if s["metric"] == metric and all(s["labels"].get(k) == v for k, v in labels.items())]
    assert len(found) <= 1, (metric, labels, found)
    return found[0] if found else None


def _health(obs: dict[str, Any]) -> dict[str, tuple[bool, str]]:
    return {d["uuid"]: (d["healthy"], d["unhealthy_code"]) for d in obs["devices"]}


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    return FakeHost(tmp_path / "host", version=2)


def test_the_worker_talks_to_the_compiled_fake_through_pynvml(fake_nvml_lib: Path, tmp_path: Path, host: FakeHost) -> None:
    report = _run(fake_nvml_lib, tmp_path, host, [{"op": "fixture", "data": _fixture(fake_gpu(0))}, {"op": "cycle"}])
    assert report["library"] == str(fake_nvml_lib / "libnvidia-ml.so.1")
    assert _cycles(report)[0]["status"]["enabled"] is True


def test_no_gpu_and_no_driver_disable_the_collector_with_nvml_s_own_reason(
    fake_nvml_lib: Path, tmp_path: Path, host: FakeHost
) -> None:
    none = _cycles(_run(fake_nvml_lib, tmp_path, host, [{"op": "fixture", "data": _fixture()}, {"op": "cycle"}]))[0]
    assert (none["status"]["enabled"], none["status"]["disabled_reason"]) == (False, "no NVIDIA GPU found by NVML")
    assert none["devices"] == [] and none["samples"] == []
    # NVML_ERROR_DRIVER_NOT_LOADED (9) from nvmlInitWithFlags, worded by pynvml.
    broken = _fixture(fake_gpu(0), init_error=9)
    off = _cycles(_run(fake_nvml_lib, tmp_path, host, [{"op": "fixture", "data": broken}, {"op": "cycle"}]))[0]
    assert off["status"]["disabled_reason"] == "NVML unavailable: nvmlInit failed: Driver Not Loaded"


def test_one_gpu_inventory_topology_and_series_are_the_fixture_s(
    fake_nvml_lib: Path, tmp_path: Path, host: FakeHost
) -> None:
    add_pci_device(host.sys, "0000:17:00.0", root="pci0000:16", numa_node=1)
    gpu = fake_gpu(
        0, uuid="GPU-1111", name="NVIDIA H100 80GB HBM3", minor=3, memory_total=80 * GiB, memory_used=30 * GiB,
        utilization_gpu=75, utilization_memory=40, mig_mode=0,
        processes=[(101, 10 * GiB), (102, 12 * GiB), (103, 1 * GiB), (999, 7 * GiB)],
        samples=[(101, 1_000, 30), (102, 1_000, 25), (103, 1_000, 5)],
    )
    host.set_pid_cgroup(101, f"/{POD_A}/ca1")
    host.set_pid_cgroup(102, f"/{POD_A}/ca1")
    host.set_pid_cgroup(103, f"/{POD_A}/ca2")
    host.set_pid_cgroup(999, "/system.slice/nvidia-persistenced.service")  # no pod
    pods = [{"uid": "uid-a", "qos": "LS", "cgroup_parent": "/" + POD_A,
             "containers": [{"id": "ca1", "name": "trainer"}, {"id": "ca2", "name": "helper"}]}]
    obs = _cycles(_run(fake_nvml_lib, tmp_path, host, [{"op": "fixture", "data": _fixture(gpu)}, {"op": "cycle"}], pods))[0]
    assert obs["devices"] == [{
        "index": 0, "uuid": "GPU-1111", "name": "NVIDIA H100 80GB HBM3", "minor": 3,
        "memory_total_bytes": 80 * GiB, "bus_id": "00000000:17:00.0", "numa_node": 1, "pcie_root": "pci0000:16",
        "healthy": True, "unhealthy_reason": "", "unhealthy_code": "",
    }]
    assert obs["driver_version"] == DRIVER
    dev = {"device": "GPU-1111", "minor": "3"}
    assert _value(obs, "gpu_utilization", **dev) == 75.0
    assert _value(obs, "gpu_memory_used", **dev) == 30 * GiB
    assert _value(obs, "node_gpu_memory_total", **dev) == 80 * GiB
    assert _value(obs, "node_gpu_core_usage", **dev) == 60.0
    assert _value(obs, "node_gpu_memory_usage", **dev) == 30 * GiB
    assert _value(obs, "pod_gpu_core_usage", pod="uid-a", **dev) == 60.0
    assert _value(obs, "pod_gpu_memory_usage", pod="uid-a", **dev) == 23 * GiB
    assert _value(obs, "container_gpu_core_usage", container="ca1", **dev) == 55.0
    assert _value(obs, "container_gpu_memory_usage", container="ca1", **dev) == 22 * GiB
    assert _value(obs, "container_gpu_memory_usage", container="ca2", **dev) == 1 * GiB
    assert len([s for s in obs["samples"] if s["metric"] == "pod_gpu_memory_usage"]) == 1  # pid 999: no pod
    assert obs["status"]["read_errors_total"] == 0


def test_eight_gpus_each_with_its_own_numbers(fake_nvml_lib: Path, tmp_path: Path, host: FakeHost) -> None:
    gpus = []
    for i in range(8):
        add_pci_device(host.sys, f"0000:{0x17 + 0x10 * i:02x}:00.0", root=f"pci0000:{0x16 + 0x10 * i:02x}",
                       numa_node=i // 4)
        gpus.append(fake_gpu(i, memory_used=(i + 1) * GiB, utilization_gpu=10 * i, processes=[(1000 + i, i * GiB)],
                             samples=[(1000 + i, 500, 3 * i)]))
    obs = _cycles(_run(fake_nvml_lib, tmp_path, host, [{"op": "fixture", "data": _fixture(*gpus)}, {"op": "cycle"}]))[0]
    assert [(d["index"], d["minor"], d["numa_node"], d["pcie_root"]) for d in obs["devices"]] == [
        (i, i, i // 4, f"pci0000:{0x16 + 0x10 * i:02x}") for i in range(8)
    ]
    for i, gpu in enumerate(gpus):
        dev = {"device": gpu["uuid"], "minor": str(i)}
        assert _value(obs, "gpu_utilization", **dev) == 10.0 * i
        assert _value(obs, "gpu_memory_used", **dev) == (i + 1) * GiB
        assert _value(obs, "node_gpu_core_usage", **dev) == 3.0 * i
        assert _value(obs, "node_gpu_memory_usage", **dev) == i * GiB


def test_an_xid_marks_its_gpu_unhealthy_within_one_cycle_and_for_good(
    fake_nvml_lib: Path, tmp_path: Path, host: FakeHost
) -> None:
    a, b = fake_gpu(0, uuid="GPU-a"), fake_gpu(1, uuid="GPU-b")
    application_error = min(IGNORED_XIDS)
    steps: list[dict[str, Any]] = [
        {"op": "fixture", "data": _fixture(a, b)},
        {"op": "cycle"},
        {"op": "fixture", "data": _fixture(a, b, events=[
            {"id": 1, "uuid": "GPU-a", "type": XID, "data": application_error},  # an application's fault
            {"id": 2, "uuid": "GPU-b", "type": XID, "data": 79},  # fallen off the bus
        ])},
        {"op": "cycle"},
        {"op": "fixture", "data": _fixture(a, b)},  # the event is gone from the queue: the verdict stays
        {"op": "cycle"},
    ]
    first, second, third = _cycles(_run(fake_nvml_lib, tmp_path, host, steps))
    assert _health(first) == {"GPU-a": (True, ""), "GPU-b": (True, "")}
    assert _health(second) == {"GPU-a": (True, ""), "GPU-b": (False, "Xid79")}
    assert second["devices"][1]["unhealthy_reason"] == "Xid error detected on device, error code: 79"
    assert _health(third) == _health(second)
    # An XID-stricken device still answers, so its series go on.
    assert _value(third, "gpu_utilization", device="GPU-b") == 0.0


def test_an_xid_without_a_device_marks_every_gpu_unhealthy(fake_nvml_lib: Path, tmp_path: Path, host: FakeHost) -> None:
    a, b = fake_gpu(0, uuid="GPU-a"), fake_gpu(1, uuid="GPU-b")
    steps: list[dict[str, Any]] = [
        {"op": "fixture", "data": _fixture(a, b)},
        {"op": "cycle"},
        {"op": "fixture", "data": _fixture(a, b, events=[{"id": 1, "uuid": None, "type": XID, "data": 48}])},
        {"op": "cycle"},
    ]
    _first, second = _cycles(_run(fake_nvml_lib, tmp_path, host, steps))
    assert _health(second) == {"GPU-a": (False, "Xid48"), "GPU-b": (False, "Xid48")}


def test_a_gpu_that_cannot_register_for_events_is_unhealthy_as_koordlet_has_it(
    fake_nvml_lib: Path, tmp_path: Path, host: FakeHost
) -> None:
    old = fake_gpu(0, uuid="GPU-old", events_supported=0)
    obs = _cycles(_run(fake_nvml_lib, tmp_path, host, [{"op": "fixture", "data": _fixture(old)}, {"op": "cycle"}]))[0]
    assert _health(obs) == {"GPU-old": (False, "DeviceHealthCheckNotSupported")}
    assert obs["devices"][0]["unhealthy_reason"] == "device does not support health checking"


def test_a_gpu_that_stops_answering_is_unhealthy_while_it_does_not(
    fake_nvml_lib: Path, tmp_path: Path, host: FakeHost
) -> None:
    a, b = fake_gpu(0, uuid="GPU-a", utilization_gpu=20), fake_gpu(1, uuid="GPU-b", utilization_gpu=50)
    steps: list[dict[str, Any]] = [
        {"op": "fixture", "data": _fixture(a, b)},
        {"op": "cycle"},
        {"op": "fixture", "data": _fixture(a, {**b, "lost": 1})},
        {"op": "cycle"},
        {"op": "fixture", "data": _fixture(a, b)},
        {"op": "cycle"},
    ]
    first, lost, back = _cycles(_run(fake_nvml_lib, tmp_path, host, steps))
    assert _value(first, "gpu_utilization", device="GPU-b") == 50.0
    assert _health(lost) == {"GPU-a": (True, ""), "GPU-b": (False, "DeviceLost")}
    assert lost["devices"][1]["unhealthy_reason"] == "device stopped answering: GPU is lost"
    assert _value(lost, "gpu_utilization", device="GPU-b") is None  # not queried: it cannot answer
    assert _value(lost, "gpu_utilization", device="GPU-a") == 20.0
    assert lost["status"]["failures"] == 0
    assert _health(back) == {"GPU-a": (True, ""), "GPU-b": (True, "")}


def test_a_gpu_that_disappears_is_dropped_and_reported_and_the_rest_keep_their_numbers(
    fake_nvml_lib: Path, tmp_path: Path, host: FakeHost
) -> None:
    gpus = [fake_gpu(i, uuid=f"GPU-{i}", utilization_gpu=10 + i, processes=[(500 + i, GiB)],
                     samples=[(500 + i, 5_000 if i == 1 else 100, 7 + i)]) for i in range(3)]
    # GPU-2, now at GPU-1's old index, has a sample newer than its own last but older than GPU-1's.
    moved = {**gpus[2], "process_utilization": [{"pid": 502, "timestamp": 200, "sm": 40}]}
    steps: list[dict[str, Any]] = [
        {"op": "fixture", "data": _fixture(*gpus)},
        {"op": "cycle"},
        {"op": "fixture", "data": _fixture(gpus[0], moved)},  # GPU-1 hot-removed: GPU-2 is now index 1
        {"op": "cycle"},
    ]
    before, after = _cycles(_run(fake_nvml_lib, tmp_path, host, steps))
    assert [d["uuid"] for d in before["devices"]] == ["GPU-0", "GPU-1", "GPU-2"]
    assert [(d["index"], d["uuid"], d["minor"]) for d in after["devices"]] == [(0, "GPU-0", 0), (1, "GPU-2", 2)]
    assert after["status"]["read_errors_total"] == 1
    assert after["status"]["last_error"] == "GPU GPU-1 (minor 1) disappeared"
    assert _value(after, "gpu_utilization", device="GPU-2") == 12.0
    assert _value(after, "gpu_utilization", device="GPU-1") is None
    # Per-process samples are tracked per device, not per index: GPU-2's new sample is read.
    assert _value(before, "node_gpu_core_usage", device="GPU-2") == 9.0
    assert _value(after, "node_gpu_core_usage", device="GPU-2") == 40.0


def test_one_failing_call_is_counted_and_hides_nothing_else(fake_nvml_lib: Path, tmp_path: Path, host: FakeHost) -> None:
    a = fake_gpu(0, uuid="GPU-a", errors={"nvmlDeviceGetUtilizationRates": 999})
    b = fake_gpu(1, uuid="GPU-b", utilization_gpu=42)
    obs = _cycles(_run(fake_nvml_lib, tmp_path, host, [{"op": "fixture", "data": _fixture(a, b)}, {"op": "cycle"}]))[0]
    assert obs["status"]["read_errors_total"] == 1
    assert obs["status"]["last_error"] == "GPU 0 (GPU-a): NVML device 0 utilization: Unknown Error"
    assert _value(obs, "gpu_utilization", device="GPU-b") == 42.0
    assert _health(obs) == {"GPU-a": (True, ""), "GPU-b": (True, "")}


def test_sysfs_bus_id_is_the_kernel_s_spelling() -> None:
    assert sysfs_bus_id("00000000:17:00.0") == "0000:17:00.0"
    assert sysfs_bus_id("00000000:AB:00.0") == "0000:ab:00.0"
    assert sysfs_bus_id("00010000:05:00.0") == "10000:05:00.0"
    for bad in ("", "17:00.0", "zz:17:00.0", "0000:17:00"):
        assert sysfs_bus_id(bad) == "", bad


def test_pcie_root_reads_the_link_below_the_sys_root_only(tmp_path: Path) -> None:
    sys_root = tmp_path / "pci0000:99" / "sys"  # a test tree whose own path looks like a root complex
    add_pci_device(sys_root, "0000:17:00.0", root="pci0000:16", numa_node=0)
    roots = SystemRoots(sys=str(sys_root))
    assert pcie_root_of(roots, "0000:17:00.0") == "pci0000:16"
    assert pcie_root_of(roots, "0000:99:00.0") == ""  # no such device in sysfs
    assert pcie_root_of(roots, "") == ""
