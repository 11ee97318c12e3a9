"""End to end: the koordinator v1.8.0 chart's koordlet arguments start the real agent through the `koordlet`
entry point (standalone, temp state dir and sockets). It serves hooks, and `hookctl status` / `hookctl qos`
report what each koordlet flag and gate became.

The koordlet arguments are the chart's exactly (`versions/v1.8.0/templates/koordlet.yaml` with the chart's
default values; only the metrics port value is a free port, so parallel runs do not collide). Isolation needs
hookserver's own flags on top (sockets, state dir, a fixture cgroup tree instead of the chart's /host-cgroup/):
they win over the koordlet flag for the same setting, and the report says so.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import grpc
import pytest

from hookserver.api import runtime_hook_pb2 as pb
from hookserver.api import runtime_hook_pb2_grpc as pb_grpc
from hookserver.cli import hookctl
from tests.reference_example import SPEC_KEY, WORKED_SPEC_JSON
from tests.sockets import accepts

ROOT = Path(__file__).resolve().parents[2]


def chart_args(port: int) -> list[str]:
    """The v1.8.0 chart's `args:` for koordlet, values: metrics.port, features "" (the default gate line),
    hostDirs.koordletSockDir /var/run/koordlet, log.level "4"."""
    return [
        f"-addr=:{port}",
        "-cgroup-root-dir=/host-cgroup/",
        "-feature-gates=BECPUEvict=true,BEMemoryEvict=true,CgroupReconcile=true,Accelerators=true",
        "-runtime-hooks-host-endpoint=/var/run/koordlet/koordlet.sock",
        "--logtostderr=true",
        "--v=4",
    ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])



def _tree(tmp: Path) -> Path:
    root = tmp / "cg"
    for sub in ("cpu", "cpuacct", "cpuset", "memory"):
        (root / sub / "kubepods" / "besteffort").mkdir(parents=True)
    return root


def test_the_charts_koordlet_arguments_start_and_serve(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = _free_port()
    hook, debug, reg = tmp_path / "hook.sock", tmp_path / "debug.sock", tmp_path / "reg"
    log = open(tmp_path / "agent.log", "ab")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "hookserver.cli.koordlet", *chart_args(port),
         "--standalone", "--no-nri", "--hook-socket", str(hook), "--debug-socket", str(debug),
         "--registration-dir", str(reg), "--state-dir", str(tmp_path / "state"), "--node-name", "e2e-node",
         "--cgroup-root", str(_tree(tmp_path)), "--cgroup-driver", "cgroupfs", "--sys-root", "/sys"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
    )
    registration = reg / "koordlet.json"  # koordlet's name: the swap replaces koordlet's registration
    try:
        deadline = time.monotonic() + 40
        while not (registration.exists() and accepts(hook) and accepts(debug)):
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "agent.log").read_text()
            time.sleep(0.05)
        # -runtime-hooks-host-endpoint is what the proxy is told to dial
        assert json.loads(registration.read_text())["remote-endpoint"] == "/var/run/koordlet/koordlet.sock"
        # -addr=:PORT serves metrics and health on every address
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as answer:
            assert answer.status == 200
        # it serves hooks (the BatchResource hook, on by koordlet's default)
        stub = pb_grpc.RuntimeHookServiceStub(grpc.insecure_channel(f"unix://{hook}"))
        request = pb.ContainerResourceHookRequest(
            pod_meta=pb.PodSandboxMetadata(name="batch-1", namespace="team", uid="feed-0001"),
            container_meta=pb.ContainerMetadata(name="b"),
            container_resources=pb.LinuxContainerResources(cpu_shares=2),
            pod_labels={"koordinator.sh/qosClass": "BE"}, pod_annotations={SPEC_KEY: WORKED_SPEC_JSON},
            pod_cgroup_parent="/kubepods/besteffort/podfeed-0001",
        )
        res = stub.PreCreateContainerHook(request, timeout=10).container_resources
        assert (res.cpu_shares, res.cpu_quota, res.memory_limit_in_bytes) == (1536, 200000, 2147483648)

        capsys.readouterr()
        assert hookctl.main(["--socket", str(debug), "status", "-o", "json"]) == 0
        compat = json.loads(capsys.readouterr().out)["koordlet"]
        mapped = {m["flag"]: m for m in compat["flags"]["mapped"]}
        assert mapped[f"-addr=:{port}"]["value"] == f"0.0.0.0:{port}"
        assert mapped["-cgroup-root-dir=/host-cgroup/"]["setting"] == "cgroup.root"
        assert mapped["-cgroup-root-dir=/host-cgroup/"]["overridden"]  # by this test's --cgroup-root
        assert mapped["-runtime-hooks-host-endpoint=/var/run/koordlet/koordlet.sock"]["setting"] == "hook.host_endpoint"
        assert "overridden" not in mapped[f"-addr=:{port}"]
        ignored = {i["flag"] for i in compat["flags"]["ignored"]}
        assert ignored == {"-logtostderr=true", "-v=4"}
        # Every gate of the v1.8 chart is implemented now; Accelerators was the last (the Device report).
        assert compat["gates_not_implemented"] == []

        assert hookctl.main(["--socket", str(debug), "qos", "-o", "json"]) == 0
        gates = {g["name"]: g for g in json.loads(capsys.readouterr().out)["gates"]}
        for name in ("BECPUEvict", "BEMemoryEvict", "CgroupReconcile"):
            assert (gates[name]["enabled"], gates[name]["implemented"], gates[name]["source"]) == (
                True, True, "flag --feature-gates")
        assert (gates["Accelerators"]["enabled"], gates["Accelerators"]["implemented"]) == (True, True)
        # The chart's Accelerators=true starts the Device report: standalone, a Device with no GPU on this machine.
        assert hookctl.main(["--socket", str(debug), "devices", "-o", "json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert (report["document"]["kind"], report["document"]["spec"], report["target"]) == ("Device", {}, "file")
        assert hookctl.main(["--socket", str(debug), "status", "-o", "json"]) == 0
        assert json.loads(capsys.readouterr().out)["devices"] == {
            "state": "ok", "detail": None, "target": "file", "where": str(tmp_path / "state" / "device.json"), "devices": 0}
        assert json.loads((tmp_path / "state" / "device.json").read_text())["kind"] == "Device"
    finally:
        proc.terminate()
        code = proc.wait(timeout=20)
        log.close()
    assert code == 0
    text = (tmp_path / "agent.log").read_text()
    assert "Accelerators=true (flag --feature-gates)" not in text  # implemented: not in "accepted, not implemented"
    assert text.count("koordlet flags accepted, ignored: -logtostderr=true") == 1
