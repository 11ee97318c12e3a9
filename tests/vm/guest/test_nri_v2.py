"""hookserver as the NRI plugin of a real containerd 1.7 with runc's systemd cgroup driver, on the VM's systemd and
unified cgroup v2: what a 2026 node runs.

The kubelet's part is played by the tier's helpers: the pod slice is started as the kubelet's systemd driver starts
it (tests/vm/guest/kubelet_slices.py), and the pod and its containers are created through CRI
(tests/containerd/cri.py) with the slice's name as the cgroup parent, so runc makes the `cri-containerd-<id>.scope`
units through systemd. The BE pod is the reference's worked example (tests/reference_example.py): containers a and b
with batch requests and limits; on cgroup v2 runc turns the adjusted shares into `cpu.weight` with the kubelet's
formula 1 + (shares - 2) * 9999 / 262142 (512 -> 20, 1536 -> 59; the pod's 2048 -> 79).

Checked from the kernel's files: the values in the container scopes and the pod slice, that a `daemon-reload`
leaves the scopes' values (runc handed them to systemd as unit properties), that a container made while the agent
was killed with -9 is corrected by the restarted agent's Synchronize, and that a containerd restart costs nothing.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.containerd.agent import run_container
from tests.containerd.cri import CriClient, PodSpec
from tests.containerd.runtime import Containerd
from tests.e2e.test_serve import Agent
from tests.reference_example import BE_LABELS, SPEC_KEY, WORKED_SPEC
from tests.vm.guest.kubelet_slices import KubeletSlices, PodSlice
from tests.vm.guest.results import record, save

GiB = 1 << 30
# (cpu.weight, cpu.max, memory.max) of the worked example's containers and pod on cgroup v2.
CONTAINERS = {"a": ("20", "100000 100000", str(1 * GiB)), "b": ("59", "200000 100000", str(2 * GiB))}
POD = ("79", "300000 100000", str(3 * GiB))
# Where the tier's busybox arrives: boot.sh copies the host's static busybox into the results share.
BUSYBOX = Path("/mnt/out/busybox")


def _values(path: Path) -> tuple[str, ...]:
    return tuple((path / f).read_text().strip() for f in ("cpu.weight", "cpu.max", "memory.max"))


def _unit_memory_max(unit: str) -> str:
    done = subprocess.run(["systemctl", "show", "-p", "MemoryMax", "--value", unit], capture_output=True,
                          text=True, timeout=30)
    return done.stdout.strip()


def _wait(predicate: object, timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return bool(predicate())  # type: ignore[operator]


class Node:
    """The kubelet's slices, a containerd with the systemd driver, and the agent as its NRI plugin."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        # containerd copies the node's /etc/hosts and /etc/resolv.conf into every host-network sandbox; the
        # tier's minimal image has neither (the guest's disk is a snapshot: this write is gone at power-off).
        for name, text in (("/etc/hosts", "127.0.0.1 localhost\n"), ("/etc/resolv.conf", "")):
            if not Path(name).exists():
                Path(name).write_text(text)
        self.slices = KubeletSlices().start()
        self.containerd = Containerd(tmp / "containerd", bin_dir=Path("/usr/bin"), busybox=BUSYBOX,
                                     systemd_cgroup=True)
        self.containerd.home.mkdir()
        started = time.monotonic()
        self.containerd.start(timeout_s=90)
        record("containerd_ready_s", round(time.monotonic() - started, 2))
        self.cri = CriClient(str(self.containerd.cri_socket), timeout_s=120)
        self.agent = self.start_agent()

    def start_agent(self) -> Agent:
        """The agent as the runtime's hook only: the batch-resource path (NRI door, reconciler) on, the QoS
        reconcilers, collectors and publishers off. They have their own guest tests (test_agent_v2,
        test_reconcilers_v2); under emulation each costs the guest CPU that this module's runtime needs."""
        off = "{enabled: false}"
        collectors = "".join(f"  {c}: {off}\n" for c in (
            "node_resource", "pod_resource", "pod_throttled", "host_application", "system_resource", "be_resource",
            "numa_resource", "psi", "node_info", "gpu"))
        (self.tmp / "config.yaml").write_text(
            "reconciler:\n  interval_s: 1\n  creation_grace_s: 0\nnri:\n  backoff_initial_s: 0.05\n"
            + "".join(f"{part}: {off}\n" for part in ("qos", "predictor", "recorder", "capacity", "topology"))
            + "collectors:\n" + collectors)
        return Agent(self.tmp, "--config", str(self.tmp / "config.yaml"), start_timeout_s=120,
                     nri_socket=self.containerd.nri_socket)

    def nri(self, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
        code, out = self.agent.hookctl("status", "-o", "json", capsys=capsys)
        return dict(json.loads(out).get("nri") or {}) if code == 0 else {}

    def wait_nri_ready(self, capsys: pytest.CaptureFixture[str], connections: int = 1) -> float:
        started = time.monotonic()
        ok = _wait(lambda: (s := self.nri(capsys)).get("state") == "ready"
                   and int(s.get("connections", 0)) >= connections, 90)  # type: ignore[call-overload]
        assert ok, f"NRI never ready: {self.nri(capsys)}\n{(self.tmp / 'agent.log').read_text()[-3000:]}"
        return time.monotonic() - started

    def be_pod(self, name: str) -> tuple[PodSlice, PodSpec]:
        """A BE pod's slice, started as the kubelet starts it, and its CRI spec (cgroup parent: the slice)."""
        pod = self.slices.pod("besteffort", cpu_weight=1)
        spec = PodSpec(name=name, uid=pod.uid, namespace="vm-nri", cgroup_parent=pod.name,
                       labels=dict(BE_LABELS), annotations={SPEC_KEY: json.dumps(WORKED_SPEC)})
        return pod, spec

    def stop(self) -> None:
        try:
            self.agent.stop()
            save("agent-nri.log", (self.tmp / "agent.log").read_text()[-200_000:])
        finally:
            self.cri.close()
            self.containerd.stop()
            save("containerd.log", self.containerd.log.read_text()[-100_000:])
            self.slices.stop()


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    if not BUSYBOX.exists():
        pytest.fail(f"{BUSYBOX} is missing: boot.sh copies the host's static busybox (VM_BUSYBOX) there")
    made = Node(tmp_path_factory.mktemp("nri"))
    try:
        yield made
    finally:
        made.stop()


def scope(pod: PodSlice, container_id: str) -> Path:
    return pod.path / f"cri-containerd-{container_id}.scope"


def test_nri_gives_a_be_pods_scopes_and_slice_koordlets_values_on_v2(
    node: Node, capsys: pytest.CaptureFixture[str]
) -> None:
    record("nri_ready_s", round(node.wait_nri_ready(capsys), 2))
    pod, spec = node.be_pod("batch-nri")
    started = time.monotonic()
    sandbox, cid_a, _ = run_container(node.cri, spec, "a", ["/bin/sleep", "1000"])
    record("nri_first_container_s", round(time.monotonic() - started, 2))
    try:
        _, cid_b, _ = run_container(node.cri, spec, "b", ["/bin/sleep", "1000"], sandbox=sandbox)
        assert _values(scope(pod, cid_a)) == CONTAINERS["a"]
        assert _values(scope(pod, cid_b)) == CONTAINERS["b"]
        assert _wait(lambda: _values(pod.path) == POD), _values(pod.path)
        # The pod slice's values the agent wrote at RunPodSandbox reach its unit (the keeper, off the hook's path).
        assert _wait(lambda: _unit_memory_max(pod.name) == POD[2], 30), _unit_memory_max(pod.name)
        # runc handed the adjusted values to systemd as the scopes' unit properties, the agent the pod slice's:
        # a reload keeps them all (read at once: no window for a restore).
        subprocess.run(["systemctl", "daemon-reload"], check=True, timeout=60)
        assert _values(scope(pod, cid_a)) == CONTAINERS["a"]
        assert _values(scope(pod, cid_b)) == CONTAINERS["b"]
        assert _values(pod.path) == POD
    finally:
        node.cri.stop_and_remove_sandbox(sandbox)


def test_nri_agent_killed_never_blocks_pod_creation_and_synchronize_corrects_the_scope(
    node: Node, capsys: pytest.CaptureFixture[str]
) -> None:
    node.wait_nri_ready(capsys)
    assert node.agent.stop(signal.SIGKILL) == -signal.SIGKILL
    pod, spec = node.be_pod("made-while-down")
    started = time.monotonic()
    try:
        sandbox, cid, _ = run_container(node.cri, spec, "b", ["/bin/sleep", "1000"])
    except BaseException:
        node.agent = node.start_agent()  # the next test needs one
        raise
    took = time.monotonic() - started
    try:
        record("nri_container_with_agent_dead_s", round(took, 2))
        assert _values(scope(pod, cid)) != CONTAINERS["b"]  # nobody adjusted it
        node.agent = node.start_agent()
        node.wait_nri_ready(capsys)
        assert _wait(lambda: _values(scope(pod, cid)) == CONTAINERS["b"], 30), _values(scope(pod, cid))
    finally:
        node.cri.stop_and_remove_sandbox(sandbox)


def test_nri_containerd_restart_keeps_values_and_the_agent_reconnects(
    node: Node, capsys: pytest.CaptureFixture[str]
) -> None:
    node.wait_nri_ready(capsys)
    pod, spec = node.be_pod("across-restart")
    sandbox, cid, _ = run_container(node.cri, spec, "a", ["/bin/sleep", "1000"])
    try:
        assert _values(scope(pod, cid)) == CONTAINERS["a"]
        before = int(node.nri(capsys).get("connections", 0))  # type: ignore[call-overload]
        node.containerd.restart(timeout_s=90)
        record("nri_reconnect_after_containerd_restart_s", round(node.wait_nri_ready(capsys, before + 1), 2))
        assert _values(scope(pod, cid)) == CONTAINERS["a"]
        _, cid_b, _ = run_container(node.cri, spec, "b", ["/bin/sleep", "1000"], sandbox=sandbox)
        assert _values(scope(pod, cid_b)) == CONTAINERS["b"]
    finally:
        node.cri.stop_and_remove_sandbox(sandbox)
