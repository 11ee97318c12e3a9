"""GPUEnvInject through a real containerd 1.7: hookserver is containerd's NRI plugin, and the environment and
mounts it adjusts are what the container's process really has (`/proc/<pid>/environ`, its mount namespace).

The agent runs as `hookserver serve --standalone` with koordlet's gates (Accelerators, GPUEnvInject,
HamiCoreVGPUMonitor) and the fake `libnvidia-ml.so.1` as its NVML (two GPUs, minors 0 and 1), so the hook's GPU
inventory is the one the collector read through pynvml. Pods are created through CRI as the kubelet would.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.collectors.fake_nvml import build_fake_nvml, compiler, fake_gpu, worker_env, write_fixture
from tests.containerd.conftest import ENV
from tests.containerd.cri import CriClient, PodSpec
from tests.containerd.runtime import CGROUP_PARENT, IMAGE, Containerd

REPO = Path(__file__).resolve().parents[2]
ANNOTATION = "scheduling.koordinator.sh/device-allocated"
GiB = 1 << 30


class Agent:
    """`hookserver serve --standalone` as containerd's NRI plugin, loading the fake NVML."""

    def __init__(self, home: Path, nri_socket: Path, lib: Path) -> None:
        nvml = build_fake_nvml(home / "nvml")
        fixture = home / "gpus.json"
        write_fixture(fixture, {"driver_version": "550.54.15", "devices": [fake_gpu(0), fake_gpu(1)]})
        env = worker_env(nvml, fixture)
        env.pop(ENV, None)  # the tier's switch is not an agent setting (HOOKSERVER_* names are)
        env.update(HOOKSERVER_NRI__BACKOFF_INITIAL_S="0.05", HOOKSERVER_HOOK__GPU__HAMI_CORE_LIBRARY_PATH=str(lib))
        self.debug_socket = home / "debug.sock"
        self.log_path = home / "agent.log"
        args = [
            sys.executable, "-m", "hookserver.cli.serve", "serve", "--standalone",
            "--nri-socket", str(nri_socket), "--hook-socket", str(home / "hook.sock"),
            "--debug-socket", str(self.debug_socket), "--registration-dir", str(home / "reg"),
            "--state-dir", str(home / "state"), "--metrics-addr", "127.0.0.1:0",
            "--slo-file", str(home / "slo.yaml"), "--node-name", "ctd-node",
            "--feature-gates", "Accelerators=true,GPUEnvInject=true,HamiCoreVGPUMonitor=true",
        ]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)

    def hookctl(self, *argv: str) -> Any:
        done = subprocess.run(
            [sys.executable, "-c", "from hookserver.cli.hookctl import main; raise SystemExit(main())",
             "--socket", str(self.debug_socket), "-o", "json", *argv],
            cwd=REPO, capture_output=True, text=True, timeout=30, check=False,
        )
        if done.returncode != 0:
            raise AssertionError(f"hookctl {' '.join(argv)} exited {done.returncode}: {done.stderr}")
        return json.loads(done.stdout)

    def wait_connected(self, timeout_s: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        status: dict[str, Any] = {}
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            if self.debug_socket.exists():
                try:
                    status = self.hookctl("status")
                except (AssertionError, json.JSONDecodeError, subprocess.TimeoutExpired):
                    status = {}
                if (status.get("nri") or {}).get("state") == "ready":  # registered and synchronized
                    return status
            time.sleep(0.2)
        raise AssertionError(f"the agent never connected to containerd's NRI: {status.get('nri')}\n"
                             f"{self.log_path.read_text()[-4000:]}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def agent(containerd: Containerd, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    if compiler() is None:
        pytest.skip("no C compiler: the fake libnvidia-ml.so.1 cannot be built")
    home = Path(tmp_path_factory.mktemp("agent"))
    lib = home / "vgpu" / "libvgpu.so"
    lib.parent.mkdir()
    lib.write_bytes(b"hami-core stand-in " + uuid.uuid4().hex.encode())
    lock_dir = Path("/tmp/vgpulock")  # HAMi's node-wide lock directory: the NRI door creates it where missing
    lock_existed = lock_dir.exists()
    running = Agent(home, containerd.nri_socket, lib)
    try:
        status = running.wait_connected()
        assert "containerd" in json.dumps(status["nri"]), status["nri"]
        yield running
    finally:
        assert running.stop() == 0, running.log_path.read_text()[-3000:]
        if not lock_existed and lock_dir.is_dir():
            shutil.rmtree(lock_dir)


def _lib(agent: Agent) -> Path:
    return agent.log_path.parent / "vgpu" / "libvgpu.so"


def _pod(name: str, *, annotation: str | None, hami: bool) -> PodSpec:
    uid = str(uuid.uuid4())
    return PodSpec(
        name=name, uid=uid, namespace="gpu-e2e", cgroup_parent=f"/{CGROUP_PARENT}/pod{uid}",
        labels={"koordinator.sh/gpu-isolation-provider": "HAMi-core"} if hami else {},
        annotations={ANNOTATION: annotation} if annotation is not None else {},
    )


def _run(cri: CriClient, pod: PodSpec, container: str, command: list[str]) -> tuple[str, int]:
    sandbox = cri.run_pod_sandbox(pod)
    try:
        cid = cri.create_container(sandbox, pod, container, IMAGE, command, {"FROM_POD_SPEC": "kept"})
        cri.start_container(cid)
        return sandbox, cri.container_pid(cid)
    except BaseException:
        cri.stop_and_remove_sandbox(sandbox)
        raise


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


def _wait_for(path: Path, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.1)
    return False


def test_scheduler_chosen_gpus_and_hami_limits_reach_the_container(
    containerd: Containerd, cri: CriClient, agent: Agent
) -> None:
    lib = _lib(agent)
    allocation = {"gpu": [
        {"minor": 1, "resources": {"koordinator.sh/gpu-core": 30, "koordinator.sh/gpu-memory": "6Gi",
                                   "koordinator.sh/gpu-memory-ratio": 25}},
        {"minor": 0, "resources": {"koordinator.sh/gpu-core": 30, "koordinator.sh/gpu-memory": "6Gi",
                                   "koordinator.sh/gpu-memory-ratio": 25}},
    ]}
    pod = _pod("trainer", annotation=json.dumps(allocation), hami=True)
    # The process writes through the monitor's mount: a file in the library's directory inside the container.
    sandbox, pid = _run(cri, pod, "cuda", ["/bin/sh", "-c", f"echo probe > {lib.parent}/probe; exec sleep 1000"])
    try:
        env = _environ(pid)
        first = allocation["gpu"][0]["resources"]
        expected = {
            "NVIDIA_VISIBLE_DEVICES": ",".join(str(g["minor"]) for g in allocation["gpu"]),
            "CUDA_DEVICE_MEMORY_LIMIT": str(int(str(first["koordinator.sh/gpu-memory"]).removesuffix("Gi")) * GiB),
            "CUDA_DEVICE_SM_LIMIT": str(first["koordinator.sh/gpu-core"]),
            "LD_PRELOAD": str(lib),
            "CUDA_DEVICE_MEMORY_SHARED_CACHE": f"{lib.parent}/{pod.uid}_cuda.cache",
        }
        assert {k: env.get(k) for k in expected} == expected
        assert env["FROM_POD_SPEC"] == "kept"  # the pod spec's own env survives the adjustment
        # The library is bind-mounted at its own path: the container sees the host's file.
        assert Path(f"/proc/{pid}/root{lib}").read_bytes() == lib.read_bytes()
        # The monitor's per-container directory is the container's view of the library directory.
        host_dir = lib.parent / "containers" / f"{pod.uid}_cuda"
        assert _wait_for(host_dir / "probe"), sorted(str(p) for p in lib.parent.rglob("*"))
        assert (host_dir / "probe").read_text() == "probe\n"
        # HAMi's shared lock directory is the host's.
        assert Path(f"/proc/{pid}/root/tmp/vgpulock").is_dir()
        explained = json.dumps(agent.hookctl("explain", f"gpu-e2e/{pod.name}"))
        assert "NVIDIA_VISIBLE_DEVICES" in explained and "1,0" in explained
    finally:
        cri.stop_and_remove_sandbox(sandbox)


def test_a_pod_without_an_allocation_gets_no_gpu_env(containerd: Containerd, cri: CriClient, agent: Agent) -> None:
    pod = _pod("web", annotation=None, hami=False)
    sandbox, pid = _run(cri, pod, "app", ["/bin/sleep", "1000"])
    try:
        env = _environ(pid)
        assert env["FROM_POD_SPEC"] == "kept"
        assert not {"NVIDIA_VISIBLE_DEVICES", "LD_PRELOAD", "CUDA_DEVICE_MEMORY_LIMIT"} & env.keys()
    finally:
        cri.stop_and_remove_sandbox(sandbox)


def test_a_malformed_allocation_still_creates_the_container_and_says_why(
    containerd: Containerd, cri: CriClient, agent: Agent
) -> None:
    pod = _pod("broken", annotation='{"gpu": [{"minor": "one"', hami=True)
    sandbox, pid = _run(cri, pod, "cuda", ["/bin/sleep", "1000"])
    try:
        env = _environ(pid)
        assert env["FROM_POD_SPEC"] == "kept"
        assert "NVIDIA_VISIBLE_DEVICES" not in env and "LD_PRELOAD" not in env
        explained = json.dumps(agent.hookctl("explain", f"gpu-e2e/{pod.name}"))
        assert "GPUEnvInject" in explained and "error:" in explained, explained[:2000]
    finally:
        cri.stop_and_remove_sandbox(sandbox)


def test_containerd_is_the_nri_one(containerd: Containerd) -> None:
    """The tier is only worth its name if the runtime really is containerd >= 1.7 (NRI)."""
    version = containerd.version().split()[2]
    assert tuple(int(p) for p in version.split("~")[0].split(".")[:2]) >= (1, 7), version
    assert shutil.which("runc") or Path("/usr/sbin/runc").exists()
