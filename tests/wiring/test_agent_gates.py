"""koordlet's NodeMetricPromMetrics and HugePageReport gates reach the parts they switch: the predictor's
Prometheus series and the NRT publisher's hugepages; neither is left "accepted, not implemented", and the kubelet's
root dir (for `cpu_manager_state`) goes to the NRT publisher."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

from prometheus_client import CollectorRegistry

from hookserver.config import load_settings
from hookserver.featuregates import GateValues
from hookserver.store import StateStore
from hookserver.system import SystemRoots
from hookserver.wiring.gates import resolve_feature_gates
from hookserver.wiring.publishers import build_predictor, build_topology


def _agent(tmp_path: Path, gates_text: str) -> tuple[object, GateValues, SimpleNamespace, StateStore]:
    settings = load_settings(overrides={"standalone": True, "feature_gates": gates_text, "node_name": "n1",
                                        "state_dir": str(tmp_path),
                                        "topology": {"kubelet_root_dir": str(tmp_path / "kubelet")}},
                             environ={})
    _, gates = resolve_feature_gates(settings)
    store = StateStore()
    # A standalone informer as the builders see it: no apiserver transport, first sync done.
    informer = SimpleNamespace(transport=None, mode="standalone", first_sync_done=threading.Event())
    return settings, gates, informer, store


def test_both_gates_are_implemented_and_off_by_default(tmp_path: Path) -> None:
    settings, gates, informer, store = _agent(tmp_path, "")
    for name in ("NodeMetricPromMetrics", "HugePageReport"):
        assert gates.values[name].implemented and not gates.enabled(name), name
        assert name not in gates.not_implemented_line()
    predictor, _ = build_predictor(settings, store=store, informer=informer,  # type: ignore[arg-type]
                                   prometheus=CollectorRegistry(), gates=gates)
    assert predictor.metrics is not None and not predictor.metrics.node_metric_usage.enabled
    topology = build_topology(settings, store=store, roots=SystemRoots(), informer=informer,  # type: ignore[arg-type]
                              gates=gates)
    assert not topology.hugepage_report


def test_the_gates_switch_the_series_and_the_hugepages_on(tmp_path: Path) -> None:
    settings, gates, informer, store = _agent(tmp_path, "NodeMetricPromMetrics=true,HugePageReport=true")
    predictor, _ = build_predictor(settings, store=store, informer=informer,  # type: ignore[arg-type]
                                   prometheus=CollectorRegistry(), gates=gates)
    assert predictor.metrics is not None and predictor.metrics.node_metric_usage.enabled
    topology = build_topology(settings, store=store, roots=SystemRoots(), informer=informer,  # type: ignore[arg-type]
                              gates=gates)
    assert topology.hugepage_report
    assert topology._kubelet_root_dir == str(tmp_path / "kubelet")
