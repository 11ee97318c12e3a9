"""GPU use in the NodeMetric status, where koordlet's statesinformer puts it (states_nodemetric.go): the node's
and each aggregated usage's `devices`, and each pod's `podUsage.devices`, with koordlet's truncations.

Expected values are worked out by hand in the comments from the samples each test feeds."""

from __future__ import annotations

import json

import pytest

from collectors.gpu import GPU_DEVICES_KEY
from collectors.nvml import GpuDevice
from hookserver.kubewire import decimal_quantity
from hookserver.predictor import FileStatusSink, NodeMetricReporter, build_status, report_policy
from hookserver.predictor.nodemetric_gpu import GPU_DEVICES_STATIC, gpu_inventory
from hookserver.store.timeseries import make_labels
from tests.predictor.conftest import feed, feed_node
from tests.predictor.helpers import GI, NOW, node, pod

CORE, MEM, RATIO = "koordinator.sh/gpu-core", "koordinator.sh/gpu-memory", "koordinator.sh/gpu-memory-ratio"
# Listed out of NVML index order: the report follows the index (koordlet's devices[deviceIndex]), not the minor.
INVENTORY = (
    GpuDevice(2, "GPU-ccc", "NVIDIA H100", 2, 0, "00000000:b1:00.0", healthy=False, unhealthy_reason="XID 79"),
    GpuDevice(0, "GPU-aaa", "NVIDIA H100", 1, 80 * GI, "00000000:17:00.0"),
    GpuDevice(1, "GPU-bbb", "NVIDIA H100", 0, 80 * GI, "00000000:65:00.0"),
)


@pytest.mark.parametrize("value, text", [(0, "0"), (35, "35"), (100, "100"), (1000, "1k"), (1500, "1500")])
def test_decimal_quantities_are_canonical(value, text):
    assert decimal_quantity(value) == text


def test_the_static_name_is_the_collectors():
    assert GPU_DEVICES_STATIC == GPU_DEVICES_KEY


def _gpu(store, metric, uuid, minor, values, *, start, step=10.0, **labels):
    for i, value in enumerate(values):
        store.series.append((metric, make_labels(device=uuid, minor=str(minor), node="node-a", **labels)), value,
                            ts=start + i * step)


def _world(store):
    """Node CPU and memory for 590 s (so the 5 m and 10 m aggregations are warm, 30 m is cold).

    GPU-aaa: two old samples (t-500, t-400: core 90, memory 70 GiB), outside the 300 s report window but
    inside 10 m; then 30 in the window (t-290 .. t): core 30 and 41 alternating, memory 10 GiB then 11 GiB
    (15 each). GPU-bbb: core samples only. GPU-ccc: core 100, memory 1 GiB, in the window."""
    store.set_node(node())
    store.upsert_pod(pod("a", namespace="ns"))
    store.upsert_pod(pod("b", namespace="ns"))
    feed_node(store, cpu=[2.0] * 60, memory=[8.0 * GI] * 60, end=NOW, step=10.0)
    feed(store, uid="uid-a", cpu=[1.0] * 30, memory=[GI] * 30, end=NOW, step=10.0)
    feed(store, uid="uid-b", cpu=[0.5] * 30, memory=[GI] * 30, end=NOW, step=10.0)
    _gpu(store, "node_gpu_core_usage", "GPU-aaa", 1, [90.0, 90.0], start=NOW - 500, step=100.0)
    _gpu(store, "node_gpu_memory_usage", "GPU-aaa", 1, [70.0 * GI] * 2, start=NOW - 500, step=100.0)
    _gpu(store, "node_gpu_core_usage", "GPU-aaa", 1, [30.0, 41.0] * 15, start=NOW - 290)
    _gpu(store, "node_gpu_memory_usage", "GPU-aaa", 1, [10.0 * GI] * 15 + [11.0 * GI] * 15, start=NOW - 290)
    _gpu(store, "node_gpu_core_usage", "GPU-bbb", 0, [50.0] * 30, start=NOW - 290)
    _gpu(store, "node_gpu_core_usage", "GPU-ccc", 2, [100.0] * 30, start=NOW - 290)
    _gpu(store, "node_gpu_memory_usage", "GPU-ccc", 2, [1.0 * GI] * 30, start=NOW - 290)
    # Pod a on GPU-aaa: core 20 then 25 (avg 22.5), memory 4 GiB; pod b has no GPU series.
    _gpu(store, "pod_gpu_core_usage", "GPU-aaa", 1, [20.0] * 15 + [25.0] * 15, start=NOW - 290, pod="uid-a", qos="LS")
    _gpu(store, "pod_gpu_memory_usage", "GPU-aaa", 1, [4.0 * GI] * 30, start=NOW - 290, pod="uid-a", qos="LS")


def _status(store, gpus=INVENTORY):
    policy = report_policy(None, min_report_s=30, min_aggregate_s=60)
    return build_status(store.snapshot(), store.series, now=NOW, policy=policy, reclaimable=None,
                        gpus=gpu_inventory(list(gpus)))


def test_node_usage_devices_are_the_window_average_in_index_order(store):
    _world(store)
    usage = _status(store)["nodeMetric"]["nodeUsage"]
    assert usage["resources"] == {"cpu": "2", "memory": "8Gi"}
    # GPU-aaa: core avg (15x30 + 15x41) / 30 = 35.5 -> int 35; memory avg 10.5 GiB = 10752 Mi;
    # ratio int(100 x 10.5 / 80) = int(13.125) = 13. GPU-bbb has no memory samples: left out.
    # GPU-ccc: unhealthy, no known total memory -> no ratio.
    assert usage["devices"] == [
        {"type": "gpu", "id": "GPU-aaa", "minor": 1, "health": True,
         "resources": {CORE: "35", MEM: "10752Mi", RATIO: "13"}},
        {"type": "gpu", "id": "GPU-ccc", "minor": 2, "health": False,
         "resources": {CORE: "100", MEM: "1Gi"}},
    ]
    assert list(usage) == ["resources", "devices"]  # Go's field order: resources, then devices


def test_aggregated_node_usages_carry_each_aggregation_of_the_devices(store):
    _world(store)
    five, ten, thirty = _status(store)["nodeMetric"]["aggregatedNodeUsages"]
    aaa = {agg: next(d for d in ten["usage"][agg]["devices"] if d["id"] == "GPU-aaa") for agg in ten["usage"]}
    # 10 m: 32 samples, sorted core 15x30, 15x41, 2x90. avg 1245/32 = 38.9 -> 38; p50 (rank 15.5) 41;
    # p99 (rank 30.69) 90. Memory 15x10, 15x11, 2x70 GiB: avg 455/32 GiB = 14560 Mi, ratio int(17.77) 17;
    # p50 11 GiB (ratio int(13.75) 13); p99 70 GiB (ratio int(87.5) 87).
    assert aaa["avg"]["resources"] == {CORE: "38", MEM: "14560Mi", RATIO: "17"}
    assert aaa["p50"]["resources"] == {CORE: "41", MEM: "11Gi", RATIO: "13"}
    assert aaa["p99"]["resources"] == {CORE: "90", MEM: "70Gi", RATIO: "87"}
    # 5 m: the old samples are out; p99 of 15x30, 15x41 is 41.
    five_aaa = five["usage"]["p99"]["devices"][0]
    assert (five_aaa["id"], five_aaa["resources"][CORE]) == ("GPU-aaa", "41")
    # 30 m: 590 s of node samples is a cold start: no resources, so no devices either.
    assert thirty["usage"] == {agg: {} for agg in ("avg", "p50", "p90", "p95", "p99")}
    # systemUsage never has devices (koordlet's querySystemMetric does not add them).
    assert "devices" not in json.dumps(_status(store)["nodeMetric"].get("systemUsage", {}))


def test_pod_usage_devices_are_the_pods_own_series(store):
    _world(store)
    pods = {p["name"]: p["podUsage"] for p in _status(store)["podsMetric"]}
    # Pod a: core avg 22.5 -> 22; memory 4 GiB; ratio int(100 x 4 / 80) = 5. Pod b: no GPU series, no devices.
    assert pods["a"]["devices"] == [{"type": "gpu", "id": "GPU-aaa", "minor": 1, "health": True,
                                     "resources": {CORE: "22", MEM: "4Gi", RATIO: "5"}}]
    assert pods["b"] == {"resources": {"cpu": "500m", "memory": "1Gi"}}


def test_a_cpu_node_document_is_unchanged(store):
    """No inventory: byte for byte the document without the GPU code path; an inventory whose GPUs have no
    samples yet gives the same document (empty lists are omitted, as Go's omitempty does)."""
    _world(store)
    policy = report_policy(None, min_report_s=30, min_aggregate_s=60)
    plain = build_status(store.snapshot(), store.series, now=NOW, policy=policy, reclaimable=None)
    assert "devices" not in json.dumps(plain)
    assert json.dumps(_status(store, gpus=())) == json.dumps(plain)
    quiet = (GpuDevice(0, "GPU-zzz", "NVIDIA H100", 0, 80 * GI, "00000000:17:00.0"),)
    assert json.dumps(_status(store, gpus=quiet)) == json.dumps(plain)
    assert gpu_inventory(None) == () and gpu_inventory("not a list") == () and gpu_inventory([object()]) == ()


def test_without_node_samples_no_devices_are_reported(store):
    """koordlet adds the GPUs to a ResourceMap only after the node's CPU and memory query succeeded."""
    _gpu(store, "node_gpu_core_usage", "GPU-aaa", 1, [30.0] * 30, start=NOW - 290)
    _gpu(store, "node_gpu_memory_usage", "GPU-aaa", 1, [GI] * 30, start=NOW - 290)
    assert _status(store)["nodeMetric"]["nodeUsage"] == {}


def test_the_reporter_reads_the_inventory_from_the_store(store, make_service, tmp_path):
    _world(store)
    store.series.put_static(GPU_DEVICES_STATIC, INVENTORY)
    service = make_service()
    path = tmp_path / "nodemetric.json"
    reporter = NodeMetricReporter(service, FileStatusSink(str(path), node_name="node-a"), settings=service.settings)
    assert reporter.report_once(NOW).result == "ok"
    status = json.loads(path.read_text())["status"]
    assert [d["id"] for d in status["nodeMetric"]["nodeUsage"]["devices"]] == ["GPU-aaa", "GPU-ccc"]
    assert [p["podUsage"].get("devices", [{}])[0].get("id") for p in status["podsMetric"]] == ["GPU-aaa", None]
