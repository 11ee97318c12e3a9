"""GPU env, HAMi-core mounts and RDMA devices over the real NRI wire (fake runtime, real ttrpc socket)."""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType
from typing import Any

from hookserver.api import nri_pb2
from hookserver.hooks.plugins.gpu_env import GPUEnvInjectPlugin, GpuEnvSettings
from hookserver.hooks.plugins.rdma_inject import RDMADeviceInjectPlugin
from hookserver.koord_devices import ANNOTATION_DEVICE_ALLOCATED
from hookserver.system.rdma import CharDevice, RdmaDevices
from tests.nri.conftest import container, nri_world, run

ALLOC = {
    "gpu": [
        {"minor": 5, "resources": {"koordinator.sh/gpu-core": 40, "koordinator.sh/gpu-memory-ratio": 50,
                                   "koordinator.sh/gpu-memory": "12Gi"}},
        {"minor": 4, "resources": {"koordinator.sh/gpu-core": 40, "koordinator.sh/gpu-memory-ratio": 50,
                                   "koordinator.sh/gpu-memory": "12Gi"}},
    ],
    "rdma": [{"minor": 0, "id": "0000:09:00.0"}],
}
TABLE = RdmaDevices(
    CharDevice("/dev/infiniband/rdma_cm", 10, 58),
    MappingProxyType({"0000:09:00.0": CharDevice("/dev/infiniband/uverbs0", 231, 192)}),
)


def gpu_pod(annotation: str) -> nri_pb2.PodSandbox:
    pod = nri_pb2.PodSandbox(id="sb-g", name="trainer", uid="uid-g", namespace="ml")
    pod.labels["koordinator.sh/gpu-isolation-provider"] = "HAMi-core"
    pod.annotations[ANNOTATION_DEVICE_ALLOCATED] = annotation
    pod.linux.cgroup_parent = "/kubepods/burstable/poduid-g"
    return pod


async def _create(conn: object, pod: nri_pb2.PodSandbox, name: str, cid: str) -> nri_pb2.CreateContainerResponse:
    reply: nri_pb2.CreateContainerResponse = await conn.call(  # type: ignore[attr-defined]
        "CreateContainer", nri_pb2.CreateContainerRequest(pod=pod, container=container(pod, name, cid)),
        nri_pb2.CreateContainerResponse,
    )
    return reply


def test_adjustment_carries_env_mounts_and_devices(sock_dir: Path) -> None:
    vgpu = sock_dir / "vgpu"
    lib = f"{vgpu}/libvgpu.so"
    vgpu.mkdir()
    Path(lib).write_bytes(b"")  # the library is installed on this node (a missing one is left out: below)
    gpu = GPUEnvInjectPlugin(vgpu_monitor=True, settings=GpuEnvSettings(hami_core_library_path=lib))
    plugins = [gpu, RDMADeviceInjectPlugin(devices=TABLE)]

    async def body() -> None:
        async with nri_world(sock_dir, plugins=plugins) as w:
            conn = await w.runtime.ready_conn()
            pod = gpu_pod(json.dumps(ALLOC))
            await conn.call("RunPodSandbox", nri_pb2.RunPodSandboxRequest(pod=pod), nri_pb2.RunPodSandboxResponse)
            for cid in ("ctr-g1", "ctr-g2"):  # the second call may be answered from the decision memo
                reply = await _create(conn, pod, "cuda", cid)
                env = {kv.key: kv.value for kv in reply.adjust.env}
                assert env == {
                    "NVIDIA_VISIBLE_DEVICES": "5,4",
                    "CUDA_DEVICE_MEMORY_LIMIT": str(12 * 1024**3),
                    "CUDA_DEVICE_SM_LIMIT": "40",
                    "LD_PRELOAD": lib,
                    "CUDA_DEVICE_MEMORY_SHARED_CACHE": f"{vgpu}/uid-g_cuda.cache",
                }
                mounts = [(m.destination, m.type, m.source, list(m.options)) for m in reply.adjust.mounts]
                assert mounts == [
                    (lib, "bind", lib, ["rbind"]),
                    ("/tmp/vgpulock", "bind", "/tmp/vgpulock", ["rbind"]),
                    (str(vgpu), "bind", f"{vgpu}/containers/uid-g_cuda", ["rbind"]),
                ]
                # The monitor's host directory exists before the runtime would mount it, writable by all.
                host_dir = vgpu / "containers" / "uid-g_cuda"
                assert host_dir.is_dir() and host_dir.stat().st_mode & 0o777 == 0o777
                devices = [(d.path, d.type, d.major, d.minor, d.file_mode.value) for d in reply.adjust.linux.devices]
                assert devices == [
                    ("/dev/infiniband/rdma_cm", "c", 10, 58, 0o666),
                    ("/dev/infiniband/uverbs0", "c", 231, 192, 0o666),
                ]
            decisions = [d for d in w.store.audit.decisions() if d.plugin == "GPUEnvInject"]
            assert decisions and "GPUs 5,4" in decisions[-1].reason

    run(body())


def test_malformed_annotation_creates_the_container_without_injection(sock_dir: Path) -> None:
    async def body() -> None:
        async with nri_world(sock_dir, plugins=[GPUEnvInjectPlugin()]) as w:
            conn = await w.runtime.ready_conn()
            pod = gpu_pod('{"gpu": [{"minor": "zero"}]}')
            reply = await _create(conn, pod, "cuda", "ctr-bad")
            assert len(reply.adjust.env) == 0 and len(reply.adjust.mounts) == 0
            decision = [d for d in w.store.audit.decisions() if d.plugin == "GPUEnvInject"][-1]
            assert decision.reason.startswith("error: ") and "gpu[0].minor" in decision.reason

    run(body())


def test_injected_reply_encoding_is_reused_only_for_equal_values() -> None:
    from hookserver.hooks.outcome import ContainerMount
    from hookserver.nri.translate import adjustment_bytes
    from hookserver.resources import Resources

    res = Resources(cpu_shares=2)
    mounts = (ContainerMount("/tmp/vgpulock", "/tmp/vgpulock"),)
    first = adjustment_bytes(res, {"NVIDIA_VISIBLE_DEVICES": "0,1"}, mounts)
    again = adjustment_bytes(res, dict({"NVIDIA_VISIBLE_DEVICES": "0,1"}), mounts)  # equal, not identical
    other = adjustment_bytes(res, {"NVIDIA_VISIBLE_DEVICES": "1,0"}, mounts)
    assert first == again and first != other
    decoded = nri_pb2.CreateContainerResponse.FromString(other)
    assert [(kv.key, kv.value) for kv in decoded.adjust.env] == [("NVIDIA_VISIBLE_DEVICES", "1,0")]
    assert decoded.adjust.mounts[0].destination == "/tmp/vgpulock"
    assert decoded.adjust.linux.resources.cpu.shares.value == 2


def test_a_host_directory_that_cannot_be_made_drops_only_its_mount(tmp_path: Path) -> None:
    from hookserver.hooks.outcome import ContainerMount
    from hookserver.nri.hostmounts import prepare_mounts

    (tmp_path / "libvgpu.so").write_bytes(b"")
    lib = ContainerMount("/usr/local/vgpu/libvgpu.so", str(tmp_path / "libvgpu.so"))
    (tmp_path / "containers").mkdir()
    (tmp_path / "containers" / "taken").write_text("a file, not a directory")
    bad = ContainerMount("/usr/local/vgpu", str(tmp_path / "containers" / "taken"),
                         create_under=str(tmp_path / "containers"))
    escape = ContainerMount("/x", str(tmp_path / "containers" / ".." / "etc"), create_under=str(tmp_path / "containers"))
    good = ContainerMount("/usr/local/vgpu", str(tmp_path / "containers" / "u_c"), create_under=str(tmp_path / "containers"))
    assert prepare_mounts((lib, bad, escape, good)) == (lib, good)
    assert (tmp_path / "containers" / "u_c").is_dir() and not (tmp_path / "etc").exists()
    plain = (lib,)
    assert prepare_mounts(plain) is plain  # nothing to prepare: the same tuple


def test_a_bind_mount_of_a_missing_source_is_left_out_not_a_failed_container(tmp_path: Path) -> None:
    """runc refuses to start a container whose bind mount's source is missing (a real containerd 1.7 answered
    "error mounting /tmp/vgpulock ... no such file or directory"). The HAMi-core library not installed on this
    node drops that mount only; HAMi's lock directory is created, as the monitor's cache directory is."""
    from hookserver.hooks.outcome import ContainerMount
    from hookserver.nri.hostmounts import prepare_mounts

    missing = ContainerMount("/usr/local/vgpu/libvgpu.so", str(tmp_path / "not-installed" / "libvgpu.so"))
    lock = ContainerMount("/tmp/vgpulock", str(tmp_path / "vgpulock"), create_under=str(tmp_path))
    assert prepare_mounts((missing, lock)) == (lock,)
    assert (tmp_path / "vgpulock").is_dir() and (tmp_path / "vgpulock").stat().st_mode & 0o777 == 0o777
    lock_mount = GPUEnvInjectPlugin()._hami_mounts[1]
    assert (lock_mount.destination, lock_mount.create_under) == ("/tmp/vgpulock", "/tmp")


def test_the_protected_path_carries_the_same_mounts_and_devices(sock_dir: Path, monkeypatch: Any) -> None:
    """While a hook is suspect the inline path hands calls to the worker path (`handlers.create_container`)."""
    import hookserver.nri.handlers as handlers

    built: list[int] = []
    real = handlers.adjustment_for

    def spy(*args: Any) -> nri_pb2.CreateContainerResponse:
        built.append(len(args))
        return real(*args)

    monkeypatch.setattr(handlers, "adjustment_for", spy)
    vgpu = sock_dir / "vgpu"
    vgpu.mkdir()
    (vgpu / "libvgpu.so").write_bytes(b"")
    gpu = GPUEnvInjectPlugin(vgpu_monitor=True, settings=GpuEnvSettings(hami_core_library_path=f"{vgpu}/libvgpu.so"))

    async def body() -> None:
        async with nri_world(sock_dir, plugins=[gpu, RDMADeviceInjectPlugin(devices=TABLE)]) as w:
            w.dispatcher.breakers.needs_guard = lambda: True  # type: ignore[method-assign]
            conn = await w.runtime.ready_conn()
            reply = await _create(conn, gpu_pod(json.dumps(ALLOC)), "cuda", "ctr-p")
            assert {kv.key: kv.value for kv in reply.adjust.env}["NVIDIA_VISIBLE_DEVICES"] == "5,4"
            assert [m.source for m in reply.adjust.mounts][-1] == f"{vgpu}/containers/uid-g_cuda"
            assert (vgpu / "containers" / "uid-g_cuda").is_dir()
            assert [d.path for d in reply.adjust.linux.devices] == ["/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs0"]
            assert built == [4]  # the worker path built it, with mounts and devices

    run(body())


def test_a_source_found_is_taken_as_there_for_a_second(tmp_path: Path) -> None:
    """The same library and lock directory come with every HAMi-core container: creating-or-confirming them on each
    CreateContainer was most of what injection cost (26 of 42 us, p50). A found source is trusted for
    CONFIRMED_FOR_S, then looked at (and made) again."""
    from hookserver.hooks.outcome import ContainerMount
    from hookserver.nri.hostmounts import CONFIRMED_FOR_S, forget_confirmed, prepare_mounts

    forget_confirmed()
    calls: list[str] = []

    def ensure(path: str, *, under: str) -> None:
        calls.append(path)
        Path(path).mkdir(exist_ok=True)

    now = [100.0]
    lock = ContainerMount("/tmp/vgpulock", str(tmp_path / "vgpulock"), create_under=str(tmp_path))
    mounts = (lock,)
    assert prepare_mounts(mounts, ensure=ensure, clock=lambda: now[0]) is mounts
    now[0] += CONFIRMED_FOR_S / 2
    assert prepare_mounts(mounts, ensure=ensure, clock=lambda: now[0]) is mounts
    assert calls == [lock.source]  # the second call looked at nothing
    now[0] += CONFIRMED_FOR_S
    (tmp_path / "vgpulock").rmdir()  # removed by hand: made again at the next look
    assert prepare_mounts(mounts, ensure=ensure, clock=lambda: now[0]) is mounts
    assert calls == [lock.source, lock.source] and (tmp_path / "vgpulock").is_dir()
    missing = ContainerMount("/usr/local/vgpu/libvgpu.so", str(tmp_path / "absent.so"))
    assert prepare_mounts((missing,), clock=lambda: now[0]) == ()
    assert prepare_mounts((missing,), clock=lambda: now[0]) == ()  # a miss is never remembered
    forget_confirmed()
