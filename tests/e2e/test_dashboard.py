"""deploy/grafana/hookserver.json queries only series a running agent exports.

A real `hookserver serve --standalone` (tests/e2e/test_serve.Agent) gets one best-effort pod through
its hook socket, with the pod cgroup in a private subtree of the real cgroup v1 hierarchy, so the
collectors, the hook histograms and the usage-by-QoS series all have data; then every metric name in
every panel query must appear among the samples of its /metrics. The GPU panels' series exist only on a node
with NVIDIA GPUs: they must be GPU series of collectors/names.py, whose export (names and device/minor labels)
tests/collectors/test_gpu_reports.py checks through the same exporter with a fake NVML.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from collectors.names import METRICS
from tests.e2e.pod_cgroup import pod_cgroup_subtree
from tests.e2e.test_serve import Agent, be_pod

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "hookserver.json"
METRIC = re.compile(r"\b(?:koordlet|hookserver)_[A-Za-z0-9_:]+")
# Exported only where the GPU collector runs (a node with NVIDIA GPUs and NVML).
GPU_ONLY = {spec.prom for name, spec in METRICS.items() if "gpu" in name}

def _dashboard() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return doc


@pytest.fixture
def pod_cgroup() -> Iterator[str]:
    """A pod cgroup in cpu and memory, and in cpuacct where it is mounted apart (as on this host): the
    collectors read CPU usage from cpuacct and memory from memory."""
    with pod_cgroup_subtree(("cpu", "memory"), optional=("cpuacct",), prefix="hookserver-dash") as pod:
        yield pod.rel


def _queried() -> dict[str, list[str]]:
    """Metric name -> titles of the panels that query it."""
    out: dict[str, list[str]] = {}
    for panel in _dashboard()["panels"]:
        for target in panel.get("targets", []):
            for name in METRIC.findall(target["expr"]):
                out.setdefault(name, []).append(panel["title"])
    return out


def test_dashboard_is_well_formed() -> None:
    doc = _dashboard()
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
    assert {v["name"] for v in doc["templating"]["list"]} == {"datasource", "node"}
    titles = {p["title"] for p in doc["panels"]}
    for wanted in ("CPU by QoS class", "BE CPU: budget vs use", "Hook latency p50 / p99 by stage", "Hook failures",
                   "NRI connection state", "Collector cycle time", "Pod evictions by reason"):
        assert wanted in titles
    for panel in doc["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert METRIC.search(target["expr"]), f"{panel['title']}: {target['expr']}"
            assert target["datasource"]["uid"] == "${datasource}"


def test_gpu_panels_query_the_gpu_collectors_series() -> None:
    queried = _queried()
    gpu_queried = {name for name in queried if "gpu" in name}
    assert gpu_queried <= GPU_ONLY, sorted(gpu_queried - GPU_ONLY)
    for wanted in ("hookserver_node_gpu_core_usage_percent", "hookserver_node_gpu_memory_usage_bytes",
                   "hookserver_pod_gpu_memory_usage_bytes"):
        assert wanted in gpu_queried
    titles = {p["title"] for p in _dashboard()["panels"]}
    assert {"GPU core use per device", "GPU memory use per device", "Top pods by GPU memory"} <= titles
    for name in gpu_queried:  # every GPU panel breaks down by device or by pod, never one anonymous line
        for title in queried[name]:
            panel = next(p for p in _dashboard()["panels"] if p["title"] == title)
            assert all(("minor" in t["expr"]) or ("pod_name" in t["expr"]) for t in panel["targets"]), title


def _scrape(port: int) -> set[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    # A family counts once the agent declares it (HELP/TYPE), even before its first sample: an eviction
    # counter or a suppress gauge has no sample until the first eviction or suppress round, as in koordlet.
    families = list(text_string_to_metric_families(text))
    return {f.name for f in families} | {sample.name for family in families for sample in family.samples}


def test_every_metric_the_dashboard_queries_is_exported_by_a_running_agent(
    tmp_path: Path, pod_cgroup: str, capsys: pytest.CaptureFixture[str]
) -> None:
    queried = _queried()
    agent = Agent(tmp_path)
    try:
        code, out = agent.hookctl("status", "-o", "json", capsys=capsys)
        assert code == 0
        port = json.loads(out)["metrics_port"]
        agent.stub().PreRunPodSandboxHook(be_pod(pod_cgroup), timeout=10)
        wanted = set(queried) - GPU_ONLY  # this host has no GPU: see test_gpu_panels_query_the_gpu_collectors_series
        deadline = time.monotonic() + 20
        exported = _scrape(port)
        while not wanted <= exported and time.monotonic() < deadline:
            time.sleep(0.25)
            exported = _scrape(port)
        missing = {name: queried[name] for name in sorted(wanted - exported)}
        assert not missing, f"queried by the dashboard but not exported: {missing}"
    finally:
        agent.stop()
