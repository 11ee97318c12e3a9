"""The GPU collector against a fake NVML layer: inventory, device use, per-process use mapped to pods."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, generate_latest

from collectors.gpu import GPU_DEVICES_KEY
from collectors.nvml import GpuDevice, GpuProcess, NvmlCallError, NvmlUnavailable
from hookserver.store.state import StateStore
from hookserver.store.timeseries import series_key
from tests.collectors.fakehost import make_scheduler
from tests.collectors.fakehost import FakeClock, FakeHost, make_container, make_pod

POD_A = "kubepods/burstable/poduid-a"
POD_B = "kubepods/besteffort/poduid-b"
GiB = 1 << 30


@dataclass
class FakeNvml:
    devices_list: list[GpuDevice] = field(default_factory=list)
    util: dict[int, tuple[float, float]] = field(default_factory=dict)
    used: dict[int, int] = field(default_factory=dict)
    procs: dict[int, list[GpuProcess]] = field(default_factory=dict)
    sm: dict[int, dict[int, float]] = field(default_factory=dict)
    init_error: str = ""
    failing: set[int] = field(default_factory=set)
    shutdowns: int = 0

    def init(self) -> None:
        if self.init_error:
            raise NvmlUnavailable(self.init_error)

    def shutdown(self) -> None:
        self.shutdowns += 1

    def devices(self) -> list[GpuDevice]:
        return list(self.devices_list)

    def driver_version(self) -> str:
        return "550.54.15"

    def utilization(self, index: int) -> tuple[float, float]:
        if index in self.failing:
            raise NvmlCallError(f"NVML device {index} utilization: GPU is lost")
        return self.util[index]

    def memory_used(self, index: int) -> int:
        return self.used[index]

    def processes(self, index: int) -> list[GpuProcess]:
        return self.procs.get(index, [])

    def process_utilization(self, index: int) -> dict[int, float]:
        return self.sm.get(index, {})


def _two_gpus() -> FakeNvml:
    return FakeNvml(
        devices_list=[
            GpuDevice(0, "GPU-aaa", "NVIDIA H100", 0, 80 * GiB, "00000000:17:00.0"),
            GpuDevice(1, "GPU-bbb", "NVIDIA H100", 1, 80 * GiB, "00000000:65:00.0"),
        ],
        util={0: (75.0, 40.0), 1: (10.0, 5.0)},
        used={0: 30 * GiB, 1: 2 * GiB},
        procs={
            0: [GpuProcess(101, 10 * GiB), GpuProcess(102, 12 * GiB), GpuProcess(103, 1 * GiB), GpuProcess(999, 7 * GiB)],
            1: [GpuProcess(201, 2 * GiB)],
        },
        sm={0: {101: 30.0, 102: 25.0, 103: 5.0}, 1: {201: 9.0}},
    )


def _world(host: FakeHost, store: StateStore) -> None:
    store.upsert_pod(make_pod("uid-a", cgroup_parent="/" + POD_A, qos_class="LS"))
    store.upsert_container(make_container("ca1", "uid-a", name="trainer", cgroup_parent="/" + POD_A))
    store.upsert_container(make_container("ca2", "uid-a", name="helper", cgroup_parent="/" + POD_A))
    store.upsert_pod(make_pod("uid-b", cgroup_parent="/" + POD_B, qos_class="BE"))
    host.set_pid_cgroup(101, f"/{POD_A}/ca1")
    host.set_pid_cgroup(102, f"/{POD_A}/ca1")
    host.set_pid_cgroup(103, f"/{POD_A}/ca2")
    host.set_pid_cgroup(201, f"/{POD_B}/cb9")  # a container the agent does not know: counted to the pod
    host.set_pid_cgroup(999, "/system.slice/nvidia-persistenced.service")  # not a pod


def _last(store: StateStore, metric: str, **labels: str) -> float | None:
    last = store.series.last(series_key(metric, **labels))
    return None if last is None else last[1]


def test_device_and_per_pod_gpu_use(host: FakeHost, clock: FakeClock, store: StateStore) -> None:
    _world(host, store)
    nvml = _two_gpus()
    registry = CollectorRegistry()
    sched = make_scheduler(host, clock, store, nvml=nvml, registry=registry)
    sched.run_once()
    assert sched.status()["collectors"]["gpu"]["enabled"] is True
    node = {"node": "node-1"}
    aaa, bbb = {"device": "GPU-aaa", "minor": "0"}, {"device": "GPU-bbb", "minor": "1"}
    assert _last(store, "gpu_utilization", **aaa, **node) == 75.0
    assert _last(store, "gpu_memory_used", **aaa, **node) == 30 * GiB
    assert _last(store, "node_gpu_memory_total", **bbb, **node) == 80 * GiB
    # koordlet's node figures: the sum over the device's processes, pid 999 (no pod) included.
    assert _last(store, "node_gpu_core_usage", **aaa, **node) == 60.0
    assert _last(store, "node_gpu_memory_usage", **aaa, **node) == 30 * GiB
    a = {"pod": "uid-a", "qos": "LS"}
    assert _last(store, "pod_gpu_core_usage", **aaa, **a) == 60.0
    assert _last(store, "pod_gpu_memory_usage", **aaa, **a) == 23 * GiB
    assert _last(store, "container_gpu_memory_usage", **aaa, container="ca1", **a) == 22 * GiB
    assert _last(store, "container_gpu_core_usage", **aaa, container="ca2", **a) == 5.0
    assert _last(store, "pod_gpu_core_usage", **bbb, pod="uid-b", qos="BE") == 9.0
    assert store.series.select("container_gpu_core_usage", {"pod": "uid-b"}) == []
    assert len(store.series.keys("pod_gpu_memory_usage")) == 2  # pid 999 belongs to no pod
    assert [d.uuid for d in store.series.get_static(GPU_DEVICES_KEY)] == ["GPU-aaa", "GPU-bbb"]
    text = generate_latest(registry).decode()
    assert 'hookserver_gpu_device_info{bus_id="00000000:17:00.0",device="GPU-aaa",index="0"' in text
    assert 'container_name="trainer"' in text
    sched.close()
    assert nvml.shutdowns == 1


def test_no_driver_or_no_device_disables_the_collector_with_a_reason(host_v1: FakeHost, clock: FakeClock, store: StateStore) -> None:
    nvml = FakeNvml(init_error="NVML Shared Library Not Found")
    sched = make_scheduler(host_v1, clock, store, nvml=nvml)
    sched.run_once()
    gpu = sched.status()["collectors"]["gpu"]
    assert (gpu["enabled"], gpu["failures"], gpu["runs"]) == (False, 0, 0)
    assert gpu["disabled_reason"] == "NVML unavailable: NVML Shared Library Not Found"
    empty = make_scheduler(host_v1, clock, StateStore(clock=clock.time), nvml=FakeNvml())
    empty.run_once()
    assert empty.status()["collectors"]["gpu"]["disabled_reason"] == "no NVIDIA GPU found by NVML"


def test_one_failing_device_does_not_hide_the_others(host_v2: FakeHost, clock: FakeClock, store: StateStore) -> None:
    _world(host_v2, store)
    nvml = _two_gpus()
    nvml.failing = {0}
    sched = make_scheduler(host_v2, clock, store, nvml=nvml)
    sched.run_once()
    gpu = sched.status()["collectors"]["gpu"]
    assert gpu["failures"] == 0 and gpu["read_errors_total"] == 1 and "GPU is lost" in gpu["last_error"]
    assert _last(store, "gpu_utilization", device="GPU-bbb", minor="1", node="node-1") == 10.0
    assert store.series.select("gpu_utilization", {"device": "GPU-aaa"}) == []


def test_real_pynvml_adapter_reports_unavailable_cleanly_without_a_driver() -> None:
    """On a host without the NVIDIA driver the real adapter must say so, not crash."""
    from collectors.nvml import PynvmlApi

    api = PynvmlApi()
    try:
        api.init()
    except NvmlUnavailable as exc:
        assert "nvmlInit failed" in str(exc) or "pynvml is not installed" in str(exc)
    else:  # a GPU host: the inventory must at least be well formed
        try:
            devices = api.devices()
            assert all(d.uuid and d.memory_total_bytes > 0 for d in devices)
        finally:
            api.shutdown()
