"""The predictor's names agree with the collectors' catalogue and with koordlet's metrics; exports are honest."""

from __future__ import annotations

import hookserver.predictor as predictor
from collectors.names import METRICS
from hookserver import seriesnames as series
from prometheus_client import CollectorRegistry

from hookserver.predictor.metrics import PredictorMetrics


def test_series_names_are_the_collectors():
    for name in series.__all__:
        assert getattr(series, name) in METRICS, name


def test_exports_are_exactly_the_public_names():
    for name in predictor.__all__:
        assert hasattr(predictor, name), name
    assert sorted(predictor.__all__) == sorted(set(predictor.__all__))


def test_koordlet_metric_names_and_labels():
    registry = CollectorRegistry()
    metrics = PredictorMetrics(registry, node="node-a")
    metrics.record_reclaimable("minPredictor", 1500, 2 << 30)
    metrics.record_peak("podReclaimablePredictor", 250, 1 << 20)
    metrics.record_prod_reported(1500, 2 << 30)
    get = registry.get_sample_value
    labels = {"node": "node-a", "predictor": "minPredictor", "resource": "cpu", "unit": "core"}
    assert get("koordlet_node_predicted_resource_reclaimable", labels) == 1.5
    assert get("koordlet_node_predicted_resource_reclaimable", labels | {"resource": "memory", "unit": "byte"}) == 2 << 30
    assert get("koordlet_node_predicted_resource_peak",
               {"node": "node-a", "predictor": "podReclaimablePredictor", "resource": "cpu", "unit": "core"}) == 0.25
    assert get("koordlet_node_priority_resource_reclaimable",
               {"node": "node-a", "priority": "koord-prod", "resource": "cpu", "unit": "core"}) == 1.5
    assert get("koordlet_node_resource_priority_reclaimable_status", {"node": "node-a", "priority": "koord-prod"}) == 0
    metrics.record_prod_reported(1500, 2 << 30, ok=False)
    assert get("koordlet_node_resource_priority_reclaimable_status", {"node": "node-a", "priority": "koord-prod"}) == 1
    assert get("koordlet_node_priority_resource_reclaimable",
               {"node": "node-a", "priority": "koord-prod", "resource": "cpu", "unit": "core"}) == 0
