"""SLOState without a server: which input wins, what is published and when, and what `hookctl slo` says."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from hookserver.informer.slo_state import SLOState
from hookserver.slo import SLODocument, parse_slo_document, spec_from_json
from hookserver.slo.colocation import ANNOTATION_COLOCATION_STRATEGY, ColocationConfig
from hookserver.store import StateStore
from tests.informer.configmaps import slo_data

CM = "apiserver configmap koordinator-system/slo-controller-config"
ORIGIN = "configmap koordinator-system/slo-controller-config"
COLOCATION = {"enable": True, "cpuReclaimThresholdPercent": 50, "nodeConfigs": [
    {"name": "b", "nodeSelector": {"matchLabels": {"pool": "b"}}, "cpuReclaimThresholdPercent": 70}]}


class CountingStore(StateStore):
    def __init__(self) -> None:
        super().__init__(clock=lambda: 100.0)
        self.slo_publishes = 0
        self.colocation_publishes = 0

    def set_node_slo(self, slo: Any, sources: Mapping[str, str] | None = None) -> None:
        self.slo_publishes += 1
        super().set_node_slo(slo, sources)

    def set_colocation(self, resolved: Any) -> None:
        self.colocation_publishes += 1
        super().set_colocation(resolved)


def configmap(**kwargs: Any) -> SLODocument:
    return parse_slo_document({"kind": "ConfigMap", "data": slo_data(**kwargs)}, origin=ORIGIN)


def nodeslo(spec: dict[str, Any]) -> SLODocument:
    return SLODocument(origin="nodeslo/n", kind="nodeslo", spec=spec_from_json(spec, origin="nodeslo/n"))


@pytest.fixture
def store() -> CountingStore:
    return CountingStore()


@pytest.fixture
def state(store: CountingStore) -> SLOState:
    state = SLOState(store, node_labels={"pool": "a"})
    state.publish_defaults()
    return state


def test_defaults_are_published_once_at_start(store: CountingStore, state: SLOState) -> None:
    snap = store.snapshot()
    assert snap.colocation is not None and snap.colocation.enabled is False
    assert set(snap.node_slo_sources.values()) == {"default"}
    assert (store.slo_publishes, store.colocation_publishes) == (1, 1)
    assert state.report()["colocation"]["input"] == "defaults"
    assert "configmap" not in state.report()  # no ConfigMap source has said anything: standalone


def test_nodeslo_object_over_configmap_over_defaults(store: CountingStore, state: SLOState) -> None:
    state.set_configmap(configmap(colocation=COLOCATION, threshold={"enable": True, "cpuSuppressThresholdPercent": 55}),
                        input_name=CM)
    snap = store.snapshot()
    assert snap.node_slo.resource_used_threshold_with_be.cpu_suppress_threshold_percent == 55
    assert snap.node_slo_sources["resourceUsedThresholdWithBE"] == f"{ORIGIN}: resource-threshold-config clusterStrategy"
    assert snap.node_slo_sources["cpuBurstStrategy"] == "default"
    assert snap.colocation.enabled and snap.colocation.strategy.cpu_reclaim_threshold_percent == 50
    state.set_document(nodeslo({"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 44}}),
                       input_name="apiserver nodeslo/n")
    snap = store.snapshot()
    assert snap.node_slo.resource_used_threshold_with_be.cpu_suppress_threshold_percent == 44
    assert snap.node_slo_sources["resourceUsedThresholdWithBE"] == "nodeslo/n"
    assert snap.colocation.strategy.cpu_reclaim_threshold_percent == 50  # a NodeSLO never carries colocation
    assert state.report()["input"] == "apiserver nodeslo/n"
    state.set_document(None, input_name="apiserver: no NodeSLO n")
    assert store.snapshot().node_slo.resource_used_threshold_with_be.cpu_suppress_threshold_percent == 55
    assert state.report()["input"] == f"apiserver: no NodeSLO n; rendered for this node from {CM}"
    state.set_configmap(None, input_name="apiserver: no " + ORIGIN)
    snap = store.snapshot()
    assert set(snap.node_slo_sources.values()) == {"default"} and snap.colocation.enabled is False
    assert snap.colocation.layers == ("default",)
    assert state.report()["colocation"]["input"] == "apiserver: no " + ORIGIN


def test_an_invalid_configmap_keeps_the_previous_one_and_says_why(store: CountingStore, state: SLOState) -> None:
    state.set_configmap(configmap(colocation=COLOCATION, threshold={"cpuSuppressThresholdPercent": 55}),
                        input_name=CM)
    before = store.snapshot()
    state.set_configmap_error("configmap x: invalid SLO configuration: colocation-config.enable: bad",
                              input_name=CM)
    after = store.snapshot()
    assert after.version == before.version  # nothing was published
    report = state.report()
    assert report["colocation"]["last_error"].endswith("colocation-config.enable: bad")
    assert report["configmap"]["last_error"] == report["colocation"]["last_error"]
    assert report["colocation"]["enabled"] is True and "last_error" not in report  # the NodeSLO input is fine
    state.set_configmap(configmap(colocation={"enable": False}), input_name=CM)
    assert "last_error" not in state.report()["colocation"]
    assert store.snapshot().colocation.enabled is False


def test_a_first_configmap_that_is_invalid_is_reported_as_the_input(state: SLOState) -> None:
    state.set_configmap_error("bad", input_name=CM)
    report = state.report()
    assert report["configmap"] == {"input": CM, "document": {"kind": "none"}, "last_error": "bad",
                                   "last_error_at": 100.0}
    assert report["colocation"]["input"] == CM and report["colocation"]["enabled"] is False


def test_labels_and_the_annotation_re_resolve_and_publish_only_on_a_change(
    store: CountingStore, state: SLOState, monkeypatch: pytest.MonkeyPatch
) -> None:
    state.set_configmap(configmap(colocation=COLOCATION), input_name=CM)
    resolves: list[Mapping[str, str]] = []
    real = ColocationConfig.resolve
    monkeypatch.setattr(ColocationConfig, "resolve", lambda self, labels, annotations=None: (
        resolves.append(labels), real(self, labels, annotations))[1])
    slo, colo = store.slo_publishes, store.colocation_publishes

    # the kubelet's heartbeat: same labels, other annotations changing: nothing is resolved or published
    for beat in range(5):
        state.set_node_metadata({"pool": "a"}, {"node.alpha.kubernetes.io/ttl": str(beat)})
    assert resolves == [] and (store.slo_publishes, store.colocation_publishes) == (slo, colo)

    # a label nobody selects on: resolved again, equal results, nothing published
    state.set_node_metadata({"pool": "a", "zone": "z1"}, {})
    assert len(resolves) == 1 and (store.slo_publishes, store.colocation_publishes) == (slo, colo)

    # into nodeConfigs[b]
    state.set_node_metadata({"pool": "b"}, {})
    assert store.snapshot().colocation.strategy.cpu_reclaim_threshold_percent == 70
    assert store.colocation_publishes == colo + 1 and store.slo_publishes == slo

    # the annotation overrides; the same annotation again is free
    annotation = {ANNOTATION_COLOCATION_STRATEGY: json.dumps({"cpuReclaimThresholdPercent": 15})}
    state.set_node_metadata({"pool": "b"}, annotation)
    state.set_node_metadata({"pool": "b"}, {**annotation, "other": "x"})
    snap = store.snapshot()
    assert snap.colocation.strategy.cpu_reclaim_threshold_percent == 15
    assert snap.colocation.layers[-1] == f"node annotation {ANNOTATION_COLOCATION_STRATEGY}"
    assert store.colocation_publishes == colo + 2 and len(resolves) == 3
    assert state.report()["colocation"]["node_annotation"] == annotation[ANNOTATION_COLOCATION_STRATEGY]

    # a broken annotation: the same strategy, but a note, and that is a change worth showing
    state.set_node_metadata({"pool": "b"}, {ANNOTATION_COLOCATION_STRATEGY: "{"})
    snap = store.snapshot()
    assert snap.colocation.strategy.cpu_reclaim_threshold_percent == 70 and len(snap.colocation.notes) == 1
    assert store.colocation_publishes == colo + 3


def test_an_equal_configmap_publishes_nothing(store: CountingStore, state: SLOState) -> None:
    state.set_configmap(configmap(colocation=COLOCATION, threshold={"enable": True}), input_name=CM)
    slo, colo, version = store.slo_publishes, store.colocation_publishes, store.version
    state.set_configmap(configmap(colocation=COLOCATION, threshold={"enable": True}), input_name=CM)  # a resync
    assert (store.slo_publishes, store.colocation_publishes, store.version) == (slo, colo, version)


def test_standalone_colocation_comes_from_the_slo_file_when_it_is_a_configmap(store: CountingStore) -> None:
    state = SLOState(store, node_labels={"pool": "b"}, node_annotations={
        ANNOTATION_COLOCATION_STRATEGY: json.dumps({"metricReportIntervalSeconds": 30})})
    state.publish_defaults()
    document = parse_slo_document({"kind": "ConfigMap", "data": slo_data(colocation=COLOCATION)}, origin="file /x")
    state.set_document(document, input_name="file /x")
    colocation = store.snapshot().colocation
    assert colocation.enabled and colocation.strategy.cpu_reclaim_threshold_percent == 70
    assert colocation.strategy.metric_report_interval_seconds == 30
    assert state.report()["colocation"]["input"] == "file /x"
    state.set_error("file /x: invalid")
    assert state.report()["colocation"]["last_error"] == "file /x: invalid"
    assert store.snapshot().colocation is colocation
    state.set_document(nodeslo({}), input_name="file /y")  # a NodeSLO file: no colocation in it
    assert store.snapshot().colocation.enabled is False
    assert store.snapshot().colocation.layers == ("default",)
    assert state.report()["colocation"]["input"] == "defaults"


def test_the_report_is_json_with_the_colocation_section(state: SLOState) -> None:
    state.set_configmap(configmap(colocation=COLOCATION), input_name=CM)
    state.set_node_metadata({"pool": "b", "node.koordinator.sh/cpu-reclaim-ratio": "oops"}, {})
    report = json.loads(json.dumps(state.report(), allow_nan=False))
    colocation = report["colocation"]
    assert colocation["input"] == CM and colocation["enabled"] is True
    assert colocation["layers"] == [f"{ORIGIN}: colocation-config cluster", "colocation-config nodeConfigs[b]"]
    assert colocation["notes"] == ["label node.koordinator.sh/cpu-reclaim-ratio='oops' ignored: not a number"]
    assert colocation["strategy"]["cpuReclaimThresholdPercent"] == 70 and colocation["node_annotation"] is None
    assert report["configmap"]["input"] == CM and report["configmap"]["document"]["colocation_config"] is True
