"""BE cpu.idle on the real one-node cluster (kubelet 1.20, containerd, cgroup v1 cgroupfs, a 6.x kernel with
cpu.idle and no bvt): with the NodeSLO choosing `cpuPolicy: coreSched` and beClass `schedIdle: 1`, the agent sets
`cpu.idle=1` on the BE pod's cgroup, never on the besteffort tier; the kubelet then restarts healthy (it rewrites
the tier's cpu.shares at every start, which the kernel refuses on an idle group: koordinator#2732), the pod keeps
running and stays idle. The kernel rule itself is shown on the tier and undone at once.

Skips unless the node tier is up (tests/kube/node_tier.py). Restarts the kubelet (stop-node.sh, start-node.sh);
deletes its pod and NodeSLO."""

from __future__ import annotations

import errno
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kube.conftest import SLO_API
from tests.kube.kubehttp import KubeHttp
from tests.kube.node_tier import (
    KUBECONFIG, NODE, ROOT, TOOLS, core_api, hookctl, restart_kubelet, running_be_pod, wait, why_not,
)

NAMESPACE = "i20-cpu-idle"
CGROUP = Path("/sys/fs/cgroup/cpu")
TIER = CGROUP / "kubepods" / "besteffort"

pytestmark = pytest.mark.skipif(bool(why_not()), reason=why_not() or "ok")


@pytest.fixture
def be_pod() -> Iterator[tuple[str, str]]:
    with running_be_pod(NAMESPACE) as (name, pod_dir, _container_dir):
        yield name, pod_dir


@pytest.fixture
def idle_nodeslo(kube: KubeHttp, slo_crds: None) -> Iterator[None]:
    path = f"{SLO_API}/nodeslos/{NODE}"
    kube.delete(path)
    kube.must(kube.post(f"{SLO_API}/nodeslos", {
        "apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO", "metadata": {"name": NODE},
        "spec": {"resourceQOSStrategy": {"policies": {"cpuPolicy": "coreSched"},
                                         "beClass": {"cpuQOS": {"enable": True, "schedIdle": 1}}}}}), "NodeSLO")
    yield
    kube.delete(path)


def _idle(rel: str) -> str:
    return (CGROUP / rel / "cpu.idle").read_text().strip()


def _restart_kubelet() -> None:
    restart_kubelet(TOOLS)


def test_be_idle_at_pod_level_survives_a_kubelet_restart(be_pod: tuple[str, str], idle_nodeslo: None,
                                                          tmp_path: Path) -> None:
    name, pod_dir = be_pod
    if not (TIER / "cpu.idle").exists():
        pytest.skip("this kernel has no cpu.idle")
    # The kernel rule behind koordinator#2732, on the tier, undone at once: an idle group refuses cpu.shares.
    (TIER / "cpu.idle").write_text("1")
    try:
        with pytest.raises(OSError) as refused:
            (TIER / "cpu.shares").write_text("2")
        assert refused.value.errno == errno.EINVAL
    finally:
        (TIER / "cpu.idle").write_text("0")
    log = open(tmp_path / "agent.log", "ab")  # noqa: SIM115 - closed below
    debug = tmp_path / "debug.sock"
    agent = subprocess.Popen(
        [sys.executable, "-m", "hookserver.cli.serve", "serve", "--kubeconfig", KUBECONFIG, "--node-name", NODE,
         "--cgroup-root", "/sys/fs/cgroup", "--cgroup-driver", "cgroupfs", "--no-nri",
         "--hook-socket", str(tmp_path / "hook.sock"), "--registration-dir", str(tmp_path / "reg"),
         "--debug-socket", str(debug), "--metrics-addr", "127.0.0.1:0", "--state-dir", str(tmp_path / "state")],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        try:
            wait(lambda: _idle(pod_dir) == "1", "cpu.idle=1 on the BE pod", 30)
        except AssertionError:
            log.flush()
            raise AssertionError((tmp_path / "agent.log").read_text()[-3000:]) from None
        assert _idle("kubepods/besteffort") == "0"
        row = next(r for r in hookctl(debug, "qos")["reconcilers"] if r["name"] == "GroupIdentity")
        assert "cpu.idle=1 on" in str(row), row
        container_before = core_api().read_namespaced_pod(name, NAMESPACE).status.container_statuses[0].container_id
        _restart_kubelet()
        assert not why_not(), why_not()  # the kubelet answers /healthz and heartbeats again
        assert (TIER / "cpu.shares").read_text().strip() == "2"  # the kubelet's own write went through
        status = core_api().read_namespaced_pod(name, NAMESPACE).status
        assert status.phase == "Running" and status.container_statuses[0].container_id == container_before
        assert _idle(pod_dir) == "1"
    finally:
        agent.terminate()
        code = agent.wait(timeout=20)
        log.close()
    assert code == 0, (tmp_path / "agent.log").read_text()[-4000:]
