"""Batch resources through a real containerd 1.7 and runc, read back from the kernel (cgroup v1, cgroupfs
driver), and what an SRE asks of a node agent in the runtime's path: pod creation never waits on a dead agent,
a containerd restart costs nothing, and a container created while the agent was down is corrected once it is
back (Synchronize).

Expected values are the reference's worked example (§4.5, tests/reference_example.py): a 512 / 100000 / 1 GiB,
b 1536 / 200000 / 2 GiB, the pod 2048 / 300000 / 3 GiB."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from tests.containerd.agent import Agent, pod_spec, run_container, wait_for
from tests.containerd.cri import CriClient, PodSpec
from tests.containerd.runtime import Containerd
from tests.reference_example import BE_LABELS, SPEC_KEY, WORKED_SPEC

CGROUP = Path("/sys/fs/cgroup")
GiB = 1 << 30
EXPECTED = {"a": (512, 100000, 1 * GiB), "b": (1536, 200000, 2 * GiB)}


def be_pod(name: str) -> PodSpec:
    return pod_spec(name, labels=dict(BE_LABELS), annotations={SPEC_KEY: json.dumps(WORKED_SPEC)},
                    qos_dir="besteffort")


def kernel_values(cgroup: str) -> tuple[int, int, int]:
    """(cpu.shares, cpu.cfs_quota_us, memory.limit_in_bytes) as the kernel reports them."""
    return (int((CGROUP / "cpu" / cgroup.lstrip("/") / "cpu.shares").read_text()),
            int((CGROUP / "cpu" / cgroup.lstrip("/") / "cpu.cfs_quota_us").read_text()),
            int((CGROUP / "memory" / cgroup.lstrip("/") / "memory.limit_in_bytes").read_text()))


def test_a_be_pods_containers_get_koordlets_values_in_the_kernel(
    containerd: Containerd, cri: CriClient, agent: Agent
) -> None:
    pod = be_pod("batch-1")
    sandbox, cid_a, _ = run_container(cri, pod, "a", ["/bin/sleep", "1000"])
    try:
        _, cid_b, _ = run_container(cri, pod, "b", ["/bin/sleep", "1000"], sandbox=sandbox)
        assert kernel_values(f"{pod.cgroup_parent}/{cid_a}") == EXPECTED["a"]
        assert kernel_values(f"{pod.cgroup_parent}/{cid_b}") == EXPECTED["b"]
        # The kubelet would have given a BestEffort container shares 2 and no limit: the agent's values won.
        explained = json.dumps(agent.hookctl("explain", f"{pod.namespace}/{pod.name}"))
        assert "BatchResource" in explained
    finally:
        cri.stop_and_remove_sandbox(sandbox)


def test_a_dead_agent_never_blocks_pod_creation_and_synchronize_corrects_it(
    containerd: Containerd, cri: CriClient, agent: Agent
) -> None:
    """kill -9 of the agent: containerd drops the plugin and creates containers without it, at once; the
    restarted agent's Synchronize corrects the container made meanwhile (the kernel reads the worked values)."""
    assert agent.stop(signal.SIGKILL) == -signal.SIGKILL
    pod = be_pod("made-while-down")
    started = time.monotonic()
    sandbox, cid, _ = run_container(cri, pod, "b", ["/bin/sleep", "1000"])
    took = time.monotonic() - started
    try:
        assert took < 10.0, f"creating a pod took {took:.1f} s with the agent dead"
        assert kernel_values(f"{pod.cgroup_parent}/{cid}") != EXPECTED["b"]  # nobody adjusted it
        agent.start()  # a new process: its first connection
        agent.wait_ready()
        assert wait_for(lambda: kernel_values(f"{pod.cgroup_parent}/{cid}") == EXPECTED["b"], timeout_s=15), \
            kernel_values(f"{pod.cgroup_parent}/{cid}")
    finally:
        cri.stop_and_remove_sandbox(sandbox)


def test_a_containerd_restart_keeps_values_and_the_agent_reconnects(
    containerd: Containerd, cri: CriClient, agent: Agent
) -> None:
    pod = be_pod("across-restart")
    sandbox, cid_a, _ = run_container(cri, pod, "a", ["/bin/sleep", "1000"])
    try:
        connections = int(agent.nri_status().get("connections", 0))
        containerd.restart()
        status = agent.wait_ready(connections=connections + 1)
        assert status["runtime"]["name"] == "containerd"
        assert kernel_values(f"{pod.cgroup_parent}/{cid_a}") == EXPECTED["a"]  # a restart rewrote nothing wrong
        _, cid_b, _ = run_container(cri, pod, "b", ["/bin/sleep", "1000"], sandbox=sandbox)
        assert kernel_values(f"{pod.cgroup_parent}/{cid_b}") == EXPECTED["b"]  # and the new session serves
    finally:
        cri.stop_and_remove_sandbox(sandbox)
