"""`hookctl qos plan NAME --slo FILE` on the server side: the document is parsed with the agent's NodeSLO
parsers, resolved for this node's labels, and a bad file is a clear InputError; nothing is kept."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from hookserver.cli import serve
from hookserver.errors import InputError
from qos.framework.debug import QoSProviders
from qos.framework.plan import QoSPlan, numbers
from qos.framework.reconciler import Reconciler, Verdict
from qos.snapshot.model import QoSSnapshot
from tests.qos.helpers import snapshot
from tests.qos.test_runner import _runner


class Threshold(Reconciler):
    """Plans nothing; reports the threshold it would act on."""

    name = "Threshold"
    from hookserver.featuregates import FeatureGate

    gate = FeatureGate("ThresholdGate", True)

    def enabled(self, snap: QoSSnapshot) -> Verdict:
        t = snap.slo.resource_used_threshold_with_be
        return Verdict(t.enable, "on" if t.enable else "off in NodeSLO")

    def plan(self, snap: QoSSnapshot, state: Any) -> QoSPlan:
        t = snap.slo.resource_used_threshold_with_be
        return QoSPlan(self.name, "threshold", numbers(memory=t.memory_evict_threshold_percent))


def _providers(labels: dict[str, str] | None = None) -> QoSProviders:
    runner, *_ = _runner(Threshold())
    return QoSProviders(runner, snapshot=lambda: snapshot(), node_labels=lambda: dict(labels or {}))


def test_replay_under_a_configmap_resolved_for_this_node() -> None:
    doc = """
apiVersion: v1
kind: ConfigMap
metadata: {name: slo-controller-config, namespace: koordinator-system}
data:
  resource-threshold-config: |
    {"clusterStrategy": {"enable": true, "memoryEvictThresholdPercent": 80},
     "nodeStrategies": [{"name": "big", "nodeSelector": {"matchLabels": {"pool": "big"}},
                         "memoryEvictThresholdPercent": 60}]}
"""
    out = _providers({"pool": "big"}).replay({"name": "Threshold", "slo_document": doc, "slo_source": "/tmp/cm.yaml"})
    assert out["plan"]["numbers"] == {"memory": 60} and out["slo_origin"] == "file /tmp/cm.yaml"
    out = _providers({"pool": "small"}).replay({"name": "Threshold", "slo_document": doc, "slo_source": "/tmp/cm.yaml"})
    assert out["plan"]["numbers"] == {"memory": 80}


def test_replay_without_a_file_uses_the_live_nodeslo() -> None:
    out = _providers().replay({"name": "Threshold"})
    assert out["plan"]["numbers"] == {"memory": 70} and out["slo_origin"] == "store"


@pytest.mark.parametrize(
    ("doc", "expect"),
    [
        ("resourceUsedThresholdWithBE: {memoryEvictThresholdPercent: 170}", "memoryEvictThresholdPercent"),
        ("resourceUsedThresholdWithBE: [1, 2", "not valid YAML"),
        ("kind: Deployment", "expected ConfigMap or NodeSLO"),
        ("   \n", "is empty"),
    ],
)
def test_a_bad_file_is_a_clear_input_error(doc: str, expect: str) -> None:
    with pytest.raises(InputError) as err:
        _providers().replay({"name": "Threshold", "slo_document": doc, "slo_source": "/etc/bad.yaml"})
    assert expect in str(err.value)
    assert "/etc/bad.yaml" in str(err.value) or "is empty" in str(err.value)


def test_unknown_reconciler_lists_the_known_ones() -> None:
    with pytest.raises(InputError, match="known: Threshold"):
        _providers().replay({"name": "CPUSupress"})


def test_unknown_feature_gate_stops_startup_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = serve.main([
        "serve", "--standalone", "--no-nri", "--feature-gates=BEMemoryEvcit=true",
        "--hook-socket", str(tmp_path / "h.sock"), "--debug-socket", str(tmp_path / "d.sock"),
        "--registration-dir", str(tmp_path / "reg"), "--state-dir", str(tmp_path / "state"),
        "--metrics-addr", "127.0.0.1:0",
    ])
    err = capsys.readouterr().err
    assert code == 2
    assert "unknown feature gate(s) BEMemoryEvcit" in err and "flag --feature-gates" in err
    assert "Traceback" not in err
    assert not (tmp_path / "h.sock").exists()


def test_names_are_forgiving() -> None:
    from qos.registry import build_reconcilers

    runner, *_ = _runner(*build_reconcilers())
    providers = QoSProviders(runner, snapshot=lambda: snapshot(), node_labels=dict)
    for alias in ("cpusuppress", "CPUSuppresss", "BECPUSuppress"):
        assert providers.replay({"name": alias})["reconciler"] == "CPUSuppress"
    assert providers.replay({"name": "bememoryevict"})["reconciler"] == "MemoryEvict"


def test_startup_refusals_are_one_line_on_stderr(tmp_path: Path) -> None:
    """As an operator sees them (a real process, logging on): an unknown gate used to come after the
    daemon's startup log lines, and a YAML syntax error spanned five lines."""
    import subprocess
    import sys

    bad = tmp_path / "bad.yaml"
    bad.write_text("standalone: [\n")
    common = ["--standalone", "--no-nri", "--hook-socket", str(tmp_path / "h.sock"), "--debug-socket",
              str(tmp_path / "d.sock"), "--registration-dir", str(tmp_path / "reg"), "--state-dir", str(tmp_path / "s"),
              "--metrics-addr", "127.0.0.1:0"]
    for extra, expect in ((["--feature-gates", "Nope=true"], "unknown feature gate(s) Nope"),
                          (["--config", str(bad)], "not valid YAML/JSON: while parsing a flow node")):
        run = subprocess.run([sys.executable, "-m", "hookserver.cli.serve", "serve", *common, *extra],
                             capture_output=True, text=True, timeout=60, env={**os.environ, "HOOKSERVER_LOG_LEVEL": "INFO"})
        assert run.returncode == 2
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and expect in lines[0] and lines[0].startswith("hookserver: "), run.stderr
        assert "line 2, column 1" in lines[0] or "feature" in lines[0]


def test_a_replay_reads_what_its_reconciler_needs_while_the_gate_is_off(tmp_path: Path) -> None:
    """`hookctl qos plan SystemConfig --slo FILE` is how an operator previews the gate before turning it on:
    the daemon's snapshot read the node settings only for gates that are on, so the replay said "node
    settings not read this round" and planned nothing."""
    from hookserver.config import load_settings
    from hookserver.daemon import Daemon

    for sub in ("cpu", "memory", "cpuset"):
        (tmp_path / "cg" / sub).mkdir(parents=True)
    vm = tmp_path / "proc" / "sys" / "vm"
    vm.mkdir(parents=True)
    (vm / "min_free_kbytes").write_text("67584\n")
    (vm / "watermark_scale_factor").write_text("10\n")
    (tmp_path / "proc" / "meminfo").write_text("MemTotal:       16777216 kB\n")
    (tmp_path / "sys").mkdir()
    settings = load_settings(overrides={
        "standalone": True, "state_dir": str(tmp_path / "state"), "hook": {"socket": str(tmp_path / "h.sock")},
        "debug": {"socket": str(tmp_path / "d.sock")}, "nri": {"enabled": False},
        "cgroup": {"root": str(tmp_path / "cg")}, "proc_root": str(tmp_path / "proc"), "sys_root": str(tmp_path / "sys"),
    }, environ={})
    daemon = Daemon(settings)
    try:
        doc = (Path(__file__).parent.parent / "slo" / "slo-controller-config.yaml").read_text()
        out = daemon.debug._providers["qos_plan"]({"name": "SystemConfig", "slo_document": doc, "slo_source": "x.yaml"})
    finally:
        daemon.http.stop()
    assert out["gate"]["enabled"] is False and out["enabled"] is True
    assert "not read" not in out["plan"]["summary"], out["plan"]
    text = json.dumps(out["plan"])
    assert "watermark_scale_factor" in text and "150" in text, text
