"""The NodeMetric status document: koordinator's field names, quantity formats, windows and cold start."""

from __future__ import annotations

import json

import pytest

from hookserver.predictor import FileStatusSink, NodeMetricReporter, build_status, report_policy
from hookserver.kubewire import cpu_quantity, format_go_duration, memory_quantity, parse_go_duration
from hookserver.slo.nodemetric import NodeMetricSpec
from hookserver.store.timeseries import make_labels
from tests.predictor.conftest import feed, feed_node
from tests.predictor.helpers import GI, MI, NOW, node, pod

PROD = {"koordinator.sh/priority-class": "koord-prod"}


@pytest.mark.parametrize("milli, text", [(0, "0"), (1, "1m"), (250, "250m"), (1500, "1500m"), (2000, "2"),
                                         (64000, "64"), (1_000_000, "1k")])
def test_cpu_quantities_are_canonical(milli, text):
    assert cpu_quantity(milli) == text


@pytest.mark.parametrize("num, text", [(0, "0"), (999, "999"), (1000, "1k"), (1024, "1Ki"), (1536, "1536"),
                                       (2 * GI, "2Gi"), (512 * MI, "512Mi"), (GI + 1, "1073741825")])
def test_memory_quantities_are_canonical(num, text):
    assert memory_quantity(num) == text


def test_go_durations():
    assert [format_go_duration(s) for s in (300, 600, 1800, 3600, 90)] == ["5m0s", "10m0s", "30m0s", "1h0m0s", "1m30s"]
    assert parse_go_duration("1h30m") == 5400 and parse_go_duration("5m0s") == 300
    with pytest.raises(Exception, match="not a duration"):
        parse_go_duration("five minutes")


def test_policy_from_spec_with_koordlet_floors():
    spec = NodeMetricSpec.model_validate({"metricCollectPolicy": {
        "reportIntervalSeconds": 5, "aggregateDurationSeconds": 10,
        "nodeAggregatePolicy": {"durations": ["1m", "bogus", "15m0s"]}}})
    policy = report_policy(spec, min_report_s=30, min_aggregate_s=60)
    assert (policy.report_interval_s, policy.aggregate_s, policy.durations_s) == (30, 60, (60.0, 900.0))
    assert policy.problems and "bogus" in policy.problems[0]
    default = report_policy(None, min_report_s=30, min_aggregate_s=60)
    assert (default.report_interval_s, default.aggregate_s, default.durations_s) == (60, 300, (300.0, 600.0, 1800.0))


def seeded(store):
    store.set_node(node())
    store.upsert_pod(pod("a", labels=PROD, kube_qos="Burstable", namespace="ns1"))
    store.upsert_pod(pod("b", kube_qos="BestEffort", namespace="ns0"))
    store.upsert_pod(pod("quiet", namespace="ns0"))  # no samples: not reported
    feed_node(store, cpu=[2.0] * 60, memory=[8.0 * GI] * 60, end=NOW, step=10.0)  # 590 s of samples
    feed(store, uid="uid-a", cpu=[1.0, 2.0] * 30, memory=[2.0 * GI] * 60, end=NOW, step=5.0)
    feed(store, uid="uid-b", cpu=[0.25] * 10, memory=[256.0 * MI] * 10, end=NOW, step=5.0)
    for i in range(60):
        ts = NOW - (59 - i) * 10.0
        store.series.append(("system_cpu_usage", ()), 0.5, ts=ts)
        store.series.append(("system_memory_usage", ()), float(GI), ts=ts)
        labels = make_labels(app="nginx", qos="LS", priority="koord-prod")
        store.series.append(("host_app_cpu_usage", labels), 0.1, ts=ts)
        store.series.append(("host_app_memory_usage", labels), float(100 * MI), ts=ts)
    store.set_node_slo({"spec": {"hostApplications": [{"name": "nginx"}, {"name": "absent"}]}})


def test_document_shape_and_values(store):
    seeded(store)
    policy = report_policy(None, min_report_s=30, min_aggregate_s=60)
    status = build_status(store.snapshot(), store.series, now=NOW, policy=policy, reclaimable=None)
    assert status["updateTime"] == "2027-01-15T08:00:00Z"
    node_metric = status["nodeMetric"]
    assert node_metric["nodeUsage"] == {"resources": {"cpu": "2", "memory": "8Gi"}}
    assert node_metric["systemUsage"] == {"resources": {"cpu": "500m", "memory": "1Gi"}}
    durations = [a["duration"] for a in node_metric["aggregatedNodeUsages"]]
    assert durations == ["5m0s", "10m0s", "30m0s"]
    five, ten, thirty = node_metric["aggregatedNodeUsages"]
    assert set(five["usage"]) == {"avg", "p50", "p90", "p95", "p99"}
    assert five["usage"]["p99"] == {"resources": {"cpu": "2", "memory": "8Gi"}}
    assert ten["usage"]["avg"] == {"resources": {"cpu": "2", "memory": "8Gi"}}  # 590 s >= half of 600 s
    assert thirty["usage"] == {agg: {} for agg in ("avg", "p50", "p90", "p95", "p99")}  # cold: 590 s < 900 s
    assert status["podsMetric"] == [  # sorted by namespace/name; average over the 300 s window
        {"name": "b", "namespace": "ns0", "podUsage": {"resources": {"cpu": "250m", "memory": "256Mi"}},
         "priority": "koord-batch", "qos": "BE"},
        {"name": "a", "namespace": "ns1", "podUsage": {"resources": {"cpu": "1500m", "memory": "2Gi"}},
         "priority": "koord-prod", "qos": "LS"},
    ]
    assert status["hostApplicationMetric"] == [
        {"name": "nginx", "usage": {"resources": {"cpu": "100m", "memory": "100Mi"}}, "priority": "koord-prod",
         "qos": "LS"}
    ]
    assert "prodReclaimableMetric" not in status
    json.dumps(status)  # plain JSON


def test_memory_collect_policy_with_page_cache(store):
    seeded(store)
    for i in range(30):
        store.series.append(("node_memory_usage_with_cache", ()), float(12 * GI), ts=NOW - i * 10.0)
    spec = NodeMetricSpec.model_validate({"metricCollectPolicy": {"nodeMemoryCollectPolicy": "usageWithPageCache"}})
    policy = report_policy(spec, min_report_s=30, min_aggregate_s=60)
    status = build_status(store.snapshot(), store.series, now=NOW, policy=policy, reclaimable=None)
    assert status["nodeMetric"]["nodeUsage"]["resources"]["memory"] == "12Gi"


def test_standalone_file_carries_the_reclaimable_numbers(store, make_service, clock, tmp_path):
    seeded(store)
    service = make_service()
    service.train_once(NOW)
    path = tmp_path / "state" / "nodemetric.json"
    reporter = NodeMetricReporter(service, FileStatusSink(str(path), node_name="node-a"), settings=service.settings)
    assert reporter.report_once(NOW).result == "ok"
    doc = json.loads(path.read_text())
    assert doc["kind"] == "NodeMetric" and doc["metadata"] == {"name": "node-a"}
    status = doc["status"]
    # The one prod pod is 2 days old with one training sample: pod-based reclaimable = request 1 core -
    # int(p95 x 1.1); priority-based needs the system model, trained from node - pods.
    report = service.reclaimable(window_s=300.0, now=NOW)
    assert report.published.ok
    assert status["prodReclaimableMetric"] == {"resource": {"resources": {
        "cpu": cpu_quantity(report.published.cpu_milli), "memory": memory_quantity(report.published.memory_bytes)}}}
    assert status["prodPeakMetric"]["resource"]["resources"]["cpu"] == cpu_quantity(report.published.peak_cpu_milli)
    view = reporter.view()
    assert view["target"] == "file" and view["where"] == str(path) and view["last_result"] == "ok"
    assert not list((tmp_path / "state").glob("*.tmp"))


def test_unwritable_file_is_an_error_result(store, make_service, tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    service = make_service()
    reporter = NodeMetricReporter(service, FileStatusSink(str(blocker / "nodemetric.json"), node_name="n"),
                                  settings=service.settings)
    delivery = reporter.report_once(NOW)
    assert delivery.result == "error" and "blocker" in delivery.detail
    assert reporter.view()["last_error"]


def test_numa_usages_shape_and_averages(store):
    """koordinator #3138: `nodeMetric.numaUsages` = [{numaNodeID, nodeUsage, systemUsage}] sorted by id, each the
    average over the aggregate window (300 s: the last 31 of 60 samples 10 s apart, NOW − 300 included; the
    older ones, 9 cores and 1 GiB on node 0, do not count). Node 10 sorts after node 2
    numerically; node 2 has no system samples: `systemUsage: {}`, as Go serialises an empty ResourceMap; node 7
    has CPU but no memory samples: left out, as koordlet skips a NUMA node whose usage it cannot query."""
    seeded(store)
    for i in range(60):
        ts = NOW - (59 - i) * 10.0
        for numa, cpu, mem in (("0", 9.0 if i < 29 else 1.5, 4 * GI), ("10", 0.25, 512 * MI), ("2", 0.5, GI)):
            labels = make_labels(numa=numa)
            store.series.append(("numa_cpu_usage", labels), cpu, ts=ts)
            store.series.append(("numa_memory_usage", labels), float(mem), ts=ts)
        store.series.append(("numa_system_cpu_usage", make_labels(numa="0")), 0.3, ts=ts)
        store.series.append(("numa_system_memory_usage", make_labels(numa="0")), float(GI if i < 29 else 2 * GI), ts=ts)
        store.series.append(("numa_system_cpu_usage", make_labels(numa="10")), 0.2, ts=ts)
        store.series.append(("numa_system_memory_usage", make_labels(numa="10")), float(256 * MI), ts=ts)
        store.series.append(("numa_cpu_usage", make_labels(numa="7")), 1.0, ts=ts)
    policy = report_policy(None, min_report_s=30, min_aggregate_s=60)
    status = build_status(store.snapshot(), store.series, now=NOW, policy=policy, reclaimable=None)
    assert status["nodeMetric"]["numaUsages"] == [
        {"numaNodeID": 0, "nodeUsage": {"resources": {"cpu": "1500m", "memory": "4Gi"}},
         "systemUsage": {"resources": {"cpu": "300m", "memory": "2Gi"}}},
        {"numaNodeID": 2, "nodeUsage": {"resources": {"cpu": "500m", "memory": "1Gi"}}, "systemUsage": {}},
        {"numaNodeID": 10, "nodeUsage": {"resources": {"cpu": "250m", "memory": "512Mi"}},
         "systemUsage": {"resources": {"cpu": "200m", "memory": "256Mi"}}},
    ]
    assert json.loads(json.dumps(status))["nodeMetric"]["numaUsages"][0]["numaNodeID"] == 0


def test_no_numa_samples_no_numa_usages_field(store):
    seeded(store)
    policy = report_policy(None, min_report_s=30, min_aggregate_s=60)
    status = build_status(store.snapshot(), store.series, now=NOW, policy=policy, reclaimable=None)
    assert "numaUsages" not in status["nodeMetric"]
