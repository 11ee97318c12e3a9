"""koordlet's NodeMetricPromMetrics gauges (koordinator #3138, `pkg/koordlet/metrics/node_metric.go`): scraped
from the real /metrics endpoint, with the gate off (nothing at all) and on (the reported NodeMetric's values)."""

from __future__ import annotations

import http.client
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from hookserver.observability import HealthState, MetricsHttpServer
from hookserver.predictor import FileStatusSink, NodeMetricReporter, PredictorMetrics
from tests.predictor.helpers import GI, MI, NOW
from tests.predictor.test_nodemetric_status import seeded

# A NodeMetric status as koordlet reports it (values chosen by hand; the expected gauges are worked out below).
KNOWN = {
    "updateTime": "2027-01-15T08:00:00Z",
    "nodeMetric": {
        "nodeUsage": {"resources": {"cpu": "2500m", "memory": "8Gi"}},
        "systemUsage": {"resources": {"cpu": "300m", "memory": "512Mi"}},
        "numaUsages": [
            {"numaNodeID": 0, "nodeUsage": {"resources": {"cpu": "1500m", "memory": "4Gi"}},
             "systemUsage": {"resources": {"cpu": "200m", "memory": "256Mi"}}},
            {"numaNodeID": 1, "nodeUsage": {"resources": {"cpu": "1", "memory": "4Gi"}}, "systemUsage": {}},
        ],
    },
    "podsMetric": [{"name": "a", "namespace": "ns", "podUsage": {"resources": {"cpu": "1", "memory": "1Gi"}}}],
}
EXPECTED = {
    'koordlet_node_metric_node_usage{node="node-a",resource="cpu",unit="core"}': 2.5,
    'koordlet_node_metric_node_usage{node="node-a",resource="memory",unit="byte"}': 8.0 * GI,
    'koordlet_node_metric_system_usage{node="node-a",resource="cpu",unit="core"}': 0.3,
    'koordlet_node_metric_system_usage{node="node-a",resource="memory",unit="byte"}': 512.0 * MI,
    'koordlet_node_metric_numa_node_usage{node="node-a",numa_node_id="0",resource="cpu",unit="core"}': 1.5,
    'koordlet_node_metric_numa_node_usage{node="node-a",numa_node_id="0",resource="memory",unit="byte"}': 4.0 * GI,
    'koordlet_node_metric_numa_node_usage{node="node-a",numa_node_id="1",resource="cpu",unit="core"}': 1.0,
    'koordlet_node_metric_numa_node_usage{node="node-a",numa_node_id="1",resource="memory",unit="byte"}': 4.0 * GI,
    'koordlet_node_metric_numa_system_usage{node="node-a",numa_node_id="0",resource="cpu",unit="core"}': 0.2,
    'koordlet_node_metric_numa_system_usage{node="node-a",numa_node_id="0",resource="memory",unit="byte"}':
        256.0 * MI,
}


@pytest.fixture
def served() -> Iterator[tuple[CollectorRegistry, MetricsHttpServer]]:
    registry = CollectorRegistry()
    server = MetricsHttpServer("127.0.0.1:0", registry, HealthState(), poll_interval_s=0.02)
    server.start()
    yield registry, server
    server.stop()


def scrape(server: MetricsHttpServer) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        assert response.status == 200
        return response.read().decode()
    finally:
        conn.close()


def node_metric_lines(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line.startswith("koordlet_node_metric_"):
            series, _, value = line.rpartition(" ")
            out[series] = float(value)
    return out


def test_gate_off_exports_no_series_at_all(served):
    registry, server = served
    metrics = PredictorMetrics(registry, node="node-a")  # koordlet's default: the gate is off
    metrics.node_metric_usage.record(KNOWN)
    assert "koordlet_node_metric_" not in scrape(server)


def test_gate_on_exports_the_reported_values_under_koordlets_names(served):
    registry, server = served
    metrics = PredictorMetrics(registry, node="node-a", node_metric_prom=True)
    metrics.node_metric_usage.record(KNOWN)
    text = scrape(server)
    assert node_metric_lines(text) == EXPECTED
    assert "# HELP koordlet_node_metric_numa_node_usage the per-NUMA node usage reported in the NodeMetric" in text
    assert "# TYPE koordlet_node_metric_node_usage gauge" in text


def test_each_report_replaces_the_whole_set(served):
    """koordlet resets the vectors before recording: a NUMA node that leaves the report leaves the scrape."""
    registry, server = served
    metrics = PredictorMetrics(registry, node="node-a", node_metric_prom=True)
    metrics.node_metric_usage.record(KNOWN)
    later = {"nodeMetric": {"nodeUsage": {"resources": {"cpu": "3", "memory": "1Gi"}}}}
    metrics.node_metric_usage.record(later)
    assert node_metric_lines(scrape(server)) == {
        'koordlet_node_metric_node_usage{node="node-a",resource="cpu",unit="core"}': 3.0,
        'koordlet_node_metric_node_usage{node="node-a",resource="memory",unit="byte"}': 1.0 * GI,
    }


def test_the_reporter_records_the_status_it_delivers(store, make_service, tmp_path, served):
    """Fed from the NodeMetric the agent reports: the gauges equal the delivered document's usages."""
    registry, server = served
    seeded(store)
    service = make_service()
    metrics = PredictorMetrics(registry, node="node-a", node_metric_prom=True)
    reporter = NodeMetricReporter(service, FileStatusSink(str(tmp_path / "nm.json"), node_name="node-a"),
                                  settings=service.settings, metrics=metrics)
    assert reporter.report_once(NOW).result == "ok"
    assert reporter.last_status is not None
    assert reporter.last_status["nodeMetric"]["nodeUsage"] == {"resources": {"cpu": "2", "memory": "8Gi"}}
    lines = node_metric_lines(scrape(server))
    assert lines['koordlet_node_metric_node_usage{node="node-a",resource="cpu",unit="core"}'] == 2.0
    assert lines['koordlet_node_metric_node_usage{node="node-a",resource="memory",unit="byte"}'] == 8.0 * GI
    assert lines['koordlet_node_metric_system_usage{node="node-a",resource="cpu",unit="core"}'] == 0.5
    assert lines['koordlet_node_metric_system_usage{node="node-a",resource="memory",unit="byte"}'] == 1.0 * GI
