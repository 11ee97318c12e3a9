"""End to end: a real `hookserver serve --standalone` with the QoS runner, driven by hookctl over its real
debug socket. The cgroup root is a v1 fixture tree (the BE tier's files are plain files we read back);
collectors read the real /proc and /sys, so the node CPU sample and the topology are this machine's."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.e2e.test_serve import Agent

SUPPRESS_SLO = "resourceUsedThresholdWithBE:\n  enable: true\n  cpuSuppressPolicy: cpuset\n"


def _tree(tmp: Path) -> Path:
    root = tmp / "cg"
    for sub in ("cpu", "cpuacct", "cpuset", "memory"):
        (root / sub / "kubepods" / "besteffort").mkdir(parents=True)
    tier = root / "cpuset" / "kubepods" / "besteffort"
    (tier / "cpuset.cpus").write_text("0\n")
    (root / "cpu" / "kubepods" / "besteffort" / "cpu.cfs_quota_us").write_text("-1\n")
    (root / "cpu" / "kubepods" / "besteffort" / "cpu.cfs_period_us").write_text("100000\n")
    return root


def _wait(predicate, timeout: float = 20.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def _agent(tmp_path: Path, *extra: str) -> tuple[Agent, Path]:
    root = _tree(tmp_path)
    slo = tmp_path / "slo.yaml"
    slo.write_text(SUPPRESS_SLO)
    agent = Agent(tmp_path, "--cgroup-root", str(root), "--cgroup-driver", "cgroupfs", "--slo-file", str(slo),
                  "--feature-gates", "BEMemoryEvict=true,BECPUEvict=true", *extra)
    return agent, root


def test_suppress_runs_and_hookctl_shows_and_replays(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    agent, root = _agent(tmp_path)
    tier = root / "cpuset" / "kubepods" / "besteffort" / "cpuset.cpus"
    quota = root / "cpu" / "kubepods" / "besteffort" / "cpu.cfs_quota_us"
    try:
        # 2 CPUs here: the 2-CPU floor gives BE both, grown from the fixture's 0.
        assert _wait(lambda: tier.read_text().strip() == "0-1"), (tmp_path / "agent.log").read_text()[-3000:]
        code, out = agent.hookctl("qos", capsys=capsys)
        assert code == 0, out
        assert "CPUSuppress" in out and "BECPUSuppress=true" in out
        assert "cpuset: BE gets 2 CPUs (0-1)" in out or "cpuset: BE keeps 2 CPUs (0-1); unchanged" in out
        assert any("BEMemoryEvict" in line and "flag --feature-gates" in line for line in out.splitlines())
        code, out = agent.hookctl("qos", "-o", "json", capsys=capsys)
        doc = json.loads(out)
        gates = {g["name"]: (g["enabled"], g["source"]) for g in doc["gates"]}
        assert gates["BEMemoryEvict"] == (True, "flag --feature-gates") and gates["BECPUSuppress"] == (True, "default")
        row = next(r for r in doc["reconcilers"] if r["name"] == "CPUEvict")
        assert row["enabled"] is False and "must both be set" in row["reason"]

        # Replay under a cfsQuota file: the plan shows the quota write; the fixture keeps -1.
        what_if = tmp_path / "what-if.yaml"
        what_if.write_text("resourceUsedThresholdWithBE:\n  enable: true\n  cpuSuppressPolicy: cfsQuota\n")
        code, out = agent.hookctl("qos", "plan", "CPUSuppress", "--slo", str(what_if), capsys=capsys)
        assert code == 0, out
        assert f"under the NodeSLO from file {what_if}" in out and "cpu.cfs_quota_us" in out
        assert "(replay: nothing was written or evicted)" in out
        time.sleep(1.5)
        assert quota.read_text().strip() == "-1" and tier.read_text().strip() == "0-1"

        bad = tmp_path / "bad.yaml"
        bad.write_text("resourceUsedThresholdWithBE:\n  cpuSuppressThresholdPercent: 650\n")
        capsys.readouterr()
        from hookserver.cli import hookctl

        code = hookctl.main(["--socket", str(agent.debug_socket), "qos", "plan", "CPUSuppress", "--slo", str(bad)])
        err = capsys.readouterr().err
        assert code == 1 and "cpuSuppressThresholdPercent" in err and str(bad) in err and "650" in err
    finally:
        assert agent.stop() == 0


def test_dry_run_agent_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    agent, root = _agent(tmp_path, "--qos-dry-run")
    tier = root / "cpuset" / "kubepods" / "besteffort" / "cpuset.cpus"

    def planned() -> bool:
        code, out = agent.hookctl("qos", "-o", "json", capsys=capsys)
        row = next(r for r in json.loads(out)["reconcilers"] if r["name"] == "CPUSuppress")
        return "cpuset: BE gets 2 CPUs" in row["last_summary"]

    try:
        assert _wait(planned), (tmp_path / "agent.log").read_text()[-3000:]
        assert tier.read_text().strip() == "0"
        code, out = agent.hookctl("qos", capsys=capsys)
        assert "DRY RUN" in out and "(dry run)" in out
    finally:
        assert agent.stop() == 0
