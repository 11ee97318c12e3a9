"""Reclaimable predictors on scripted pod sets, against hand-computed values (koordlet semantics)."""

from __future__ import annotations

import json

import pytest

from hookserver.predictor.models import SYSTEM_UID, priority_uid
from hookserver.predictor.predictors import MIN_PREDICTOR, compute_reclaimable
from hookserver.podclass import effective_requests, node_allocatable, pod_priority_class, pod_qos_class
from tests.predictor.helpers import DAY, GI, MI, NOW, node, pod, prediction

PROD = {"koordinator.sh/priority-class": "koord-prod"}


def scripted():
    pods = [
        pod("a", cpu="2", memory="4Gi", labels=PROD),                        # predicted, reclaims
        pod("b", cpu="1", memory="2Gi", labels=PROD, age_s=3600),             # cold: full request is its peak
        pod("c", cpu="4", memory="8Gi", labels={"koordinator.sh/priority-class": "koord-batch"}),  # not prod
        pod("d", cpu="500m", memory="512Mi", labels=PROD),                    # peak above request: reclaims 0
        pod("e", cpu="3", memory="3Gi", labels=PROD),                         # no usage samples: not added
        pod("f", cpu="2", memory="2Gi", labels=PROD, phase="Succeeded"),      # finished
    ]
    predictions = {
        "uid-a": prediction("uid-a", p95_cpu=500, p98_mem=1 * GI),
        "uid-d": prediction("uid-d", p95_cpu=600, p98_mem=600 * MI),
        "uid-f": prediction("uid-f", p95_cpu=100, p98_mem=100 * MI),
        SYSTEM_UID: prediction(SYSTEM_UID, p95_cpu=300, p98_mem=1 * GI),
        priority_uid("koord-prod"): prediction("p", p95_cpu=1200, p98_mem=3 * GI),
        priority_uid(""): prediction("n", p95_cpu=0, p98_mem=0),
    }
    with_metrics = {"uid-a", "uid-b", "uid-c", "uid-d", "uid-f"}
    return pods, predictions, with_metrics


def run(pods, predictions, with_metrics, alloc=None, margin=10, cold=DAY):
    return compute_reclaimable(
        pods=pods, with_metrics=with_metrics, predictions=predictions,
        allocatable=node_allocatable(node()) if alloc is None else alloc, now=NOW, cold_start_s=cold,
        margin_percent=margin,
    )


def test_scripted_pod_set_hand_computed():
    report = run(*scripted())
    pod_based, priority_based, published = report.pod_based, report.priority_based, report.published
    # pod-based: a: peak 550m / int(1Gi x 1.1) = 1181116006, reclaims 1450m / 4Gi - 1181116006 = 3113851290;
    # d: peak int(600 x 1.1) = 660m / int(600Mi x 1.1) = 692060160, reclaims 0; b cold: peak = request 1000m / 2Gi.
    assert pod_based.inputs["sum_peak_cpu_milli"] == 550 + 660
    assert pod_based.inputs["sum_peak_memory_bytes"] == 1181116006 + 692060160
    assert (pod_based.cpu_milli, pod_based.memory_bytes) == (1450, 3113851290)  # min(8000 - 1210, 1450) ...
    assert (pod_based.peak_cpu_milli, pod_based.peak_memory_bytes) == (1210 + 1000, 1873176166 + 2 * GI)
    # priority-based: requests of a, b, d = 3500m / 6979321856; peak = int((300 + 1200 + 0) x 1.1) = 1650m,
    # int((1Gi + 3Gi) x 1.1) = 4724464025; reclaimable = min(alloc - peak, request - peak).
    assert priority_based.inputs["sum_request_cpu_milli"] == 3500
    assert priority_based.inputs["sum_request_memory_bytes"] == 6979321856
    assert (priority_based.peak_cpu_milli, priority_based.peak_memory_bytes) == (1650, 4724464025)
    assert (priority_based.cpu_milli, priority_based.memory_bytes) == (1850, 2254857831)
    # published: the per-resource minimum
    assert published.name == MIN_PREDICTOR
    assert (published.cpu_milli, published.memory_bytes) == (1450, 2254857831)
    assert published.inputs == {"cpu_from": "podReclaimablePredictor", "memory_from": "priorityReclaimablePredictor"}
    assert (published.peak_cpu_milli, published.peak_memory_bytes) == (2210, 4724464025)
    lines = {line.name: line for line in report.pods}
    assert lines["a"].counted_as == "predicted" and lines["a"].peak_cpu_milli == 550
    assert lines["b"].counted_as == "cold" and lines["b"].peak_memory_bytes == 2 * GI
    assert lines["c"].counted_as == "skipped:koord-batch"
    assert lines["d"].reclaimable_cpu_milli == 0 and lines["d"].peak_cpu_milli == 660
    assert lines["e"].counted_as == "skipped:no-usage-samples"
    assert lines["f"].counted_as == "skipped:succeeded"


def test_allocatable_floors_the_pod_based_result():
    pods, predictions, with_metrics = scripted()
    alloc = node_allocatable(node(cpu="1500m", memory="2Gi"))
    report = run(pods, predictions, with_metrics, alloc=alloc)
    # pod-based cpu = min(max(1500 - 1210, 0), 1450) = 290; memory = min(max(2Gi - 1873176166, 0), ...) = 274307482
    assert (report.pod_based.cpu_milli, report.pod_based.memory_bytes) == (290, 2 * GI - 1873176166)
    # priority-based cpu = min(max(1500 - 1650, 0), 1850) = 0: floored at zero, never negative
    assert report.priority_based.cpu_milli == 0
    assert report.published.cpu_milli == 0


def test_zero_margin_and_cold_start_off():
    pods, predictions, with_metrics = scripted()
    report = run(pods, predictions, with_metrics, margin=0, cold=0.0)
    lines = {line.name: line for line in report.pods}
    assert lines["b"].counted_as == "no-model"  # no longer cold, but has no model: still its full request
    assert lines["a"].peak_cpu_milli == 500


def test_raw_allocatable_annotation_wins_and_a_bad_one_falls_back():
    raw = json.dumps({"cpu": "6", "memory": "10Gi"})
    got = node_allocatable(node(annotations={"node.koordinator.sh/raw-allocatable": raw}))
    assert (got.cpu_milli, got.memory_bytes, got.source) == (6000, 10 * GI, "node.koordinator.sh/raw-allocatable")
    bad = node_allocatable(node(annotations={"node.koordinator.sh/raw-allocatable": "{oops"}))
    assert (bad.cpu_milli, bad.source) == (8000, "status.allocatable")
    assert node_allocatable(None) is None


def test_missing_models_or_node_make_errors_not_numbers():
    pods, predictions, with_metrics = scripted()
    del predictions[SYSTEM_UID]
    report = run(pods, predictions, with_metrics)
    assert "no model yet for __node-sys__" in report.priority_based.error
    assert not report.published.ok and "priorityReclaimablePredictor" in report.published.error
    report = compute_reclaimable(pods=pods, with_metrics=with_metrics, predictions=scripted()[1], allocatable=None,
                                 now=NOW, cold_start_s=DAY, margin_percent=10)
    assert report.pod_based.error == "node allocatable unknown"


def test_bad_request_quantity_is_reported_not_raised():
    bad = pod("x", cpu="lots", labels=PROD)
    report = run([bad], scripted()[1], {"uid-x"})
    assert report.pods[0].counted_as == "bad-request" and "cpu" in report.pods[0].note


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"labels": {"koordinator.sh/priority-class": "koord-mid"}, "priority": 9500}, "koord-mid"),  # label wins
        ({"labels": {"koordinator.sh/priority-class": "bogus"}}, "koord-prod"),  # unknown label: none, then QoS
        ({"priority": 9000}, "koord-prod"),
        ({"priority": 7999}, "koord-mid"),
        ({"priority": 5000}, "koord-batch"),
        ({"priority": 3999}, "koord-free"),
        ({"priority": 8000, "kube_qos": "BestEffort"}, "koord-batch"),  # out of range: QoS default (BE -> batch)
        ({"labels": {"koordinator.sh/qosClass": "LSR"}}, "koord-prod"),
        ({"labels": {"koordinator.sh/qosClass": "BE"}}, "koord-batch"),
        ({"kube_qos": ""}, "koord-prod"),  # computed kube QoS: requests without limits = Burstable -> LS -> prod
    ],
)
def test_priority_class_rules(kwargs, expected):
    assert pod_priority_class(pod("p", **kwargs)) == expected


def test_qos_and_requests():
    assert pod_qos_class(pod("p", kube_qos="Guaranteed")) == "LSR"
    assert pod_qos_class(pod("p", kube_qos="BestEffort")) == "BE"
    assert effective_requests(pod("p", cpu="1500m", memory="1Gi")).cpu_milli == 1500


def test_a_terminating_pod_is_not_reclaimable_and_leaves_the_priority_requests():
    """A pod with a deletionTimestamp releases its request within its grace period: counted as reclaimable
    it would publish batch capacity that leaves with it. Same as a finished pod (skipped, request not summed)."""
    from dataclasses import replace

    pods, predictions, with_metrics = scripted()
    pods = [replace(p, deletion_timestamp="2026-11-23T08:00:00Z") if p.name == "a" else p for p in pods]
    report = run(pods, predictions, with_metrics)
    lines = {line.name: line for line in report.pods}
    assert lines["a"].counted_as == "skipped:terminating" and lines["a"].reclaimable_cpu_milli == 0
    # pod-based: only d predicted (peak 660m / 692060160, reclaims 0) and b cold (1000m / 2Gi)
    assert report.pod_based.inputs["sum_peak_cpu_milli"] == 660
    assert (report.pod_based.cpu_milli, report.pod_based.memory_bytes) == (0, 0)
    # priority-based: requests of b and d only = 1500m / 2Gi + 512Mi = 2684354560
    assert report.priority_based.inputs["sum_request_cpu_milli"] == 1500
    assert report.priority_based.inputs["sum_request_memory_bytes"] == 2 * GI + 512 * MI
