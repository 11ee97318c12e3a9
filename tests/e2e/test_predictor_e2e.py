"""End to end: a busy process in a real BE pod cgroup shows up in `hookctl predict` and in the NodeMetric
status a real `hookserver serve --standalone` writes to --state-dir, and its model is checkpointed.

Needs root and writable cgroup v1 cpu, cpuacct and memory hierarchies; it creates a private subtree
(`hookserver-test-<random>`) and removes it. Intervals are shortened through the config file.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hookserver.api import runtime_hook_pb2 as pb
from tests.cgroupchild import spawn_inside
from tests.e2e.pod_cgroup import pod_cgroup_subtree
from tests.e2e.test_serve import Agent

CONTROLLERS = ("cpu", "cpuacct", "memory")
UID = "e2e0feed-0000-4000-8000-00000000be01"
CONFIG = """
predictor:
  training_interval_s: 0.5
  checkpoint_round_s: 0.5
  checkpoint_interval_s: 0
  default_report_interval_s: 0.5
  min_report_interval_s: 0.5
  default_aggregate_duration_s: 60
collectors:
  pod_resource: {interval_s: 0.25}
  node_resource: {interval_s: 0.25}
"""


@pytest.fixture
def busy_be_pod() -> Iterator[str]:
    with pod_cgroup_subtree(CONTROLLERS, prefix="hookserver-test", leaf=f"besteffort/pod{UID}") as pod:
        child = spawn_inside([path / "cgroup.procs" for path in pod.paths], "x = bytearray(32 << 20)\nwhile True: pass")
        try:
            yield pod.rel
        finally:
            child.kill()
            child.wait(timeout=10)


@pytest.mark.cgroup
@pytest.mark.slow
def test_busy_be_pod_is_predicted_and_reported(tmp_path: Path, busy_be_pod: str, capsys) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    agent = Agent(tmp_path, "--config", str(config))
    try:
        agent.stub().PreRunPodSandboxHook(pb.PodSandboxHookRequest(
            pod_meta=pb.PodSandboxMetadata(name="burner", namespace="team", uid=UID),
            labels={"koordinator.sh/qosClass": "BE"}, cgroup_parent=busy_be_pod,
        ), timeout=10)
        model = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            code, out = agent.hookctl("predict", "team/burner", "-o", "json", capsys=capsys)
            models = json.loads(out).get("models", []) if code == 0 else []
            if models and models[0]["samples"] >= 3:
                model = models[0]
                break
            time.sleep(0.5)
        assert model is not None, (tmp_path / "agent.log").read_text()[-3000:]
        assert model["kind"] == "pod" and model["pod"] == "team/burner" and model["cold"] is True
        assert model["priority_class"] == "koord-batch"
        assert model["cpu_milli"]["max"] >= 200  # a busy loop: about a core on a quiet machine
        assert model["memory_bytes"]["max"] >= 32 << 20
        code, table = agent.hookctl("predict", "team/burner", capsys=capsys)
        assert code == 0 and "team/burner" in table

        status_file = tmp_path / "state" / "nodemetric.json"
        pods = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not pods:
            if status_file.exists():
                status = json.loads(status_file.read_text())["status"]
                pods = [p for p in status.get("podsMetric", []) if p["name"] == "burner"]
            time.sleep(0.3)
        assert pods, status_file.read_text() if status_file.exists() else "no status file"
        assert pods[0]["namespace"] == "team" and pods[0]["qos"] == "BE" and pods[0]["priority"] == "koord-batch"
        assert "resources" in status["nodeMetric"]["nodeUsage"]
        code, out = agent.hookctl("nodemetric", "-o", "json", capsys=capsys)
        view = json.loads(out)
        assert code == 0 and view["target"] == "file" and view["where"] == str(status_file)
        assert view["last_result"] == "ok"
        code, out = agent.hookctl("reclaimable", "-o", "json", capsys=capsys)
        assert code == 0
        burner = [p for p in json.loads(out)["why"]["pods"] if p["name"] == "burner"]
        assert burner and burner[0]["counted_as"] == "skipped:koord-batch"
        deadline = time.monotonic() + 10
        checkpoint = tmp_path / "state" / "predictor" / f"{UID}.json"
        while time.monotonic() < deadline and not checkpoint.exists():
            time.sleep(0.2)
        assert json.loads(checkpoint.read_text())["UID"] == UID
    finally:
        code = agent.stop()
    assert code == 0, (tmp_path / "agent.log").read_text()[-3000:]
