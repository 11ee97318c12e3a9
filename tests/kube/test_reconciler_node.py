"""On the real one-node cluster (kube-apiserver + kubelet 1.20 + containerd, `tools/kube-e2e/start-node.sh`):
a BE pod the kubelet created while no agent ran keeps kubelet's values (shares 2, no quota, no memory limit)
until hookserver starts in apiserver mode; its reconciler then corrects the pod and container cgroups, and a
node cpu-normalization ratio re-applies the quota leveled on the real kernel.

Skips unless HOOKSERVER_E2E_KUBECONFIG is set and the node (HOOKSERVER_E2E_NODE, default e2e-node) has a
fresh heartbeat and its kubelet's cgroups (cgroupfs driver, v1) exist. It creates and deletes its own
namespace's pod and leaves the Node's annotations as it found them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.kube.node_tier import KUBECONFIG, NODE, ROOT, core_api, hookctl, running_be_pod, why_not
from tests.kube.node_tier import cgroup_values as _values
from tests.kube.node_tier import wait as _wait

NAMESPACE = "i11a-reconciler"
RATIO = "node.koordinator.sh/cpu-normalization-ratio"
SPEC = json.dumps({"containers": {"main": {
    "requests": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "1Gi"},
    "limits": {"kubernetes.io/batch-cpu": "2000", "kubernetes.io/batch-memory": "1Gi"},
}}})
CGROUP = Path("/sys/fs/cgroup")
_client = core_api
_hookctl = hookctl

pytestmark = pytest.mark.skipif(bool(why_not()), reason=why_not() or "ok")


@pytest.fixture
def be_pod() -> Iterator[tuple[str, str]]:
    """A BestEffort BE pod created before the agent starts; yields (pod dir, container dir)."""
    with running_be_pod(NAMESPACE, annotations={"node.koordinator.sh/extended-resource-spec": SPEC}) as (
            _name, pod_dir, container_dir):
        yield pod_dir, container_dir


@pytest.fixture
def node_ratio() -> Iterator[Callable[[str | None], None]]:
    api = _client()
    before = (api.read_node(NODE).metadata.annotations or {}).get(RATIO)

    def set_ratio(value: str | None) -> None:
        api.patch_node(NODE, {"metadata": {"annotations": {RATIO: value}}})

    yield set_ratio
    set_ratio(before)


def test_kubelet_be_pod_made_while_the_agent_was_down_is_corrected_then_follows_the_ratio(
    be_pod: tuple[str, str], node_ratio: Callable[[str | None], None], tmp_path: Path
) -> None:
    pod_dir, ctr_dir = be_pod
    assert _values(pod_dir) == ("2", "-1", "9223372036854771712")  # the kubelet's BestEffort values
    assert _values(ctr_dir)[:2] == ("2", "-1")
    log = open(tmp_path / "agent.log", "ab")  # noqa: SIM115 - closed below
    debug = tmp_path / "debug.sock"
    agent = subprocess.Popen(
        [sys.executable, "-m", "hookserver.cli.serve", "serve", "--kubeconfig", KUBECONFIG, "--node-name", NODE,
         "--cgroup-root", str(CGROUP), "--cgroup-driver", "cgroupfs", "--no-nri",
         "--hook-socket", str(tmp_path / "hook.sock"), "--registration-dir", str(tmp_path / "reg"),
         "--debug-socket", str(debug), "--metrics-addr", "127.0.0.1:0", "--state-dir", str(tmp_path / "state")],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,  # inherits HOOKSERVER_E2E_KUBECONFIG: not a setting
    )
    try:
        started = time.monotonic()
        want = ("1024", "200000", "1073741824")
        try:
            _wait(lambda: _values(pod_dir) == want and _values(ctr_dir) == want, "the reconciler's corrections", 30)
        except AssertionError:
            log.flush()
            raise AssertionError(
                f"{_values(pod_dir)} {_values(ctr_dir)}\n{(tmp_path / 'agent.log').read_text()[-3000:]}"
            ) from None
        corrected_after = time.monotonic() - started
        status = _hookctl(debug, "status")
        reconciler = status["reconciler"]
        assert reconciler["corrections_total"] >= 6, reconciler
        assert status["informer"]["mode"] == "apiserver"
        explained = _hookctl(debug, "explain", f"{NAMESPACE}/{_pod_name(pod_dir)}")
        doors = {h["door"] for g in explained["decisions"] for h in g["hooks"]}
        assert doors == {"reconciler"}
        # The node's cpu-normalization ratio 2: ceil(200000 / 2) = 100000 at both levels (bottom-up on v1).
        node_ratio("2")
        _wait(lambda: _values(pod_dir)[1] == "100000" and _values(ctr_dir)[1] == "100000", "the ratio pass", 15)
        node_ratio(None)
        _wait(lambda: _values(pod_dir)[1] == "200000" and _values(ctr_dir)[1] == "200000", "ratio removed", 15)
        assert _hookctl(debug, "status")["reconciler"]["errors_total"] == 0
        print(f"corrected {corrected_after:.1f}s after the agent started; {json.dumps(reconciler['last_pass'])}")
    finally:
        agent.terminate()
        code = agent.wait(timeout=20)
        log.close()
    assert code == 0, (tmp_path / "agent.log").read_text()[-4000:]


def _pod_name(pod_dir: str) -> str:
    uid = pod_dir.rsplit("pod", 1)[-1]
    pods = _client().list_namespaced_pod(NAMESPACE).items
    return next(p.metadata.name for p in pods if p.metadata.uid == uid)

