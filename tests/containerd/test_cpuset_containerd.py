"""The pod sandbox's cpuset through a real containerd 1.7 and runc (issue 37): NRI has no adjustment for a
sandbox (the pause container never gets CreateContainer, RunPodSandbox's reply is empty), so the agent writes
the sandbox's cgroup itself at RunPodSandbox, named from the sandbox ID, and the kernel holds the value. A pod that
koord-scheduler bound to the node's last CPU gets that CPU in its sandbox and in its container."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookserver.system.cpulist import parse_cpu_list
from hookserver.topology import ANNOTATION_RESOURCE_STATUS
from tests.containerd.agent import Agent, pod_spec, run_container, wait_for
from tests.containerd.cri import CriClient
from tests.containerd.runtime import Containerd

CPUSET = Path("/sys/fs/cgroup/cpuset")


def _cpus(cgroup: str) -> frozenset[int]:
    return parse_cpu_list((CPUSET / cgroup.lstrip("/") / "cpuset.cpus").read_text())


def test_a_bound_pods_sandbox_is_pinned_in_the_kernel(containerd: Containerd, cri: CriClient, agent: Agent) -> None:
    online = sorted(parse_cpu_list((CPUSET / "cpuset.cpus").read_text()))
    if len(online) < 2:
        pytest.skip("needs two CPUs to tell a bound cpuset from the inherited one")
    bound = online[-1]
    pod = pod_spec("lsr-1", labels={"koordinator.sh/qosClass": "LSR"},
                   annotations={ANNOTATION_RESOURCE_STATUS: f'{{"cpuset":"{bound}"}}'}, qos_dir="burstable")
    sandbox, cid, _ = run_container(cri, pod, "app", ["/bin/sleep", "1000"])
    try:
        sandbox_cgroup = f"{pod.cgroup_parent}/{sandbox}"  # containerd's cgroupfs naming: the sandbox ID
        pinned = wait_for(lambda: _cpus(sandbox_cgroup) == {bound}, timeout_s=10)
        assert pinned, (_cpus(sandbox_cgroup), agent.hookctl("explain", f"{pod.namespace}/{pod.name}").get("events"))
        events = agent.hookctl("explain", f"{pod.namespace}/{pod.name}")["events"]
        assert [e["result"] for e in events if "RunPodSandbox" in e["rpc"]] == ["ok"], events
        assert _cpus(f"{pod.cgroup_parent}/{cid}") == {bound}
        assert _cpus(pod.cgroup_parent) == frozenset(online)  # the pod cgroup is never fenced in
    finally:
        cri.stop_and_remove_sandbox(sandbox)
