"""End to end: a real `hookserver serve --standalone` process, driven over its real unix sockets.

The pod cgroup lives in a private subtree of the real cgroup v1 hierarchy, so the kernel's accepted
values are what we assert. Also: hookctl explains the decision, SIGTERM removes the registration file
and sockets, and a kill -9 leaves nothing that stops a restart.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from hookserver.api import runtime_hook_pb2 as pb
from hookserver.api import runtime_hook_pb2_grpc as pb_grpc
from hookserver.cli import hookctl
from hookserver.system.cpulist import format_cpu_list, parse_cpu_list
from tests.e2e.pod_cgroup import CGROUP_V1 as CGROUP
from tests.e2e.pod_cgroup import pod_cgroup_subtree
from tests.reference_example import SPEC_KEY as SPEC
from tests.reference_example import WORKED_SPEC_JSON
from tests.sockets import accepts

ROOT = Path(__file__).resolve().parents[2]
WORKED = WORKED_SPEC_JSON


@pytest.fixture
def pod_cgroup() -> Iterator[str]:
    with pod_cgroup_subtree(("cpu", "memory"), prefix="hookserver-e2e") as pod:
        yield pod.rel



def _find_key(tree: object, key: str) -> dict[str, object]:
    """The first mapping under `key` anywhere in a decoded JSON tree."""
    if isinstance(tree, dict):
        if isinstance(tree.get(key), dict):
            return tree[key]  # type: ignore[no-any-return]
        for value in tree.values():
            try:
                return _find_key(value, key)
            except KeyError:
                continue
    elif isinstance(tree, list):
        for value in tree:
            try:
                return _find_key(value, key)
            except KeyError:
                continue
    raise KeyError(key)


class Agent:
    def __init__(self, tmp: Path, *extra: str, start_timeout_s: float = 30.0, nri_socket: Path | None = None) -> None:
        """`nri_socket`: the runtime's NRI socket the agent connects to as a plugin (none: `--no-nri`)."""
        self.tmp = tmp
        self.hook_socket = tmp / "hook.sock"
        self.debug_socket = tmp / "debug.sock"
        self.registration = tmp / "reg" / "hookserver.json"
        self.log = open(tmp / "agent.log", "ab")  # noqa: SIM115 - closed in stop()
        args = [
            sys.executable, "-m", "hookserver.cli.serve", "serve", "--standalone",
            *(["--nri-socket", str(nri_socket)] if nri_socket else ["--no-nri"]),
            "--hook-socket", str(self.hook_socket), "--debug-socket", str(self.debug_socket),
            "--registration-dir", str(tmp / "reg"), "--metrics-addr", "127.0.0.1:0",
            "--state-dir", str(tmp / "state"), "--node-name", "e2e-node", *extra,
        ]
        self.proc = subprocess.Popen(args, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + start_timeout_s
        while not (self.registration.exists() and accepts(self.hook_socket) and accepts(self.debug_socket)):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"agent did not start:\n{(tmp / 'agent.log').read_text()}")
            time.sleep(0.05)

    def stub(self) -> pb_grpc.RuntimeHookServiceStub:
        return pb_grpc.RuntimeHookServiceStub(grpc.insecure_channel(f"unix://{self.hook_socket}"))

    def hookctl(self, *argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
        capsys.readouterr()
        code = hookctl.main(["--socket", str(self.debug_socket), *argv])
        return code, capsys.readouterr().out

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=20)
        finally:
            self.log.close()


def be_pod(cgroup_parent: str) -> pb.PodSandboxHookRequest:
    return pb.PodSandboxHookRequest(
        pod_meta=pb.PodSandboxMetadata(name="batch-1", namespace="team", uid="feed-0001"),
        labels={"koordinator.sh/qosClass": "BE"},
        annotations={SPEC: WORKED},
        cgroup_parent=cgroup_parent,
    )


def test_be_pod_gets_kernel_values_and_hookctl_explains(
    tmp_path: Path, pod_cgroup: str, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = Agent(tmp_path)
    try:
        registration = json.loads(agent.registration.read_text())
        assert registration["remote-endpoint"] == str(agent.hook_socket)
        assert registration["failure-policy"] == "Ignore"
        assert sorted(registration["runtime-hooks"]) == [
            "PreCreateContainer", "PreRunPodSandbox", "PreUpdateContainerResources"
        ]
        assert (agent.hook_socket.stat().st_mode & 0o777) == 0o660

        stub = agent.stub()
        response = stub.PreRunPodSandboxHook(be_pod(pod_cgroup), timeout=10)
        assert response.cgroup_parent == pod_cgroup  # echoed
        cpu = CGROUP / "cpu" / pod_cgroup.lstrip("/")
        mem = CGROUP / "memory" / pod_cgroup.lstrip("/")
        assert (cpu / "cpu.shares").read_text().strip() == "2048"
        assert (cpu / "cpu.cfs_quota_us").read_text().strip() == "300000"
        assert (mem / "memory.limit_in_bytes").read_text().strip() == "3221225472"

        request = pb.ContainerResourceHookRequest(
            pod_meta=be_pod(pod_cgroup).pod_meta,
            container_meta=pb.ContainerMetadata(name="b"),
            container_resources=pb.LinuxContainerResources(cpuset_cpus="0-1", oom_score_adj=1000, cpu_shares=2),
            pod_labels={"koordinator.sh/qosClass": "BE"},
            pod_annotations={SPEC: WORKED},
            pod_cgroup_parent=pod_cgroup,
        )
        created = stub.PreCreateContainerHook(request, timeout=10)
        res = created.container_resources
        assert (res.cpu_shares, res.cpu_quota, res.memory_limit_in_bytes) == (1536, 200000, 2147483648)
        assert (res.cpuset_cpus, res.oom_score_adj) == ("0-1", 1000)  # echoed, not wiped

        code, out = agent.hookctl("explain", "team/batch-1", capsys=capsys)
        assert code == 0, out
        assert "BatchResource" in out and "2048" in out and "1536" in out
        code, out = agent.hookctl("writes", "-o", "json", capsys=capsys)
        assert code == 0
        writes = json.loads(out)
        rows = writes if isinstance(writes, list) else next(v for v in writes.values() if isinstance(v, list))
        assert any(str(r.get("value")) == "2048" and "cpu.shares" in r.get("path", "") for r in rows)
        code, out = agent.hookctl("status", "-o", "json", capsys=capsys)
        assert code == 0 and "e2e-node" in out
        gc_status = _find_key(json.loads(out), "gc")
        # The running agent froze its start-up heap (imports, descriptors) out of full collections.
        assert gc_status["frozen_objects"] > 10_000, gc_status
        assert set(gc_status["generations"]) == {"0", "1", "2"}
        qos_status = json.loads(out)["qos"]  # the BE tier's two states, "" when fine (hookctl status' problems)
        assert isinstance(qos_status["be_tier_missing"], str) and isinstance(qos_status["be_tier_controllers"], str)
    finally:
        code = agent.stop()
    assert code == 0, (tmp_path / "agent.log").read_text()
    assert not agent.registration.exists()
    assert not agent.hook_socket.exists()


def test_kill_9_then_restart_replaces_the_stale_socket(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = Agent(tmp_path)
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    assert first.hook_socket.exists()  # left behind by the kill
    second = Agent(tmp_path)
    try:
        response = second.stub().PreRunPodSandboxHook(
            pb.PodSandboxHookRequest(pod_meta=pb.PodSandboxMetadata(name="x", namespace="y", uid="z")), timeout=10
        )
        # a pod with no fields echoes as empty but for its sandbox's cpuset: unlabelled and outside the besteffort
        # tier, its sandbox gets the LS share pool (CPUSetAllocator), here every online CPU (nothing is bound)
        online = format_cpu_list(parse_cpu_list(Path("/sys/devices/system/cpu/online").read_text()))
        want = pb.PodSandboxHookResponse(resources=pb.LinuxContainerResources(cpuset_cpus=online))
        assert response.SerializeToString() == want.SerializeToString()
        code, out = second.hookctl("pods", capsys=capsys)
        assert code == 0 and "y/x" in out
    finally:
        assert second.stop() == 0


def test_bad_config_fails_fast_naming_the_field(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("hook:\n  failure_policy: Sometimes\n")
    proc = subprocess.run(
        [sys.executable, "-m", "hookserver.cli.serve", "serve", "--config", str(config)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    assert "hook.failure_policy" in proc.stderr and "Sometimes" in proc.stderr


def test_make_run_config_starts_from_any_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`make run` uses deploy/standalone.yaml with paths relative to the working directory."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "hookserver.cli.serve", "serve", "--config", str(ROOT / "deploy" / "standalone.yaml"),
         "--metrics-addr", "127.0.0.1:0", "--no-nri"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    registration = tmp_path / "run" / "hookserver.d" / "hookserver.json"
    try:
        deadline = time.monotonic() + 30
        while not (registration.exists() and accepts(tmp_path / "run" / "debug.sock")):
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            assert time.monotonic() < deadline, "agent did not start"
            time.sleep(0.05)
        assert json.loads(registration.read_text())["remote-endpoint"] == str(tmp_path / "run" / "hookserver.sock")
        capsys.readouterr()
        assert hookctl.main(["--socket", str(tmp_path / "run" / "debug.sock"), "status"]) == 0
        assert "standalone" in capsys.readouterr().out
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0


def test_second_agent_on_a_live_socket_exits_with_one_clear_line(tmp_path: Path) -> None:
    first = Agent(tmp_path)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "hookserver.cli.serve", "serve", "--standalone", "--no-nri",
             "--hook-socket", str(first.hook_socket), "--debug-socket", str(tmp_path / "other-debug.sock"),
             "--registration-dir", str(tmp_path / "other-reg"), "--metrics-addr", "127.0.0.1:0"],
            cwd=ROOT, capture_output=True, text=True, timeout=60,
        )
        assert proc.returncode == 2
        assert "another server is listening" in proc.stderr and str(first.hook_socket) in proc.stderr
        assert "Traceback" not in proc.stderr
        # The running agent still owns its socket and answers.
        assert accepts(first.hook_socket)
    finally:
        assert first.stop() == 0


def test_reconciler_corrects_a_reset_pod_and_forgets_it_once_its_cgroup_is_gone(
    tmp_path: Path, pod_cgroup: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("reconciler:\n  interval_s: 0.3\n  gc_grace_s: 0.5\n  creation_grace_s: 0\n")
    agent = Agent(tmp_path, "--config", str(config))
    cpu = CGROUP / "cpu" / pod_cgroup.lstrip("/")
    mem = CGROUP / "memory" / pod_cgroup.lstrip("/")

    def values() -> tuple[str, str, str]:
        return ((cpu / "cpu.shares").read_text().strip(), (cpu / "cpu.cfs_quota_us").read_text().strip(),
                (mem / "memory.limit_in_bytes").read_text().strip())

    def status() -> dict[str, object]:
        code, out = agent.hookctl("status", "-o", "json", capsys=capsys)
        assert code == 0, out
        doc = json.loads(out)
        found: dict[str, object] = doc["reconciler"]
        return found

    def wait(predicate: object, what: str, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():  # type: ignore[operator]
            assert time.monotonic() < deadline, f"timed out waiting for {what}: {status()}"
            time.sleep(0.05)

    try:
        agent.stub().PreRunPodSandboxHook(be_pod(pod_cgroup), timeout=10)
        assert values() == ("2048", "300000", "3221225472")
        # the kubelet (or an outage's restart) resets the pod cgroup: the next pass puts the values back
        # (shares last: the reconciler's canary, so a pass between these writes cannot see half a reset)
        (mem / "memory.limit_in_bytes").write_text("-1")
        (cpu / "cpu.cfs_quota_us").write_text("-1")
        (cpu / "cpu.shares").write_text("2")
        wait(lambda: values() == ("2048", "300000", "3221225472"), "the reconciler's correction")
        wait(lambda: int(status()["corrections_total"]) >= 3, "corrections_total")  # type: ignore[call-overload]
        code, out = agent.hookctl("explain", "team/batch-1", "-o", "json", capsys=capsys)
        assert code == 0 and '"door": "reconciler"' in out
        # the pod ends; behind the proxy nothing says so, but its cgroup is gone: forgotten after the grace
        for path in (cpu, mem):
            path.rmdir()
        wait(lambda: status()["pods_collected_total"] == 1, "the pod's collection")
        code, out = agent.hookctl("pods", "-o", "json", capsys=capsys)
        assert code == 0 and "batch-1" not in out
        last = status()["last_pass"]
        assert isinstance(last, dict) and {"trigger", "duration_ms", "corrections", "collected"} <= set(last)
    finally:
        code = agent.stop()
    assert code == 0, (tmp_path / "agent.log").read_text()


def test_the_pod_cgroup_subtree_goes_and_its_removal_never_touches_a_hierarchy_root(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.e2e import pod_cgroup as helper

    tried: list[Path] = []
    real = helper.rmdir_patiently

    def spy(path: Path, patience_s: float = 5.0) -> None:
        tried.append(path)
        real(path, patience_s)

    monkeypatch.setattr(helper, "rmdir_patiently", spy)
    with pod_cgroup_subtree(("cpu", "memory"), prefix="hookserver-e2e", leaf="besteffort/podx") as pod:
        made = pod.paths
    assert made and not any(p.exists() for p in made)
    tops = {CGROUP / sub / pod.rel.strip("/").split("/")[0] for sub in ("cpu", "memory")}
    assert all(not t.exists() for t in tops)
    # It used to go one level too far and wait 5 s a subsystem for the root's EBUSY.
    assert not {CGROUP / "cpu", CGROUP / "memory"} & set(tried)
