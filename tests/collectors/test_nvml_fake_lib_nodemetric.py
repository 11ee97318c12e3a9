"""The NodeMetric's GPU devices from what the GPU collector read through real pynvml and the compiled fake
libnvidia-ml.so.1 (tests/collectors/fake_nvml.py): 8 GPUs, one struck by XID 79 in the second cycle.

The collector runs in the fake's child process (as test_nvml_fake_lib.py's tests do); its stored samples and
inventory come back as JSON and are put into a store here, a second apart, for the NodeMetric report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from collectors.nvml import GpuDevice
from hookserver.predictor import build_status, report_policy
from hookserver.predictor.nodemetric_gpu import gpu_inventory
from hookserver.store.state import StateStore
from hookserver.store.timeseries import make_labels
from tests.collectors.fake_nvml import GiB, add_pci_device, fake_gpu, fake_nvml_lib, run_worker
from tests.collectors.fakehost import FakeHost

__all__ = ["fake_nvml_lib"]  # the session fixture, imported for pytest

XID = 0x8  # nvmlEventTypeXidCriticalError
T0 = 1_700_000_000.0


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    return FakeHost(tmp_path / "host", version=2)


def _store(cycles: list[dict[str, Any]]) -> StateStore:
    store = StateStore(clock=lambda: T0 + len(cycles) - 1)
    for i, obs in enumerate(cycles):
        for sample in obs["samples"]:
            store.series.append((sample["metric"], make_labels(**sample["labels"])), sample["value"], ts=T0 + i)
        store.series.append(("node_cpu_usage", ()), 4.0, ts=T0 + i)
        store.series.append(("node_memory_usage", ()), 64.0 * GiB, ts=T0 + i)
    store.series.put_static("gpu_devices", tuple(GpuDevice(**d) for d in cycles[-1]["devices"]))
    return store


def test_eight_gpus_and_an_xid_reach_the_nodemetric_devices(fake_nvml_lib: Path, tmp_path: Path,
                                                            host: FakeHost) -> None:
    gpus = []
    for i in range(8):
        add_pci_device(host.sys, f"0000:{0x17 + 0x10 * i:02x}:00.0", root=f"pci0000:{0x16 + 0x10 * i:02x}",
                       numa_node=i // 4)
        gpus.append(fake_gpu(i, processes=[(1000 + i, i * GiB)], samples=[(1000 + i, 500, 3 * i)]))
    fixture = {"driver_version": "550.54.15", "devices": gpus, "events": []}
    # The second cycle's SM samples are newer (NVML hands out samples since the last one seen), same numbers.
    later = [{**gpu, "process_utilization": [{**u, "timestamp": 1500} for u in gpu["process_utilization"]]}
             for gpu in gpus]
    struck = {**fixture, "devices": later, "events": [{"id": 1, "uuid": gpus[5]["uuid"], "type": XID, "data": 79}]}
    steps = [{"op": "fixture", "data": fixture}, {"op": "cycle"}, {"op": "fixture", "data": struck}, {"op": "cycle"}]
    spec = {"host": {"base": str(host.base), "version": host.version}, "pods": [], "steps": steps}
    cycles = [o for o in run_worker(fake_nvml_lib, tmp_path / "nvml.json", spec)["observations"] if "status" in o]
    assert len(cycles) == 2
    store = _store(cycles)
    policy = report_policy(None, min_report_s=30, min_aggregate_s=60)
    status = build_status(store.snapshot(), store.series, now=T0 + 1, policy=policy, reclaimable=None,
                          gpus=gpu_inventory(store.series.get_static("gpu_devices")))
    devices = status["nodeMetric"]["nodeUsage"]["devices"]
    # GPU i: SM 3i % of its one process, i GiB of 80 (ratio int(100 i / 80) = int(1.25 i)); GPU 5 unhealthy.
    assert [(d["id"], d["minor"], d["health"]) for d in devices] == [
        (gpu["uuid"], i, i != 5) for i, gpu in enumerate(gpus)]
    for i, device in enumerate(devices):
        assert device["resources"] == {
            "koordinator.sh/gpu-core": str(3 * i),
            "koordinator.sh/gpu-memory": f"{i}Gi" if i else "0",
            "koordinator.sh/gpu-memory-ratio": str(int(1.25 * i)),
        }, i
