"""System config against a REAL kube-apiserver: a `hookserver serve` process reads its NodeSLO from the
apiserver, sets the vm sysctls (under a fixture /proc root) while `systemStrategy` is there, and puts the
node's own values back when the NodeSLO drops it ("absent means leave the node as it was"). While it runs,
`hookserver cleanup` refuses. Skipped unless HOOKSERVER_E2E_KUBECONFIG names an admin kubeconfig.
Objects are named `i10-qos-<random>` and deleted afterwards.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ENV = "HOOKSERVER_E2E_KUBECONFIG"
GROUP, VERSION = "slo.koordinator.sh", "v1alpha1"
ROOT = Path(__file__).resolve().parents[2]
MEM_TOTAL_KIB = 16_000_000


@pytest.fixture(scope="module")
def api() -> Iterator[Any]:
    path = os.environ.get(ENV, "")
    if not path:
        pytest.skip(f"{ENV} is not set: no real kube-apiserver to test against")
    from kubernetes import client, config

    api_client = config.new_client_from_config(config_file=path)
    ext = client.ApiextensionsV1Api(api_client)
    names = {c.metadata.name for c in ext.list_custom_resource_definition().items}
    if "nodeslos.slo.koordinator.sh" not in names:
        ext.create_custom_resource_definition({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "nodeslos.slo.koordinator.sh"},
            "spec": {"group": GROUP, "scope": "Cluster",
                     "names": {"plural": "nodeslos", "singular": "nodeslo", "kind": "NodeSLO", "listKind": "NodeSLOList"},
                     "versions": [{"name": VERSION, "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
        })
        time.sleep(2)
    try:
        yield api_client
    finally:
        api_client.close()


def _wait(what: str, check: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_system_strategy_from_the_apiserver_is_applied_then_restored_when_dropped(api: Any, tmp_path: Path) -> None:
    from kubernetes import client

    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    name = f"i10-qos-{uuid.uuid4().hex[:8]}"
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                      "status": {"capacity": {"cpu": "8", "memory": "16Gi"}, "allocatable": {"cpu": "8", "memory": "16Gi"}}})
    custom.create_cluster_custom_object(GROUP, VERSION, "nodeslos", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "NodeSLO", "metadata": {"name": name},
        "spec": {"systemStrategy": {"minFreeKbytesFactor": 100, "watermarkScaleFactor": 150}}})
    vm = tmp_path / "proc" / "sys" / "vm"
    vm.mkdir(parents=True)
    (vm / "min_free_kbytes").write_text("67584")
    (vm / "watermark_scale_factor").write_text("10")
    (tmp_path / "proc" / "meminfo").write_text(f"MemTotal: {MEM_TOTAL_KIB} kB\nMemFree: 1000 kB\n")
    for sub in ("cpu", "memory", "cpuset"):
        (tmp_path / "cg" / sub).mkdir(parents=True)
    common = ["--state-dir", str(tmp_path / "state"), "--proc-root", str(tmp_path / "proc"), "--sys-root", str(tmp_path / "sys"),
              "--cgroup-root", str(tmp_path / "cg"), "--cgroup-driver", "cgroupfs",
              "--hook-socket", str(tmp_path / "h.sock"), "--debug-socket", str(tmp_path / "d.sock")]
    # HOOKSERVER_* variables are settings for the agent: the test tier's own variable must not reach it.
    env = {k: v for k, v in os.environ.items() if k != ENV}
    agent = subprocess.Popen(
        [sys.executable, "-m", "hookserver.cli.serve", "serve", *common, "--kubeconfig", os.environ[ENV], "--node-name", name,
         "--no-nri", "--registration-dir", str(tmp_path / "reg"), "--metrics-addr", "127.0.0.1:0",
         "--feature-gates", "SystemConfig=true"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )
    failed = True
    try:
        # the Node's 16Gi = 16 777 216 KiB × 100 / 10000 = 167 772 (koordlet uses the Node's capacity)
        _wait("min_free_kbytes from the NodeSLO", lambda: (vm / "min_free_kbytes").read_text() == "167772")
        assert (vm / "watermark_scale_factor").read_text() == "150"
        refused = subprocess.run([sys.executable, "-m", "hookserver.cli.serve", "cleanup", *common], cwd=ROOT,
                                 capture_output=True, text=True, timeout=60, env=env)
        assert refused.returncode == 2 and "the agent is running" in refused.stderr
        # the NodeSLO drops systemStrategy: the node's own values come back
        custom.patch_cluster_custom_object(GROUP, VERSION, "nodeslos", name, {"spec": {"systemStrategy": None}})
        _wait("the original sysctls", lambda: (vm / "min_free_kbytes").read_text() == "67584"
              and (vm / "watermark_scale_factor").read_text() == "10")
        failed = False
    finally:
        agent.terminate()
        try:
            out, _ = agent.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            agent.kill()
            out, _ = agent.communicate()
        custom.delete_cluster_custom_object(GROUP, VERSION, "nodeslos", name)
        core.delete_node(name)
        if failed:
            print(out[-5000:])
    assert agent.returncode in (0, -15), out[-3000:]
    done = subprocess.run([sys.executable, "-m", "hookserver.cli.serve", "cleanup", *common], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0 and "nothing to restore" in done.stdout
