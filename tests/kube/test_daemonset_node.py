"""The shipped DaemonSet on the real one-node cluster (issue 21): the image from `make image` imported into the
node's containerd, `deploy/hookserver.yaml` applied with `kubectl`, the agent pod Running and ready, a BE pod made
before it corrected by its reconciler, the kubectl plugin answering through the apiserver, an upgrade
to a new image tag rolled by the DaemonSet controller, and an uninstall (`kubectl delete -f`) leaving the node as
it was.

What the 1.20 test cluster needs beyond the shipped manifest (`test_cluster_shim`, kept minimal; also in
deploy/README.md): the harness runs no CNI (pods use the host network) and no ServiceAccount token controller
(pods get no token), so the agent gets `hostNetwork: true` and a kubeconfig from a Secret
(`HOOKSERVER_KUBECONFIG`); the harness runs no controller-manager, so this test runs one
(tests/kube/build-controller-manager.sh) with only the daemonset, garbagecollector and namespace controllers; and
koordinator's namespace does not exist, so the two objects the manifest puts there are left out (as `kubectl
apply` would report them NotFound); and where the host's /sys is a private mount (this machine; a systemd node's
is shared) the HostToContainer propagation of the /sys mount is dropped, which containerd would refuse; Node
objects other tiers left in the harness's etcd (no kubelet serves them) are deleted first; and the debug views are served over HTTP (`debug.http_views`), because this
apiserver cannot exec and the plugin falls back to pods/proxy.

Skips unless the node tier and scheduler are up, the controller-manager is built, the image is built
(`make image`) and `ctr` and `kubectl` are on PATH. Prints one JSON line of timings (`daemonset e2e: {...}`).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hookserver import __version__
from tests.kube.node_tier import KUBECONFIG, NODE, ROOT, cgroup_values, core_api, running_be_pod, wait, why_not

KUBE_E2E = Path(os.environ.get("KUBE_E2E", "/tmp/kube-e2e"))
KCM = KUBE_E2E / "bin" / "kube-controller-manager"
CTR = ["ctr", "--address", str(KUBE_E2E / "containerd" / "containerd.sock"), "-n", "k8s.io"]
ARCHIVE = ROOT / "build" / "image" / f"hookserver-{__version__}.oci.tar"
REF = f"docker.io/library/hookserver:{__version__}"
UPGRADE_TAG = f"hookserver:{__version__}-e2e-upgrade"
AGENT_NS = "hookserver-system"
TEST_NS = f"i21-daemonset-{uuid.uuid4().hex[:5]}"  # a namespace left Terminating by a cut run never blocks the next
HOST_DIRS = (Path("/var/run/koordlet"), Path("/etc/runtime/hookserver.d"), Path("/var/run/nri"))
SPEC = json.dumps({"containers": {"main": {
    "requests": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "1Gi"},
    "limits": {"kubernetes.io/batch-cpu": "2000", "kubernetes.io/batch-memory": "1Gi"},
}}})
CORRECTED = ("1024", "200000", "1073741824")  # BatchResource: 1000 batch-cpu request, 2000 limit, 1Gi


def _why_not_here() -> str:
    reason = why_not(scheduler=True)
    if reason:
        return reason
    if not KCM.exists():
        return f"no {KCM} (tests/kube/build-controller-manager.sh builds it)"
    if not ARCHIVE.exists():
        return f"no image archive {ARCHIVE} (make image)"
    for tool in ("ctr", "kubectl"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH"
    return ""


pytestmark = pytest.mark.skipif(bool(_why_not_here()), reason=_why_not_here() or "ok")


def test_cluster_shim(docs: list[dict[str, Any]], kubeconfig_text: str) -> list[dict[str, Any]]:
    """deploy/hookserver.yaml as the 1.20 test cluster can run it (see the module docstring)."""
    out: list[dict[str, Any]] = []
    for doc in copy.deepcopy(docs):
        if doc["metadata"].get("namespace") == "koordinator-system":
            continue
        out.append(doc)
        if doc["kind"] == "Namespace":
            out.append({"apiVersion": "v1", "kind": "Secret",
                        "metadata": {"name": "hookserver-e2e-kubeconfig", "namespace": AGENT_NS},
                        "stringData": {"kubeconfig": kubeconfig_text}})
        if doc["kind"] == "DaemonSet":
            pod = doc["spec"]["template"]["spec"]
            pod["hostNetwork"] = True
            container = pod["containers"][0]
            container["env"].append({"name": "HOOKSERVER_KUBECONFIG", "value": "/etc/hookserver-e2e/kubeconfig"})
            # This apiserver cannot reach the kubelet (no exec): the plugin reads the views through pods/proxy.
            container["env"].append({"name": "HOOKSERVER_DEBUG__HTTP_VIEWS", "value": "true"})
            container["volumeMounts"].append({"name": "e2e-kubeconfig", "mountPath": "/etc/hookserver-e2e",
                                              "readOnly": True})
            if _private_mount("/sys"):
                # containerd refuses HostToContainer (rslave) from a private host mount ("not a shared or slave
                # mount"): this host's /sys is private, a node's (systemd) is shared.
                for mount in container["volumeMounts"]:
                    mount.pop("mountPropagation", None)
            pod["volumes"].append({"name": "e2e-kubeconfig", "secret": {"secretName": "hookserver-e2e-kubeconfig"}})
    return out


def _private_mount(path: str) -> bool:
    """Whether the mount holding `path` propagates nothing (no `shared:`/`master:` tag in mountinfo)."""
    best = ("", "")
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        target, tags = fields[4], " ".join(fields[6:fields.index("-")])
        if (path == target or path.startswith(target.rstrip("/") + "/")) and len(target) >= len(best[0]):
            best = (target, tags)
    return "shared:" not in best[1] and "master:" not in best[1]


test_cluster_shim.__test__ = False  # type: ignore[attr-defined] # a helper named for what it is, not a test


def _run(argv: list[str], *, timeout: float = 120, check: bool = True, stdin: str | None = None,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout, env=env)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)}: rc {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done


def _kubectl(*argv: str, stdin: str | None = None, check: bool = True, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": KUBECONFIG,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return _run(["kubectl", *argv], stdin=stdin, check=check, timeout=timeout, env=env)


def _node_state() -> dict[str, Any]:
    """What an install could leave behind on the node: host dirs and their entries, containerd images and
    containers of hookserver."""
    images = _run([*CTR, "images", "ls", "-q"]).stdout.split()
    containers = _run([*CTR, "containers", "ls"]).stdout.splitlines()[1:]
    return {
        "dirs": {str(d): sorted(p.name for p in d.iterdir()) if d.is_dir() else None for d in HOST_DIRS},
        "images": sorted(i for i in images if "hookserver" in i),
        "containers": sorted(c.split()[0] for c in containers if "hookserver" in c),
    }


@pytest.fixture
def controller_manager(tmp_path: Path) -> Iterator[None]:
    log = open(tmp_path / "kcm.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [str(KCM), f"--kubeconfig={KUBECONFIG}", "--controllers=daemonset,garbagecollector,namespace",
         "--leader-elect=false", "--secure-port=0", "--port=0", "-v=1"],  # serves nothing: writes no cert
        stdout=log, stderr=subprocess.STDOUT)
    try:
        time.sleep(1)
        assert proc.poll() is None, (tmp_path / "kcm.log").read_text()[-2000:]
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture
def be_pod() -> Iterator[tuple[str, str, str]]:
    """A BE pod the kubelet starts before the agent exists: (name, pod dir, container dir)."""
    from kubernetes import client

    api = core_api()
    try:
        with running_be_pod(TEST_NS, annotations={"node.koordinator.sh/extended-resource-spec": SPEC}) as pod:
            yield pod
    finally:
        try:
            api.delete_namespace(TEST_NS)
        except client.ApiException:
            pass

        def gone() -> bool:
            try:
                api.read_namespace(TEST_NS)
            except client.ApiException as exc:
                return exc.status == 404
            return False

        wait(gone, f"namespace {TEST_NS} deleted (while the namespace controller still runs)", 120, 1.0)


def _agents() -> list[Any]:
    pods = core_api().list_namespaced_pod(AGENT_NS, label_selector="app=hookserver").items
    return [p for p in pods if not p.metadata.deletion_timestamp]


def _ready(pod: Any) -> bool:
    return pod.status.phase == "Running" and any(
        c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def _agent_with(image: str, *, ready: bool) -> Any:
    for pod in _agents():
        if pod.spec.containers[0].image == image and (_ready(pod) if ready else pod.status.phase == "Running"):
            return pod
    return None


def _logs_of_agents() -> str:
    """The agents' container logs as the kubelet wrote them (the harness's apiserver cannot reach the kubelet
    for `kubectl logs`), and their pods' status."""
    out = [str(p.status) for p in core_api().list_namespaced_pod(AGENT_NS).items]
    for log in sorted(Path("/var/log/pods").glob(f"{AGENT_NS}_*/*/*.log")):
        out.append(f"--- {log}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-40:]))
    return "\n".join(out)


def test_the_daemonset_installs_corrects_answers_upgrades_and_uninstalls(
    controller_manager: None, be_pod: tuple[str, str, str], tmp_path: Path,
) -> None:
    name, pod_dir, ctr_dir = be_pod
    before = _node_state()
    created_dirs = [str(d) for d in HOST_DIRS if not d.exists()]
    numbers: dict[str, Any] = {}
    assert cgroup_values(pod_dir) == ("2", "-1", "9223372036854771712")  # the kubelet's BestEffort values

    started = time.monotonic()
    _run([*CTR, "images", "import", str(ARCHIVE)], timeout=300)
    numbers["import_s"] = round(time.monotonic() - started, 1)
    assert _run([*CTR, "images", "ls", "-q"]).stdout.split().count(REF) == 1

    docs = [d for d in yaml.safe_load_all((ROOT / "deploy" / "hookserver.yaml").read_text()) if d]
    manifests = test_cluster_shim(docs, Path(KUBECONFIG).read_text())
    text = yaml.safe_dump_all(manifests, sort_keys=False)
    (tmp_path / "manifests.yaml").write_text(text)
    installed = False
    try:
        started = time.monotonic()
        installed = True  # whatever part of it applied is deleted below
        # Node objects the other tiers create (NodeFactory, `hookserver-e2e-*`) and a killed run left in the
        # harness's etcd: no kubelet serves them, and an agent pod the DaemonSet put there would stay Pending.
        for stale in _kubectl("get", "nodes", "-o", "name").stdout.split():
            if stale.removeprefix("node/").startswith("hookserver-e2e-"):
                _kubectl("delete", stale, "--wait=false", check=False)
        _kubectl("apply", "-f", "-", stdin=text)
        try:
            numbers["running_s"] = round(wait(lambda: _agent_with("hookserver:" + __version__, ready=False) is not None,
                                              "the agent pod Running", 120), 1)
            numbers["ready_s"] = round(wait(lambda: _agent_with("hookserver:" + __version__, ready=True) is not None,
                                            "the agent pod ready", 120) + numbers["running_s"], 1)
            wait(lambda: cgroup_values(pod_dir) == CORRECTED and cgroup_values(ctr_dir) == CORRECTED,
                 "the BE pod corrected by the agent's reconciler", 90)
            numbers["be_corrected_s"] = round(time.monotonic() - started, 1)  # since `kubectl apply`
        except AssertionError:
            raise AssertionError(_logs_of_agents()) from None
        agent = _agent_with("hookserver:" + __version__, ready=True)
        assert agent.spec.node_name == NODE and agent.status.container_statuses[0].restart_count == 0

        # The kubectl plugin, found by kubectl on PATH, through the apiserver. This harness's apiserver cannot
        # exec (it has no route or credentials to the kubelet: "error dialing backend"), so `auto` falls back to
        # the pods/proxy subresource and the agent's /debug/v1 views; `--via exec` says why it cannot.
        exec_only = _kubectl("hookserver", "--via", "exec", "status", NODE, check=False)
        numbers["plugin_exec"] = "ok" if exec_only.returncode == 0 else exec_only.stderr.strip()[-160:]
        listed = json.loads(_kubectl("hookserver", "agents", "-o", "json").stdout)
        assert [(a["node"], a["ready"]) for a in listed] == [(NODE, True)]
        status = json.loads(_kubectl("hookserver", "status", NODE, "-o", "json").stdout)
        assert status["informer"]["mode"] == "apiserver" and status["node"] == NODE
        assert status["reconciler"]["corrections_total"] >= 1
        explained = json.loads(_kubectl("hookserver", "explain", f"{TEST_NS}/{name}", "-o", "json").stdout)
        assert any(h["plugin"] == "BatchResource" for g in explained["decisions"] for h in g["hooks"])
        summary = _kubectl("hookserver", "status", NODE).stdout
        assert summary.startswith("hookserver ") and "informer:    apiserver, synced" in summary
        for command in ("qos", "capacity", "top", "events"):
            assert _kubectl("hookserver", command, NODE).stdout.strip()
        assert json.loads(_kubectl("hookserver", "--via", "proxy", "pods", NODE, "-o", "json").stdout)

        # Upgrade: a new image tag, rolled by the DaemonSet controller.
        _run([*CTR, "images", "tag", REF, f"docker.io/library/{UPGRADE_TAG}"])
        old = agent.metadata.name
        started = time.monotonic()
        _kubectl("-n", AGENT_NS, "set", "image", "daemonset/hookserver", f"hookserver={UPGRADE_TAG}")
        try:
            numbers["upgrade_ready_s"] = round(wait(lambda: _agent_with(UPGRADE_TAG, ready=True) is not None
                                                    and all(p.metadata.name != old for p in _agents()),
                                                    "the upgraded agent ready, the old one gone", 180), 1)
        except AssertionError:
            raise AssertionError(_logs_of_agents()) from None
        # the upgraded agent keeps the BE pod corrected (the kubelet's values never came back)
        assert cgroup_values(pod_dir) == CORRECTED and cgroup_values(ctr_dir) == CORRECTED
        assert json.loads(_kubectl("hookserver", "status", NODE, "-o", "json").stdout)["informer"]["synced"]
    finally:
        if installed:
            started = time.monotonic()
            _kubectl("delete", "-f", "-", "--wait=true", "--timeout=170s", stdin=text, check=False, timeout=200)
            try:
                wait(lambda: not core_api().list_namespaced_pod(AGENT_NS).items, "the agent pods gone", 120)
                wait(lambda: not _node_state()["containers"], "the agent containers gone from containerd", 60)
            finally:
                numbers["uninstall_s"] = round(time.monotonic() - started, 1)
        after = _node_state()
        numbers["left_on_node"] = {k: after["dirs"][k] for k in after["dirs"] if after["dirs"][k] != before["dirs"][k]}
        for ref in (REF, f"docker.io/library/{UPGRADE_TAG}"):
            if ref not in before["images"]:
                _run([*CTR, "images", "rm", ref], check=False)
        print(f"daemonset e2e: {json.dumps(numbers, sort_keys=True)}")
        for path in created_dirs:  # what kubelet's DirectoryOrCreate made for the hostPath volumes
            shutil.rmtree(path, ignore_errors=True)
    # The node as it was: the agent's files gone from the host dirs that existed, no hookserver container.
    assert after["containers"] == []
    for d, entries in after["dirs"].items():
        if before["dirs"][d] is not None:
            assert entries == before["dirs"][d], (d, entries, before["dirs"][d])
