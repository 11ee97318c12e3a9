"""The real agent (`hookserver serve --standalone`) on the VM's systemd-owned kubelet slices, cgroup v2.

What a node with the kubelet's systemd driver sees: the pod slice gets the BE pod's batch values through the
proxy door (cpu.weight, cpu.max, memory.max in the slice's own files), the reconciler puts them back after a
reset, a `systemctl daemon-reload` (every package upgrade runs one) resets them to the unit's properties,
CPU suppress on the BE tier, the collectors and PSI from the real files, and `hookserver cleanup` leaving the
tier as the agent found it. Times go to timings.json (boot to agent-ready, reaction to resets).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hookserver.system import SystemRoots
from hookserver.system.cgroupstats import CgroupStatReader, CgroupVersion
from tests.e2e.test_serve import Agent, be_pod
from tests.vm.guest.kubelet_slices import CGROUP, KubeletSlices, PodSlice
from tests.vm.guest.results import record, save, uptime_s

ROOT = Path(__file__).resolve().parents[3]
# tests/reference_example's worked BE pod: batch-cpu 3000 (weight from shares 2048), limit 3 cores, 3 GiB. (The
# quota holds under the cpuset suppress policy; under cfsQuota koordlet leaves BE pods' quota unlimited.)
BATCH = ("79", "300000 100000", "3221225472")
KUBELET = ("1", "max 100000", "max")  # what the kubelet's driver gave the BE pod slice's unit
SLO = """resourceUsedThresholdWithBE:
  enable: true
  cpuSuppressPolicy: cpuset
  cpuSuppressThresholdPercent: 65
"""


def _values(pod: PodSlice) -> tuple[str, str, str]:
    return tuple((pod.path / f).read_text().strip() for f in ("cpu.weight", "cpu.max", "memory.max"))  # type: ignore[return-value]


def _wait(predicate: object, what: str, timeout_s: float = 15.0, step_s: float = 0.02) -> float:
    start = time.monotonic()
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() - start < timeout_s, f"timed out waiting for {what}"
        time.sleep(step_s)
    return time.monotonic() - start


class Running:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.slices = KubeletSlices()
        try:
            self._start(tmp)
        except BaseException:
            self.slices.stop()
            raise

    def _start(self, tmp: Path) -> None:
        self.slices.start()
        self.pod = self.slices.pod("besteffort", cpu_weight=1)
        self.scope = self.pod.start_container(uuid.uuid4().hex * 2)
        self.tier = CGROUP / "kubepods.slice" / "kubepods-besteffort.slice"
        self.tier_before = {f: (self.tier / f).read_text() for f in ("cpu.max", "cpuset.cpus")}
        (tmp / "slo.yaml").write_text(SLO)
        (tmp / "config.yaml").write_text("reconciler:\n  interval_s: 1\n  creation_grace_s: 0\n")
        booted = uptime_s()
        start = time.monotonic()
        # Under emulation the agent's imports take a while: a generous start budget, measured below.
        self.agent = Agent(tmp, "--config", str(tmp / "config.yaml"), "--slo-file", str(tmp / "slo.yaml"),
                           start_timeout_s=120)
        record("agent_ready_s", round(time.monotonic() - start, 2))
        record("boot_to_agent_ready_s", round(booted + time.monotonic() - start, 2))

    def evidence(self, capsys: pytest.CaptureFixture[str]) -> str:
        """The agent's write audit, kept in the results share (agent-writes.json) and returned for messages."""
        code, out = self.agent.hookctl("writes", "-o", "json", capsys=capsys)
        save("agent-writes.json", out)
        return out[-4000:]

    def stop(self) -> int:
        code = self.agent.stop()
        save("agent.log", (self.tmp / "agent.log").read_text()[-200_000:])
        self.slices.stop()
        return code


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    node = Running(tmp_path_factory.mktemp("agent"))
    try:
        yield node
    finally:
        assert node.stop() == 0, (node.tmp / "agent.log").read_text()[-3000:]


def test_the_agent_detects_v2_and_the_systemd_driver(running: Running, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = running.agent.hookctl("status", "-o", "json", capsys=capsys)
    assert code == 0, out
    cgroup = json.loads(out)["cgroup"]
    assert cgroup["driver"] == "systemd" and str(cgroup["version"]) in ("v2", "2"), cgroup


def test_be_pod_slice_gets_batch_values_and_the_reconciler_restores_a_reset(
    running: Running, capsys: pytest.CaptureFixture[str]
) -> None:
    pod = running.pod
    assert _values(pod) == KUBELET
    running.agent.stub().PreRunPodSandboxHook(be_pod(pod.cgroup_parent), timeout=10)
    assert _values(pod) == BATCH, running.evidence(capsys)
    for name, value in zip(("memory.max", "cpu.max", "cpu.weight"), ("max", "max", "1"), strict=True):
        (pod.path / name).write_text(value)
    took = _wait(lambda: _values(pod) == BATCH, "the reconciler's correction")
    record("reconciler_after_file_reset_s", round(took, 2))


def test_the_agent_keeps_its_values_in_systemds_unit_properties(
    running: Running, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = running.agent.hookctl("status", "-o", "json", capsys=capsys)
    assert code == 0, out
    systemd = json.loads(out)["systemd"]
    assert systemd["mode"] == "unit properties kept through /run/systemd/private", systemd
    code, out = running.agent.hookctl("status", capsys=capsys)
    assert "systemd:     unit properties kept through /run/systemd/private" in out, out


def test_daemon_reload_keeps_the_agents_values(running: Running) -> None:
    """Issue 40: a reload re-applies the slice unit's properties over the files. Before the keeper, 14 of 20
    reloads left the BE pod unlimited until the reconciler came by (p50 0.15 s, max 0.89 s); with the agent's
    values in the unit's properties none may. Also measured: how long until the values are back (0 when they
    never left)."""
    pod = running.pod
    running.agent.stub().PreRunPodSandboxHook(be_pod(pod.cgroup_parent), timeout=10)
    _wait(lambda: _values(pod) == BATCH, "the batch values")
    exposures: list[float] = []
    lifted = 0
    progress: list[str] = []
    for i in range(20):
        started = time.monotonic()
        subprocess.run(["systemctl", "daemon-reload"], check=True, timeout=30)
        after = _values(pod)
        lifted += after != BATCH
        progress.append(f"{i}: reload {time.monotonic() - started:.2f} s, after it {after}")
        save("daemon-reload-progress.txt", "\n".join(progress) + "\n")  # a hung guest still shows how far
        exposures.append(_wait(lambda: _values(pod) == BATCH, "the values after a daemon-reload", step_s=0.01))
    record("daemon_reload_lifted", f"{lifted}/20")
    record("daemon_reload_exposure_p50_s", round(statistics.median(exposures), 3))
    record("daemon_reload_exposure_max_s", round(max(exposures), 3))
    assert lifted == 0, "\n".join(progress)


def test_set_property_by_someone_else_keeps_the_agents_values(running: Running) -> None:
    """`systemctl set-property` of any property makes systemd write all of the unit's cgroup files again."""
    pod = running.pod
    _wait(lambda: _values(pod) == BATCH, "the batch values")
    seen = []
    for tasks_max in (1000, 2000, 3000):
        subprocess.run(["systemctl", "set-property", "--runtime", pod.name, f"TasksMax={tasks_max}"], check=True,
                       timeout=30)
        seen.append(_values(pod))
    record("set_property_lifted", f"{sum(v != BATCH for v in seen)}/3")
    assert (pod.path / "pids.max").read_text().strip() == "3000"
    assert seen == [BATCH] * 3, seen


def test_collectors_and_psi_read_the_real_v2_files(running: Running) -> None:
    busy = subprocess.Popen(["systemd-run", "--quiet", "--scope", f"--slice={running.pod.name}",
                             sys.executable, "-c", "import time\nx=bytes(range(256))*(128<<10)\nt=time.time()+3\n"
                             "while time.time()<t: pass\ntime.sleep(60)"])
    try:
        reader = CgroupStatReader(SystemRoots(), CgroupVersion.V2)
        rel = running.pod.cgroup_parent
        first = reader.usage(rel)[0]
        # Under emulation on a busy machine the scope's python can take seconds to start and allocate its 32 MiB
        # (seen at a host load of 5-7: 1-3 MiB after a fixed 1.5 s): wait for the allocation, not for a time.
        deadline = time.monotonic() + 30
        while True:
            time.sleep(0.5)
            reader.new_cycle()
            cpu_ns, mem_no_cache, _ = reader.usage(rel)
            if mem_no_cache >= 32 << 20 or time.monotonic() > deadline:
                break
        assert cpu_ns > first >= 0
        assert mem_no_cache >= 32 << 20
        memory = reader.memory(rel)
        assert memory is not None
        pressure = reader.pressure(rel)
        assert pressure is not None and {"cpu", "memory", "io"} <= set(pressure), pressure
        assert pressure["cpu"]["some"].total_us >= 0
    finally:
        busy.kill()
        busy.wait(timeout=10)


def test_cpu_suppress_on_the_be_tier_then_cleanup_leaves_it_as_found(
    running: Running, capsys: pytest.CaptureFixture[str]
) -> None:
    tier = running.tier
    _wait(lambda: '"CPUSuppress"' in running.evidence(capsys), "CPU suppress's first round on the BE tier", 30)
    assert running.agent.stop() == 0
    state = running.tmp / "state"
    done = subprocess.run([sys.executable, "-m", "hookserver.cli.serve", "cleanup", "--standalone",
                           "--state-dir", str(state), "--hook-socket", str(running.agent.hook_socket),
                           "--debug-socket", str(running.agent.debug_socket)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    save("cleanup.txt", done.stdout + done.stderr)
    assert {f: (tier / f).read_text() for f in running.tier_before} == running.tier_before
    assert "restored  systemd " in done.stdout, done.stdout
    # The units' properties are the kubelet's again: a reload now leaves the node as the kubelet made it.
    subprocess.run(["systemctl", "daemon-reload"], check=True, timeout=30)
    assert _values(running.pod) == KUBELET
    assert {f: (tier / f).read_text() for f in running.tier_before} == running.tier_before
