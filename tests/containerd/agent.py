"""hookserver as the NRI plugin of the tier's containerd, and the pod helpers the tier's tests share.

The agent runs as `hookserver serve --standalone` with koordlet's GPU gates (Accelerators, GPUEnvInject,
HamiCoreVGPUMonitor) and the fake `libnvidia-ml.so.1` as its NVML (two GPUs, minors 0 and 1), so the hooks' GPU
inventory is the one the collector read through pynvml; its batch-resource hook is on as always.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from tests.collectors.fake_nvml import build_fake_nvml, fake_gpu, worker_env, write_fixture
from tests.containerd.cri import CriClient, PodSpec
from tests.containerd.runtime import CGROUP_PARENT, IMAGE

REPO = Path(__file__).resolve().parents[2]
POD_ENV = {"FROM_POD_SPEC": "kept"}  # every test container's own env: an adjustment must keep it


class Agent:
    """`hookserver serve --standalone` as containerd's NRI plugin, loading the fake NVML."""

    def __init__(self, home: Path, nri_socket: Path, *, drop_env: str) -> None:
        self.home = home
        self.nri_socket = nri_socket
        self.hami_library = home / "vgpu" / "libvgpu.so"
        self.debug_socket = home / "debug.sock"
        self.log_path = home / "agent.log"
        nvml = build_fake_nvml(home / "nvml")
        fixture = home / "gpus.json"
        write_fixture(fixture, {"driver_version": "550.54.15", "devices": [fake_gpu(0), fake_gpu(1)]})
        self._env = worker_env(nvml, fixture)
        self._env.pop(drop_env, None)  # the tier's switch is not an agent setting (HOOKSERVER_* names are)
        self._env.update(HOOKSERVER_NRI__BACKOFF_INITIAL_S="0.05",
                         HOOKSERVER_HOOK__GPU__HAMI_CORE_LIBRARY_PATH=str(self.hami_library))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        args = [
            sys.executable, "-m", "hookserver.cli.serve", "serve", "--standalone",
            "--nri-socket", str(self.nri_socket), "--hook-socket", str(self.home / "hook.sock"),
            "--debug-socket", str(self.debug_socket), "--registration-dir", str(self.home / "reg"),
            "--state-dir", str(self.home / "state"), "--metrics-addr", "127.0.0.1:0",
            "--slo-file", str(self.home / "slo.yaml"), "--node-name", "ctd-node",
            "--feature-gates", "Accelerators=true,GPUEnvInject=true,HamiCoreVGPUMonitor=true",
        ]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, cwd=REPO, env=self._env, stdout=log, stderr=subprocess.STDOUT)

    def hookctl(self, *argv: str) -> Any:
        done = subprocess.run(
            [sys.executable, "-c", "from hookserver.cli.hookctl import main; raise SystemExit(main())",
             "--socket", str(self.debug_socket), "-o", "json", *argv],
            cwd=REPO, capture_output=True, text=True, timeout=30, check=False,
        )
        if done.returncode != 0:
            raise AssertionError(f"hookctl {' '.join(argv)} exited {done.returncode}: {done.stderr}")
        return json.loads(done.stdout)

    def nri_status(self) -> dict[str, Any]:
        try:
            return dict(self.hookctl("status").get("nri") or {})
        except (AssertionError, json.JSONDecodeError, subprocess.TimeoutExpired):
            return {}

    def wait_ready(self, *, connections: int = 1, timeout_s: float = 60.0) -> dict[str, Any]:
        """Until the agent's NRI connection number `connections` is registered and synchronized."""
        deadline = time.monotonic() + timeout_s
        status: dict[str, Any] = {}
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                break
            if self.debug_socket.exists():
                status = self.nri_status()
                if status.get("state") == "ready" and status.get("connections", 0) >= connections:
                    return status
            time.sleep(0.2)
        raise AssertionError(f"the agent's NRI connection {connections} never became ready: {status}\n"
                             f"{self.log_path.read_text()[-4000:]}")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=30)


def pod_spec(name: str, *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
             qos_dir: str = "") -> PodSpec:
    """A pod under the tier's cgroup parent (`/<CGROUP_PARENT>[/<qos_dir>]/pod<uid>`, the cgroupfs layout)."""
    uid = str(uuid.uuid4())
    parent = "/" + "/".join([CGROUP_PARENT, *([qos_dir] if qos_dir else []), f"pod{uid}"])
    return PodSpec(name=name, uid=uid, namespace="ctd-e2e", cgroup_parent=parent, labels=labels or {},
                   annotations=annotations or {})


def run_container(cri: CriClient, pod: PodSpec, container: str, command: list[str],
                  sandbox: str = "") -> tuple[str, str, int]:
    """Run the pod's sandbox (unless given) and one started container: (sandbox id, container id, pid). A
    failure after the sandbox was made removes it."""
    made = not sandbox
    sandbox = sandbox or cri.run_pod_sandbox(pod)
    try:
        cid = cri.create_container(sandbox, pod, container, IMAGE, command, POD_ENV)
        cri.start_container(cid)
        pid = cri.container_pid(cid)
        # StartContainer returns once runc has released its init, which may not have exec'ed the command yet: until
        # then /proc/<pid> is `runc init` with runc's environment (seen once under load: no FROM_POD_SPEC).
        if not wait_for(lambda: _exec_done(pid), timeout_s=10):
            raise AssertionError(f"container {container}: pid {pid} never exec'ed {command}")
        return sandbox, cid, pid
    except BaseException:
        if made:
            cri.stop_and_remove_sandbox(sandbox)
        raise


def _exec_done(pid: int) -> bool:
    """The process runs the image's binary (every program of the tier's image is busybox), not runc's init."""
    try:
        return os.readlink(f"/proc/{pid}/exe").endswith("/busybox")
    except OSError:
        return False


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


def wait_for(predicate: Any, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return bool(predicate())
