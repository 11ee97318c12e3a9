"""The real one-node cluster tier (kube-apiserver + kubelet 1.20 + containerd, `tools/kube-e2e/start-node.sh`, and
for scheduling tests `start-scheduler.sh`): when it is up, and the helpers its tests share.

A test module skips with `pytestmark = pytest.mark.skipif(bool(why_not()), reason=why_not() or "ok")` (or
`why_not(scheduler=True)`): the reason names what to start.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import ssl
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
KUBECONFIG = os.environ.get("HOOKSERVER_E2E_KUBECONFIG", "")
NODE = os.environ.get("HOOKSERVER_E2E_NODE", "e2e-node")
CGROUP = Path("/sys/fs/cgroup")
KUBELET_HEALTHZ = os.environ.get("HOOKSERVER_E2E_KUBELET_HEALTHZ", "http://127.0.0.1:10248/healthz")
SCHEDULER_HEALTHZ = os.environ.get("HOOKSERVER_E2E_SCHEDULER_HEALTHZ", "https://127.0.0.1:10259/healthz")
TOOLS = Path(os.environ.get("HOOKSERVER_E2E_TOOLS", str(ROOT.parent / "shared" / "tools" / "kube-e2e")))
IMAGE = "docker.io/library/kube-e2e-busybox:latest"


def core_api() -> Any:
    from kubernetes import client, config

    config.load_kube_config(KUBECONFIG)
    return client.CoreV1Api()


def _answers_ok(url: str) -> str:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the scheduler's self-signed serving certificate on loopback
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as reply:  # noqa: S310 - a fixed local URL
            return "" if reply.read().strip() == b"ok" else f"{url} is not healthy"
    except OSError as exc:
        return f"{url} does not answer ({exc})"


def why_not(*, scheduler: bool = False) -> str:
    """"" when the node tier (and the scheduler, if asked) is up; else what is missing."""
    if not KUBECONFIG:
        return "HOOKSERVER_E2E_KUBECONFIG is not set (the real-cluster tier)"
    if os.geteuid() != 0:
        return "needs root to read the kubelet's cgroups"
    if not (CGROUP / "cpu" / "kubepods" / "besteffort").is_dir():
        return "no kubelet cgroups at /sys/fs/cgroup/cpu/kubepods (start tools/kube-e2e/start-node.sh)"
    try:
        node = core_api().read_node(NODE)
    except Exception as exc:  # noqa: BLE001 - any failure to reach the node means: not this tier
        return f"node {NODE} not readable: {exc}"
    # The Node's heartbeat stays "fresh" for a while after stop-node.sh: ask the kubelet itself too.
    problem = _answers_ok(KUBELET_HEALTHZ)
    if problem:
        return f"the kubelet of {NODE}: {problem}: start tools/kube-e2e/start-node.sh"
    beats = [c.last_heartbeat_time for c in node.status.conditions or [] if c.last_heartbeat_time]
    now = datetime.datetime.now(datetime.UTC)
    if not beats or (now - max(beats)).total_seconds() > 120:
        return f"node {NODE} has no fresh kubelet heartbeat (start tools/kube-e2e/start-node.sh)"
    if scheduler:
        problem = _answers_ok(SCHEDULER_HEALTHZ)
        if problem:
            return f"no kube-scheduler: {problem} (start tools/kube-e2e/start-scheduler.sh)"
    return ""


def wait(predicate: Callable[[], bool], what: str, timeout_s: float = 60.0, every_s: float = 0.2) -> float:
    """Seconds it took until `predicate()` held; AssertionError naming `what` after `timeout_s`."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(every_s)
    return time.monotonic() - started


def cgroup_values(rel: str) -> tuple[str, str, str]:
    """(cpu.shares, cpu.cfs_quota_us, memory.limit_in_bytes) of a cgroup v1 directory under /sys/fs/cgroup."""
    return (
        (CGROUP / "cpu" / rel / "cpu.shares").read_text().strip(),
        (CGROUP / "cpu" / rel / "cpu.cfs_quota_us").read_text().strip(),
        (CGROUP / "memory" / rel / "memory.limit_in_bytes").read_text().strip(),
    )


def hookctl(socket: Path, *argv: str) -> Any:
    out = subprocess.run(
        [sys.executable, "-m", "hookserver.cli.hookctl", "--socket", str(socket), *argv, "-o", "json"],
        cwd=ROOT, capture_output=True, text=True, timeout=30,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def restart_kubelet(tools: Path, *, timeout_s: float = 180) -> None:
    """stop-node.sh then start-node.sh (the kubelet only; apiserver and containerd keep running). `FRESH` is
    never passed on: a `FRESH=1 make e2e` must not wipe etcd again in the middle of the run."""
    env = {k: v for k, v in os.environ.items() if k != "FRESH"}
    for script in ("stop-node.sh", "start-node.sh"):
        done = subprocess.run([str(tools / script)], cwd=tools, env=env, capture_output=True, text=True,
                              timeout=timeout_s, check=False)
        assert done.returncode == 0, f"{script}: {done.stdout[-2000:]}{done.stderr[-2000:]}"


@contextlib.contextmanager
def running_be_pod(namespace: str, *, annotations: dict[str, str] | None = None) -> Iterator[tuple[str, str, str]]:
    """A BE pod (koordinator.sh/qosClass BE, kube BestEffort) the kubelet runs on NODE, in `namespace` (created
    if missing): yields (name, pod cgroup dir, container cgroup dir) relative to a hierarchy, once the container
    has an id; deleted (grace 0) afterwards. The namespace is left for the caller."""
    from kubernetes import client

    api = core_api()
    try:
        api.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    except client.ApiException as exc:
        if exc.status != 409:
            raise
    name = f"be-{uuid.uuid4().hex[:6]}"
    api.create_namespaced_pod(namespace, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"koordinator.sh/qosClass": "BE"},
                     "annotations": dict(annotations or {})},
        "spec": {"nodeName": NODE, "hostNetwork": True, "terminationGracePeriodSeconds": 2,
                 "tolerations": [{"operator": "Exists"}],
                 "containers": [{"name": "main", "image": "docker.io/library/kube-e2e-busybox:latest",
                                 "imagePullPolicy": "Never"}]},
    })
    try:
        def started() -> bool:
            status = api.read_namespaced_pod(name, namespace).status
            return status.phase == "Running" and bool(status.container_statuses) and bool(
                status.container_statuses[0].container_id)

        wait(started, f"pod {name} running")
        pod = api.read_namespaced_pod(name, namespace)
        cid = pod.status.container_statuses[0].container_id.split("://")[-1]
        pod_dir = f"kubepods/besteffort/pod{pod.metadata.uid}"
        yield name, pod_dir, f"{pod_dir}/{cid}"
    finally:
        api.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
