"""Every koordlet gate is accepted: implemented ones work as before, the rest are kept, marked not implemented,
logged once and shown; a name koordlet does not have still stops startup."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from hookserver.config import load_settings
from hookserver.errors import ConfigError
from hookserver.koordlet_compat.gates import KOORDLET_GATES, closest_gate, koordlet_gate
from hookserver.featuregates import FeatureGate, GateRegistry
from qos.framework.reconciler import Reconciler
from qos.registry import build_reconcilers, gate_registry

CHART_GATES = "BECPUEvict=true,BEMemoryEvict=true,CgroupReconcile=true,Accelerators=true"
ROOT = Path(__file__).resolve().parents[2]


def test_the_catalog_is_koordlets_39_gates_with_unique_names() -> None:
    names = [g.name for g in KOORDLET_GATES]
    assert len(names) == len(set(names)) == 39
    assert sum(g.kind == "agent" for g in KOORDLET_GATES) == 28
    assert sum(g.kind == "runtime-hook" for g in KOORDLET_GATES) == 11
    on = {g.name for g in KOORDLET_GATES if g.default}
    assert on == {"BECPUSuppress", "CPUBurst", "RdtResctrl", "NodeTopologyReport", "GroupIdentity",
                  "CPUSetAllocator", "BatchResource"}
    assert {g.name for g in KOORDLET_GATES if g.since == "unreleased"} == {
        "PerCPUMetric", "NodeMetricPromMetrics", "OOMScoreAdj"}


def test_every_registered_gate_is_a_koordlet_gate_with_koordlets_default() -> None:
    """A reconciler's gate is koordlet's, by name and default: otherwise a koordlet config would mean another
    thing here."""
    for reconciler in build_reconcilers():
        for gate in reconciler.gates:
            known = koordlet_gate(gate.name)
            assert known is not None, gate.name
            assert known.default == gate.default, gate.name


def test_the_charts_gates_resolve_with_accelerators_accepted_not_implemented() -> None:
    values = gate_registry(build_reconcilers()).resolve([
        ("flag --feature-gates", {"BECPUEvict": True, "BEMemoryEvict": True, "CgroupReconcile": True,
                                  "Accelerators": True}),
    ])
    for name in ("BECPUEvict", "BEMemoryEvict", "CgroupReconcile"):
        assert values.enabled(name) and values.values[name].implemented
    accel = values.values["Accelerators"]
    assert (accel.enabled, accel.implemented, accel.source, accel.default) == (True, False, "flag --feature-gates", False)
    # koordlet's other gates are there with koordlet's default, not implemented
    topo = values.values["NodeTopologyReport"]
    assert (topo.enabled, topo.implemented, topo.source) == (True, False, "default")
    assert len(values.values) == 39


def test_the_not_implemented_line_puts_what_was_asked_for_first() -> None:
    values = GateRegistry([FeatureGate("BECPUEvict", False)]).resolve([("flag --feature-gates", {"Accelerators": True})])
    line = values.not_implemented_line()
    assert line.startswith("accepted, not implemented: Accelerators=true (flag --feature-gates), ")
    assert "NodeTopologyReport=true" in line and "BECPUEvict" not in line


def test_implemented_means_registered_not_a_list() -> None:
    """A component that registers a catalog gate makes it implemented (how engineers add CPUEvict etc.)."""
    before = GateRegistry([]).resolve([])
    assert not before.values["CPUEvict"].implemented

    class Both(Reconciler):
        name = "Both"
        gates = (FeatureGate("BECPUEvict", False), FeatureGate("CPUEvict", False), FeatureGate("CPUAllocatableEvict", False))

        def plan(self, snapshot, state):  # type: ignore[no-untyped-def]
            raise NotImplementedError

    values = gate_registry([Both()]).resolve([("flag --feature-gates", {"CPUEvict": True})])
    assert values.values["CPUEvict"].implemented and values.enabled("CPUEvict")
    assert values.values["CPUAllocatableEvict"].implemented and values.values["BECPUEvict"].implemented
    assert not values.values["MemoryEvict"].implemented


def test_a_name_koordlet_does_not_have_is_refused_with_the_closest_name() -> None:
    with pytest.raises(ConfigError) as err:
        gate_registry(build_reconcilers()).resolve([("flag --feature-gates", {"Accelerator": True})])
    text = str(err.value)
    assert text.startswith("flag --feature-gates: unknown feature gate(s) Accelerator; did you mean Accelerator -> Accelerators?")
    assert closest_gate("becpuevict") == "BECPUEvict"
    assert closest_gate("Nonsense") == ""


def test_serve_refuses_an_unknown_gate_in_one_line_and_accepts_the_charts() -> None:
    bad = subprocess.run(
        [sys.executable, "-m", "hookserver.cli.serve", "serve", "--standalone", "--feature-gates", "Accelerater=true"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )
    assert bad.returncode == 2
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown feature gate(s) Accelerater" in lines[0] and "Accelerators" in lines[0]


def test_the_daemon_logs_not_implemented_gates_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from hookserver.daemon import Daemon

    (tmp_path / "cg").mkdir()
    settings = load_settings(overrides={
        "standalone": True, "state_dir": str(tmp_path / "state"),
        "feature_gates": CHART_GATES + ",TerwayQoS=true",
        "hook": {"socket": str(tmp_path / "h.sock"), "registration_dir": str(tmp_path / "reg")},
        "debug": {"socket": str(tmp_path / "d.sock")}, "nri": {"enabled": False},
        "metrics": {"addr": "127.0.0.1:0"}, "cgroup": {"root": str(tmp_path / "cg"), "version": "v2"},
    }, environ={})
    with caplog.at_level(logging.INFO, logger="hookserver.daemon"):
        daemon = Daemon(settings)
    lines = [r.getMessage() for r in caplog.records if "accepted, not implemented" in r.getMessage()]
    assert len(lines) == 1 and "TerwayQoS=true (flag --feature-gates)" in lines[0]
    assert "Accelerators" not in lines[0]  # the chart's gates are all implemented (Accelerators: the Device report)
    assert [r.levelno for r in caplog.records if "accepted, not implemented" in r.getMessage()] == [logging.WARNING]
    compat = daemon.koordlet_compat()
    assert {"name": "TerwayQoS", "value": True, "source": "flag --feature-gates"} in compat["gates_not_implemented"]
    for gate in ("CoreSched", "OOMScoreAdj", "Resctrl", "TCNetworkQoS"):  # issue 38's reconcilers
        assert daemon.gates.values[gate].implemented, gate
    assert daemon.gates.values["Accelerators"].implemented and daemon.devices is not None
    assert daemon.gates.values["BatchResource"].implemented
