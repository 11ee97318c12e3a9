"""Batch capacity from the node on the real one-node cluster with a real kube-scheduler (issue 18).

No koord-manager runs. A BE pod without `spec.nodeName` asking for 500 `kubernetes.io/batch-cpu` stays Pending
with "Insufficient kubernetes.io/batch-cpu" until hookserver publishes the node's batch capacity; the scheduler
then binds it, the kubelet runs it and the agent's reconciler writes its batch cgroup values, checked in the
kernel. Then, with the same agent: a busy LS pod lowers the offer within a few intervals; a kubelet restart
and an agent restart keep it (polled throughout); the agent's own node samples going stale (its proc root taken
away) past degradeTimeMinutes withdraw it, and they come back with the samples.

Needs HOOKSERVER_E2E_KUBECONFIG, `tools/kube-e2e/start-node.sh` and `start-scheduler.sh` (skips, naming what is
missing, otherwise), and the slo CRDs (installed by the `slo_crds` fixture). Prints the timings it measured.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kube.conftest import SLO_API, make_namespace
from tests.kube.kubehttp import KubeHttp
from tests.kube.node_tier import IMAGE, KUBECONFIG, NODE, ROOT, TOOLS, cgroup_values, core_api, hookctl, restart_kubelet, wait, why_not

pytestmark = pytest.mark.skipif(bool(why_not(scheduler=True)), reason=why_not(scheduler=True) or "ok")

BATCH_CPU, BATCH_MEMORY = "kubernetes.io/batch-cpu", "kubernetes.io/batch-memory"
PUBLISHED = (BATCH_CPU, BATCH_MEMORY, "kubernetes.io/mid-cpu", "kubernetes.io/mid-memory")
# A 2-core node runs the apiserver, etcd, the kubelet, containerd, the scheduler and this test: a 90 % reclaim
# threshold (10 % margin) leaves room for a 500-milli-core BE pod; degrade after one minute of stale samples.
COLOCATION = {"enable": True, "cpuReclaimThresholdPercent": 90, "memoryReclaimThresholdPercent": 80,
              "degradeTimeMinutes": 1}
SPEC = json.dumps({"containers": {"main": {
    "requests": {BATCH_CPU: "500", BATCH_MEMORY: "256Mi"}, "limits": {BATCH_CPU: "500", BATCH_MEMORY: "256Mi"},
}}})


def _offer() -> dict[str, str]:
    allocatable = core_api().read_node(NODE).status.allocatable or {}
    return {k: v for k, v in allocatable.items() if k in PUBLISHED}


def _clear_offer(kube: KubeHttp) -> None:
    """Start from a node with no batch/mid fields (an earlier run's, whoever wrote them)."""
    nulls = dict.fromkeys(PUBLISHED)
    kube.must(kube.merge_patch(f"/api/v1/nodes/{NODE}/status", {"status": {"capacity": nulls, "allocatable": nulls}}),
              "clear the offer")


class AgentProcess:
    """hookserver serve in apiserver mode against the real cluster, with a config file and its own proc root."""

    def __init__(self, tmp: Path, namespace: str) -> None:
        self.tmp = tmp
        self.debug = tmp / "debug.sock"
        self.proc_link = tmp / "proc"
        if not self.proc_link.exists():
            self.proc_link.symlink_to("/proc")
        config = {
            "node_name": NODE, "kubeconfig": KUBECONFIG, "state_dir": str(tmp / "state"),
            "proc_root": str(self.proc_link),
            "hook": {"socket": str(tmp / "hook.sock"), "registration_dir": str(tmp / "reg")},
            "debug": {"socket": str(self.debug)}, "metrics": {"addr": "127.0.0.1:0"}, "nri": {"enabled": False},
            "cgroup": {"root": "/sys/fs/cgroup", "driver": "cgroupfs"},
            "informer": {"slo_configmap": f"{namespace}/slo-controller-config"},
            "capacity": {"interval_s": 2.0, "warmup_s": 10.0},
        }
        (tmp / "config.yaml").write_text(yaml.safe_dump(config))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = open(self.tmp / "agent.log", "ab")  # noqa: SIM115 - the child holds it; closed with the file table
        self.proc = subprocess.Popen([sys.executable, "-m", "hookserver.cli.serve", "serve", "--config",
                                      str(self.tmp / "config.yaml")], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        wait(lambda: self.debug.exists(), "the agent's debug socket", 30)

    def stop(self) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=30)
        self.debug.unlink(missing_ok=True)
        return code

    def capacity(self) -> Any:
        return hookctl(self.debug, "capacity")

    def log_tail(self) -> str:
        return (self.tmp / "agent.log").read_text()[-4000:]


@pytest.fixture
def namespace(kube: KubeHttp) -> Iterator[str]:
    name = make_namespace(kube, "hookserver-capacity")
    try:
        yield name
    finally:
        pods = kube.get(f"/api/v1/namespaces/{name}/pods")
        for pod in pods.body.get("items", []) if pods.ok else []:
            kube.delete(f"/api/v1/namespaces/{name}/pods/{pod['metadata']['name']}", grace_seconds=0)
        kube.delete(f"/api/v1/namespaces/{name}")


def _configmap(kube: KubeHttp, namespace: str, colocation: dict[str, Any]) -> None:
    body = {"metadata": {"name": "slo-controller-config"}, "data": {"colocation-config": json.dumps(colocation)}}
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    if kube.get(f"{path}/slo-controller-config").ok:
        kube.must(kube.merge_patch(f"{path}/slo-controller-config", {"data": body["data"]}), "configmap")
    else:
        kube.must(kube.post(path, body), "configmap")


def _pod(name: str, *, labels: dict[str, str], annotations: dict[str, str], resources: dict[str, Any],
         command: list[str] | None = None, node: str = "") -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": IMAGE, "imagePullPolicy": "Never", "resources": resources}
    if command:
        container["command"] = command
    spec: dict[str, Any] = {"hostNetwork": True, "terminationGracePeriodSeconds": 2,
                            "tolerations": [{"operator": "Exists"}], "containers": [container]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "spec": spec}


def _unschedulable_message(kube: KubeHttp, namespace: str, name: str) -> str:
    pod = kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}").body
    for condition in pod.get("status", {}).get("conditions", []) or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message", ""))
    return ""


def _pod_status(kube: KubeHttp, namespace: str, name: str) -> dict[str, Any]:
    return dict(kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}").body)


def test_batch_capacity_from_the_node_schedules_a_be_pod_and_follows_the_node(
    kube: KubeHttp, slo_crds: None, namespace: str, tmp_path: Path
) -> None:
    timings: dict[str, float] = {}
    _clear_offer(kube)
    _configmap(kube, namespace, COLOCATION)
    be = _pod("be", labels={"koordinator.sh/qosClass": "BE"},
              annotations={"node.koordinator.sh/extended-resource-spec": SPEC},
              resources={"requests": {BATCH_CPU: "500", BATCH_MEMORY: "256Mi"},
                         "limits": {BATCH_CPU: "500", BATCH_MEMORY: "256Mi"}})
    kube.must(kube.post(f"/api/v1/namespaces/{namespace}/pods", be), "BE pod")
    wait(lambda: "Insufficient kubernetes.io/batch-cpu" in _unschedulable_message(kube, namespace, "be"),
         "the scheduler to refuse the BE pod", 60)
    assert not _pod_status(kube, namespace, "be")["spec"].get("nodeName")

    agent = AgentProcess(tmp_path, namespace)
    agent.start()
    started = time.monotonic()
    try:
        # 1. The offer appears, the scheduler binds the pod, the kubelet runs it, the reconciler writes its values.
        timings["offer after agent start"] = wait(lambda: int(_offer().get(BATCH_CPU, "0")) >= 500,
                                                  "batch-cpu >= 500 on the Node", 90)
        wait(lambda: _pod_status(kube, namespace, "be").get("status", {}).get("phase") == "Running",
             "the BE pod bound and Running", 60)
        timings["BE pod Running after agent start"] = time.monotonic() - started
        pod = _pod_status(kube, namespace, "be")
        assert pod["spec"]["nodeName"] == NODE
        uid = pod["metadata"]["uid"]
        cid = pod["status"]["containerStatuses"][0]["containerID"].split("://")[-1]
        want = ("512", "50000", str(256 << 20))  # 500 milli-cores of shares and quota, 256 MiB
        wait(lambda: cgroup_values(f"kubepods/besteffort/pod{uid}") == want
             and cgroup_values(f"kubepods/besteffort/pod{uid}/{cid}") == want, "the batch cgroup values", 60)
        doc = agent.capacity()
        assert doc["state"] == "published" and doc["offer"][BATCH_CPU] == _offer()[BATCH_CPU], doc
        metric = kube.get(f"{SLO_API}/nodemetrics/{NODE}")
        assert metric.ok and metric.body["spec"]["metricCollectPolicy"]["reportIntervalSeconds"] == 60
        before = int(_offer()[BATCH_CPU])

        # 2. A busy LS pod (about one core of two) lowers the offer within a few intervals.
        busy = _pod("busy", labels={}, annotations={}, node=NODE, command=["sh", "-c", "while :; do :; done"],
                    resources={"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}})
        kube.must(kube.post(f"/api/v1/namespaces/{namespace}/pods", busy), "busy LS pod")
        wait(lambda: _pod_status(kube, namespace, "busy").get("status", {}).get("phase") == "Running",
             "the busy pod Running", 60)
        running_at = time.monotonic()
        wait(lambda: int(_offer().get(BATCH_CPU, "0")) < before * 0.8, "a smaller offer", 90)
        timings["offer shrunk after the busy pod started"] = time.monotonic() - running_at
        shrunk = int(_offer()[BATCH_CPU])
        kube.delete(f"/api/v1/namespaces/{namespace}/pods/busy", grace_seconds=0)

        # 3. A kubelet restart and an agent restart keep the offer (watched every 0.2 s throughout).
        gaps: list[str] = []
        watching = threading.Event()
        watching.set()

        def watch() -> None:
            while watching.is_set():
                try:
                    if BATCH_CPU not in _offer():
                        gaps.append(time.strftime("%H:%M:%S"))
                except Exception:  # noqa: BLE001 - the apiserver answers throughout; a failed read is no gap
                    pass
                time.sleep(0.2)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            restart_kubelet(TOOLS)
            assert agent.stop() == 0
            agent.start()
            wait(lambda: agent.capacity()["state"] in ("published", "holding"), "the restarted agent's first write",
                 60)
        finally:
            watching.clear()
            watcher.join(timeout=5)
        assert not gaps, f"the offer was missing at {gaps}"
        doc = agent.capacity()
        assert doc["offer"] and int(_offer()[BATCH_CPU]) > 0
        assert "kubelet" not in json.dumps(doc["publisher"]["why"])  # not yielded to the restarted kubelet

        # 4. The agent's own samples go stale (its proc root is taken away): past degradeTimeMinutes the offer goes.
        agent.proc_link.unlink()
        stale_at = time.monotonic()
        wait(lambda: BATCH_CPU not in _offer(), "the offer withdrawn", 150, every_s=1.0)
        timings["offer withdrawn after the samples stopped"] = time.monotonic() - stale_at
        assert agent.capacity()["state"] == "degraded"
        agent.proc_link.symlink_to("/proc")
        back_at = time.monotonic()
        wait(lambda: BATCH_CPU in _offer(), "the offer back with the samples", 90, every_s=1.0)
        timings["offer back after the samples resumed"] = time.monotonic() - back_at
        print(json.dumps({"batch-cpu before / with the busy pod": [before, shrunk],
                          **{k: round(v, 1) for k, v in timings.items()}}, indent=1))
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- agent log ---\n{agent.log_tail()}") from None
    finally:
        code = agent.stop()
        if not agent.proc_link.is_symlink():
            agent.proc_link.symlink_to("/proc")
    assert code == 0, agent.log_tail()
