"""From the GPU collector to every place its series are shown: the Prometheus export (every GPU series under
its hookserver_* name with the device and minor labels), `hookctl top` and the NodeMetric status devices.

The collector runs against the fake NVML layer of test_gpu.py and the fake host, through the real scheduler,
store and exporter (scraped with prometheus_client's own exposition and parser)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from collectors import top_report
from collectors.gpu import GPU_DEVICES_KEY
from collectors.names import METRICS
from hookserver.predictor import build_status, report_policy
from hookserver.predictor.nodemetric_gpu import gpu_inventory
from hookserver.store.state import StateStore
from tests.collectors.fakehost import FakeClock, FakeHost, make_scheduler
from tests.collectors.test_gpu import POD_A, POD_B, GiB, _two_gpus, _world

# The NVML collector's series (the HAMi-core vGPU collector's `*_vgpu_*` are tested in test_hami_vgpu.py).
GPU_METRICS = {name: spec for name, spec in METRICS.items() if "gpu" in name and "vgpu" not in name}


def _run(host: FakeHost, clock: FakeClock, store: StateStore, registry: CollectorRegistry | None = None) -> None:
    _world(host, store)
    sched = make_scheduler(host, clock, store, nvml=_two_gpus(), registry=registry)
    host.set_meminfo(total_kb=16 << 20, free_kb=4 << 20, available_kb=10 << 20)
    for rel in (POD_A, POD_B):
        host.set_memory(rel, active_anon=4096, inactive_anon=0)
    for cycle in range(3):  # node and pod CPU and memory too: the NodeMetric reports GPUs beside them
        host.set_proc_stat(user=1000 + 100 * cycle, system=500, idle=8000 + 100 * cycle)
        for rel in (POD_A, POD_B):
            host.set_cpu_usage(rel, 1_000_000_000 * (cycle + 1))
        sched.run_once()
        clock.advance(1.0)
    clock.advance(-1.0)  # "now" is the last cycle
    sched.close()


def test_every_gpu_series_is_exported_with_device_and_minor(host_v2: FakeHost, clock: FakeClock,
                                                            store: StateStore) -> None:
    registry = CollectorRegistry()
    _run(host_v2, clock, store, registry)
    samples = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append(sample)
    assert len(GPU_METRICS) == 9
    for name, spec in GPU_METRICS.items():
        assert spec.prom.startswith("hookserver_") and spec.prom in samples, name
        for sample in samples[spec.prom]:
            assert {"node", "device", "minor"} <= set(sample.labels), (name, sample.labels)
            assert (sample.labels["device"], sample.labels["minor"]) in {("GPU-aaa", "0"), ("GPU-bbb", "1")}
            if name.startswith(("pod_", "container_")):
                assert sample.labels["pod_uid"] in {"uid-a", "uid-b"} and "pod_name" in sample.labels
            if name.startswith("container_"):
                assert sample.labels["container_id"] in {"ca1", "ca2"} and "container_name" in sample.labels

    def value(prom: str, **labels: str) -> float:
        (match,) = [s.value for s in samples[prom] if labels.items() <= s.labels.items()]
        return match

    # The fake's numbers (test_gpu._two_gpus): GPU-aaa SM 30 + 25 + 5, pod a's processes 10 + 12 + 1 GiB.
    assert value("hookserver_node_gpu_core_usage_percent", device="GPU-aaa") == 60.0
    assert value("hookserver_gpu_memory_total_bytes", device="GPU-bbb", minor="1") == 80 * GiB
    assert value("hookserver_pod_gpu_memory_usage_bytes", device="GPU-aaa", pod_uid="uid-a") == 23 * GiB
    assert value("hookserver_container_gpu_core_usage_percent", device="GPU-aaa", container_name="helper") == 5.0


def test_top_shows_the_collectors_gpu_use(host_v2: FakeHost, clock: FakeClock, store: StateStore) -> None:
    _run(host_v2, clock, store)
    report = top_report(store, window_s=300.0)
    gpus = {g["device"]: g for g in report["node"]["gpus"]}
    assert gpus["GPU-aaa"]["core_percent"]["now"] == 60.0 and gpus["GPU-aaa"]["memory_total_bytes"] == 80 * GiB
    assert gpus["GPU-bbb"]["utilization_percent"]["now"] == 10.0
    pod_a = next(p for p in report["pods"] if p["uid"] == "uid-a")
    (aaa,) = pod_a["gpus"]
    assert aaa["memory_bytes"]["now"] == 23 * GiB
    assert {c["name"]: c["memory_bytes"]["now"] for c in aaa["containers"]} == {"trainer": 22 * GiB, "helper": GiB}


def test_nodemetric_devices_from_the_collectors_series_and_inventory(host_v2: FakeHost, clock: FakeClock,
                                                                     store: StateStore) -> None:
    _run(host_v2, clock, store)
    policy = report_policy(None, min_report_s=30, min_aggregate_s=60)
    status = build_status(store.snapshot(), store.series, now=clock.time(), policy=policy, reclaimable=None,
                          gpus=gpu_inventory(store.series.get_static(GPU_DEVICES_KEY)))
    assert status["nodeMetric"]["nodeUsage"]["resources"]
    devices = status["nodeMetric"]["nodeUsage"]["devices"]
    # GPU-aaa: SM 60, memory 30 GiB of 80 (ratio int(37.5) = 37); GPU-bbb: SM 9, memory 2 GiB (int(2.5) = 2).
    assert [(d["id"], d["minor"], d["resources"]) for d in devices] == [
        ("GPU-aaa", 0, {"koordinator.sh/gpu-core": "60", "koordinator.sh/gpu-memory": "30Gi",
                        "koordinator.sh/gpu-memory-ratio": "37"}),
        ("GPU-bbb", 1, {"koordinator.sh/gpu-core": "9", "koordinator.sh/gpu-memory": "2Gi",
                        "koordinator.sh/gpu-memory-ratio": "2"}),
    ]
    pods = {p["name"]: p["podUsage"] for p in status["podsMetric"]}  # make_pod names them pod-<uid[:6]>
    # Pod a: its processes on GPU-aaa (SM 60, 23 GiB: ratio int(28.75) = 28); pod b: pid 201 on GPU-bbb.
    assert [(d["id"], d["resources"]) for d in pods["pod-uid-a"]["devices"]] == [
        ("GPU-aaa", {"koordinator.sh/gpu-core": "60", "koordinator.sh/gpu-memory": "23Gi",
                     "koordinator.sh/gpu-memory-ratio": "28"})]
    b_devices = pods["pod-uid-b"]["devices"]
    assert [(d["id"], d["resources"]["koordinator.sh/gpu-core"]) for d in b_devices] == [("GPU-bbb", "9")]
