"""GPUEnvInject through a real containerd 1.7: hookserver is containerd's NRI plugin, and the environment and
mounts it adjusts are what the container's process really has (`/proc/<pid>/environ`, its mount namespace).
Pods are created through CRI as the kubelet would."""

from __future__ import annotations

import json
from pathlib import Path

from tests.containerd.agent import Agent, environ, pod_spec, run_container, wait_for
from tests.containerd.cri import CriClient
from tests.containerd.runtime import Containerd

ANNOTATION = "scheduling.koordinator.sh/device-allocated"
HAMI = {"koordinator.sh/gpu-isolation-provider": "HAMi-core"}
GiB = 1 << 30


def test_scheduler_chosen_gpus_and_hami_limits_reach_the_container(
    containerd: Containerd, cri: CriClient, agent: Agent
) -> None:
    lib = agent.hami_library
    allocation = {"gpu": [
        {"minor": 1, "resources": {"koordinator.sh/gpu-core": 30, "koordinator.sh/gpu-memory": "6Gi",
                                   "koordinator.sh/gpu-memory-ratio": 25}},
        {"minor": 0, "resources": {"koordinator.sh/gpu-core": 30, "koordinator.sh/gpu-memory": "6Gi",
                                   "koordinator.sh/gpu-memory-ratio": 25}},
    ]}
    pod = pod_spec("trainer", labels=HAMI, annotations={ANNOTATION: json.dumps(allocation)})
    # The process writes through the monitor's mount: a file in the library's directory inside the container.
    sandbox, _, pid = run_container(cri, pod, "cuda", ["/bin/sh", "-c", f"echo probe > {lib.parent}/probe; exec sleep 1000"])
    try:
        env = environ(pid)
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
        assert wait_for((host_dir / "probe").exists), sorted(str(p) for p in lib.parent.rglob("*"))
        assert (host_dir / "probe").read_text() == "probe\n"
        # HAMi's shared lock directory is the host's (created by the NRI door: runc fails a missing source).
        assert Path(f"/proc/{pid}/root/tmp/vgpulock").is_dir()
        explained = json.dumps(agent.hookctl("explain", f"{pod.namespace}/{pod.name}"))
        assert "NVIDIA_VISIBLE_DEVICES" in explained and "1,0" in explained
    finally:
        cri.stop_and_remove_sandbox(sandbox)


def test_a_pod_without_an_allocation_gets_no_gpu_env(containerd: Containerd, cri: CriClient, agent: Agent) -> None:
    pod = pod_spec("web")
    sandbox, _, pid = run_container(cri, pod, "app", ["/bin/sleep", "1000"])
    try:
        env = environ(pid)
        assert env["FROM_POD_SPEC"] == "kept"
        assert not {"NVIDIA_VISIBLE_DEVICES", "LD_PRELOAD", "CUDA_DEVICE_MEMORY_LIMIT"} & env.keys()
    finally:
        cri.stop_and_remove_sandbox(sandbox)


def test_a_malformed_allocation_still_creates_the_container_and_says_why(
    containerd: Containerd, cri: CriClient, agent: Agent
) -> None:
    pod = pod_spec("broken", labels=HAMI, annotations={ANNOTATION: '{"gpu": [{"minor": "one"'})
    sandbox, _, pid = run_container(cri, pod, "cuda", ["/bin/sleep", "1000"])
    try:
        env = environ(pid)
        assert env["FROM_POD_SPEC"] == "kept"
        assert "NVIDIA_VISIBLE_DEVICES" not in env and "LD_PRELOAD" not in env
        explained = json.dumps(agent.hookctl("explain", f"{pod.namespace}/{pod.name}"))
        assert "GPUEnvInject" in explained and "error:" in explained, explained[:2000]
    finally:
        cri.stop_and_remove_sandbox(sandbox)


def test_containerd_is_the_nri_one(containerd: Containerd) -> None:
    """The tier is only worth its name if the runtime really is containerd >= 1.7 (NRI)."""
    version = containerd.version().split()[2]
    assert tuple(int(p) for p in version.split("~")[0].split(".")[:2]) >= (1, 7), version
