"""GPUEnvInject and RDMADeviceInject on scripted requests: envs, mounts and devices computed by hand."""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType

import pytest

from hookserver.hooks.context import ContainerRequest, PodRequest, RequestSource
from hookserver.hooks.outcome import ContainerDevice, ContainerMount
from hookserver.hooks.plugins import default_plugins
from hookserver.hooks.plugins.gpu_env import GPUEnvInjectPlugin, GpuEnvSettings
from hookserver.hooks.plugins.rdma_inject import RDMADeviceInjectPlugin
from hookserver.hooks.registry import HookRegistry
from hookserver.hooks.runner import run_stage
from hookserver.hooks.stages import Stage
from hookserver.koord_devices import ANNOTATION_DEVICE_ALLOCATED, NodeGpu
from hookserver.system.rdma import CharDevice, RdmaDevices, read_rdma_devices
from hookserver.system.roots import SystemRoots
from hookserver.view import NodeView

HAMI = {"koordinator.sh/gpu-isolation-provider": "HAMi-core"}
SHARED = {"gpu": [{"minor": 2, "resources": {
    "koordinator.sh/gpu-core": 30, "koordinator.sh/gpu-memory-ratio": 25, "koordinator.sh/gpu-memory": "4Gi"}}]}
WHOLE = {"gpu": [{"minor": 3, "resources": {"koordinator.sh/gpu-memory-ratio": 100}},
                 {"minor": 1, "resources": {"koordinator.sh/gpu-memory-ratio": 100}}]}


def request(
    alloc: object | None, labels: dict[str, str] | None = None, *, source: RequestSource = RequestSource.NRI,
    name: str = "main",
) -> ContainerRequest:
    annotations = {} if alloc is None else {
        ANNOTATION_DEVICE_ALLOCATED: alloc if isinstance(alloc, str) else json.dumps(alloc)}
    pod = PodRequest("default", "p", "uid-9", labels=MappingProxyType(labels or {}),
                     annotations=MappingProxyType(annotations), source=source)
    return ContainerRequest(pod, name, source=source)


VIEW = NodeView.build()


def test_minors_in_the_annotations_order_and_nothing_else_without_hami() -> None:
    result = GPUEnvInjectPlugin().pre_create_container(request(WHOLE), VIEW)
    assert result.applied and dict(result.envs) == {"NVIDIA_VISIBLE_DEVICES": "3,1"}
    assert result.mounts == ()


def test_hami_core_shared_gpu_gets_limits_preload_and_koordlets_mounts() -> None:
    result = GPUEnvInjectPlugin().pre_create_container(request(SHARED, HAMI), VIEW)
    assert dict(result.envs) == {
        "NVIDIA_VISIBLE_DEVICES": "2",
        "CUDA_DEVICE_MEMORY_LIMIT": str(4 * 1024**3),  # Go's Value() of 4Gi, a plain integer
        "CUDA_DEVICE_SM_LIMIT": "30",
        "LD_PRELOAD": "/usr/local/vgpu/libvgpu.so",
    }
    assert result.mounts == (
        ContainerMount("/usr/local/vgpu/libvgpu.so", "/usr/local/vgpu/libvgpu.so", "bind", ("rbind",)),
        ContainerMount("/tmp/vgpulock", "/tmp/vgpulock", "bind", ("rbind",), create_under="/tmp"),
    )


def test_hami_core_whole_gpu_and_label_value_must_match_exactly() -> None:
    plugin = GPUEnvInjectPlugin()
    whole = plugin.pre_create_container(request(WHOLE, HAMI), VIEW)
    assert dict(whole.envs) == {"NVIDIA_VISIBLE_DEVICES": "3,1"} and whole.mounts == ()
    other = plugin.pre_create_container(request(SHARED, {"koordinator.sh/gpu-isolation-provider": "hami-core"}), VIEW)
    assert dict(other.envs) == {"NVIDIA_VISIBLE_DEVICES": "2"}


def test_vgpu_monitor_adds_the_per_container_cache_and_its_host_directory() -> None:
    settings = GpuEnvSettings(hami_core_library_path="/opt/hami/lib/libvgpu.so")
    result = GPUEnvInjectPlugin(vgpu_monitor=True, settings=settings).pre_create_container(
        request(SHARED, HAMI, name="worker"), VIEW
    )
    assert result.envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"] == "/opt/hami/lib/uid-9_worker.cache"
    assert result.envs["LD_PRELOAD"] == "/opt/hami/lib/libvgpu.so"
    assert result.mounts[-1] == ContainerMount(
        "/opt/hami/lib", "/opt/hami/lib/containers/uid-9_worker", create_under="/opt/hami/lib/containers")
    assert result.inputs["hami_cache_host_dir"] == "/opt/hami/lib/containers/uid-9_worker"


def test_vgpu_monitor_refuses_a_container_name_that_would_leave_its_directory() -> None:
    result = GPUEnvInjectPlugin(vgpu_monitor=True).pre_create_container(request(SHARED, HAMI, name="../../etc"), VIEW)
    assert result.applied and "CUDA_DEVICE_MEMORY_SHARED_CACHE" not in result.envs
    assert [m.destination for m in result.mounts if m.create_under] == ["/tmp/vgpulock"]  # no cache dir mount
    assert "vGPU monitor cache left out" in result.reason


@pytest.mark.parametrize(
    ("alloc", "labels", "needle"),
    [
        ('{"gpu": [{"minor": "x"}]}', None, "gpu[0].minor"),
        ({"gpu": [{"minor": 0, "resources": {"koordinator.sh/gpu-memory": "1Gi"}}]}, HAMI, "gpu-memory-ratio"),
        ({"gpu": [{"minor": 0, "resources": {"koordinator.sh/gpu-memory-ratio": 50}}]}, HAMI, "koordinator.sh/gpu-memory"),
    ],
)
def test_malformed_allocation_injects_nothing_and_says_why(alloc: object, labels: dict[str, str] | None, needle: str) -> None:
    result = GPUEnvInjectPlugin().pre_create_container(request(alloc, labels), VIEW)
    assert not result.applied and result.reason.startswith("error: ") and needle in result.reason
    assert not result.envs and not result.mounts


def test_unknown_and_unhealthy_minors_are_named() -> None:
    view = NodeView.build(gpus={1: NodeGpu(1, "GPU-b", healthy=False, reason="XID 79"), 0: NodeGpu(0, "GPU-a")})
    result = GPUEnvInjectPlugin().pre_create_container(request(WHOLE), view)
    assert result.applied and result.envs["NVIDIA_VISIBLE_DEVICES"] == "3,1"  # the scheduler's choice, as koordlet
    assert "minor 3 is not a GPU of this node" in result.reason
    assert "minor 1 (GPU-b) is unhealthy: XID 79" in result.reason
    healthy = GPUEnvInjectPlugin().pre_create_container(request({"gpu": [{"minor": 0}]}), view)
    assert "warning" not in healthy.reason


def test_proxy_door_says_the_mounts_were_not_carried() -> None:
    result = GPUEnvInjectPlugin().pre_create_container(request(SHARED, HAMI, source=RequestSource.PROXY), VIEW)
    assert result.envs["LD_PRELOAD"] == "/usr/local/vgpu/libvgpu.so"
    assert "mounts not carried by the proxy door" in result.reason and "/tmp/vgpulock" in result.reason


def test_gate_off_no_annotation_and_no_gpu_are_skips() -> None:
    assert not GPUEnvInjectPlugin(enabled=False).pre_create_container(request(SHARED), VIEW).applied
    assert not GPUEnvInjectPlugin().pre_create_container(request(None), VIEW).applied
    assert not GPUEnvInjectPlugin().pre_create_container(request({"rdma": []}), VIEW).applied


def test_settings_refuse_a_relative_library_path() -> None:
    with pytest.raises(ValueError, match="absolute"):
        GpuEnvSettings(hami_core_library_path="vgpu/libvgpu.so")


# -- RDMA ------------------------------------------------------------------------------------------------
TABLE = RdmaDevices(
    CharDevice("/dev/infiniband/rdma_cm", 10, 58),
    MappingProxyType({
        "0000:09:00.0": CharDevice("/dev/infiniband/uverbs0", 231, 192),
        "0000:09:00.3": CharDevice("/dev/infiniband/uverbs3", 231, 195),
        "0000:10:00.0": CharDevice("/dev/infiniband/uverbs1", 231, 193),
    }),
)
RDMA = {"rdma": [
    {"minor": 0, "id": "0000:10:00.0"},
    {"minor": 1, "id": "0000:09:00.0", "extension": {"vfs": [{"minor": 3, "busID": "0000:09:00.3"}]}},
]}


def test_rdma_cm_first_then_pf_or_its_vfs() -> None:
    result = RDMADeviceInjectPlugin(devices=TABLE).pre_create_container(request(RDMA), VIEW)
    assert result.applied
    assert result.devices == (
        ContainerDevice("/dev/infiniband/rdma_cm", 10, 58, "c", 0o666),
        ContainerDevice("/dev/infiniband/uverbs1", 231, 193, "c", 0o666),
        ContainerDevice("/dev/infiniband/uverbs3", 231, 195, "c", 0o666),  # the VF, not the PF uverbs0
    )


def test_rdma_unknown_function_and_proxy_door() -> None:
    plugin = RDMADeviceInjectPlugin(devices=TABLE)
    missing = plugin.pre_create_container(request({"rdma": [{"id": "0000:99:00.0"}]}), VIEW)
    assert not missing.applied and missing.reason.startswith("error: ") and "0000:99:00.0" in missing.reason
    assert missing.devices == ()
    proxy = plugin.pre_create_container(request(RDMA, source=RequestSource.PROXY), VIEW)
    assert not proxy.applied and "uverbs3" in proxy.reason and proxy.devices == ()
    no_cm = RDMADeviceInjectPlugin(devices=RdmaDevices()).pre_create_container(request(RDMA), VIEW)
    assert no_cm.reason.startswith("error: ") and "rdma_cm" in no_cm.reason


def test_rdma_table_from_a_sysfs_tree(tmp_path: Path) -> None:
    (tmp_path / "class/misc/rdma_cm").mkdir(parents=True)
    (tmp_path / "class/misc/rdma_cm/dev").write_text("10:58\n")
    verbs = tmp_path / "bus/pci/devices/0000:09:00.0/infiniband_verbs/uverbs0"
    verbs.mkdir(parents=True)
    (verbs / "dev").write_text("231:192\n")
    (tmp_path / "bus/pci/devices/0000:00:1f.0").mkdir(parents=True)  # not RDMA
    table = read_rdma_devices(SystemRoots(sys=str(tmp_path)))
    assert table.rdma_cm == CharDevice("/dev/infiniband/rdma_cm", 10, 58)
    assert dict(table.uverbs_by_bus_id) == {"0000:09:00.0": CharDevice("/dev/infiniband/uverbs0", 231, 192)}
    assert read_rdma_devices(SystemRoots(sys=str(tmp_path / "none"))) == RdmaDevices()


def test_a_vf_created_after_start_is_found_by_reading_sysfs_again(tmp_path: Path) -> None:
    """The table is read at start; SR-IOV VFs usually appear later (an operator creates them). A pod placed on
    one was refused for the agent's whole life; now a miss reads sysfs again, at most once per interval."""
    (tmp_path / "class/misc/rdma_cm").mkdir(parents=True)
    (tmp_path / "class/misc/rdma_cm/dev").write_text("10:58\n")

    def add_function(bus_id: str, name: str, minor: int) -> None:
        verbs = tmp_path / "bus/pci/devices" / bus_id / "infiniband_verbs" / name
        verbs.mkdir(parents=True)
        (verbs / "dev").write_text(f"231:{minor}\n")

    add_function("0000:09:00.0", "uverbs0", 192)
    roots = SystemRoots(sys=str(tmp_path))
    now = [100.0]
    plugin = RDMADeviceInjectPlugin(devices=read_rdma_devices(roots), reread=lambda: read_rdma_devices(roots),
                                    reread_after_s=5.0, clock=lambda: now[0])
    on_vf = {"rdma": [{"minor": 0, "id": "0000:09:00.0", "extension": {"vfs": [{"minor": 2, "busID": "0000:09:00.2"}]}}]}
    missing = plugin.pre_create_container(request(on_vf), VIEW)
    assert missing.reason.startswith("error: ") and "0000:09:00.2" in missing.reason and plugin.rereads == 1
    add_function("0000:09:00.2", "uverbs2", 194)  # the operator creates the VF
    now[0] += 1.0
    assert not plugin.pre_create_container(request(on_vf), VIEW).applied  # within the interval: no sysfs walk
    assert plugin.rereads == 1
    now[0] += 5.0
    found = plugin.pre_create_container(request(on_vf), VIEW)
    assert found.applied and [d.path for d in found.devices] == ["/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs2"]
    assert plugin.rereads == 2
    assert plugin.pre_create_container(request(RDMA | {"rdma": [{"minor": 0, "id": "0000:09:00.0"}]}), VIEW).applied
    assert plugin.rereads == 2  # a hit never reads sysfs


# -- both through the registry and runner --------------------------------------------------------------
def test_stage_merges_envs_mounts_and_devices_from_both_plugins() -> None:
    gates = {"GPUEnvInject": True, "RDMADeviceInject": True, "HamiCoreVGPUMonitor": False,
             "BatchResource": True, "CPUSetAllocator": True, "CPUNormalization": False, "CPUBurst": True}
    registry = HookRegistry(default_plugins(gates.__getitem__, rdma=TABLE))  # type: ignore[arg-type]
    alloc = {**SHARED, **RDMA}
    outcome = run_stage(registry, Stage.PRE_CREATE_CONTAINER, request(alloc, HAMI), VIEW)
    assert not outcome.failed
    assert outcome.envs["NVIDIA_VISIBLE_DEVICES"] == "2" and outcome.envs["CUDA_DEVICE_SM_LIMIT"] == "30"
    assert [m.destination for m in outcome.mounts] == ["/usr/local/vgpu/libvgpu.so", "/tmp/vgpulock"]
    assert [d.path for d in outcome.devices] == [
        "/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs1", "/dev/infiniband/uverbs3"]


def test_injection_hooks_with_their_gates_off_are_not_registered() -> None:
    """Off (koordlet's default, and without gate values) they cost a CPU node's CreateContainer nothing."""
    for gates in (None, {"GPUEnvInject": False, "RDMADeviceInject": False}.get):
        names = {getattr(p, "name") for p in default_plugins(gates)}  # type: ignore[arg-type]
        assert "GPUEnvInject" not in names and "RDMADeviceInject" not in names
    on = {getattr(p, "name"): p for p in default_plugins(lambda name: name != "HamiCoreVGPUMonitor")}
    assert on["GPUEnvInject"].enabled and on["RDMADeviceInject"].enabled  # type: ignore[attr-defined]
    assert on["GPUEnvInject"].vgpu_monitor is False  # type: ignore[attr-defined]


def test_kept_decisions_follow_every_input_they_read() -> None:
    plugin = GPUEnvInjectPlugin(vgpu_monitor=True)
    a = plugin.pre_create_container(request(SHARED, HAMI, name="a"), VIEW)
    b = plugin.pre_create_container(request(SHARED, HAMI, name="b"), VIEW)
    assert a.envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"].endswith("uid-9_a.cache")
    assert b.envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"].endswith("uid-9_b.cache")
    assert plugin.pre_create_container(request(SHARED, HAMI, name="a"), VIEW) is a  # kept, not recomputed
    sick = NodeView.build(gpus={2: NodeGpu(2, "GPU-c", healthy=False, reason="fell off the bus")})
    assert "unhealthy: fell off the bus" in plugin.pre_create_container(request(SHARED, HAMI, name="a"), sick).reason
    plain = plugin.pre_create_container(request(SHARED, None, name="a"), VIEW)
    assert "LD_PRELOAD" not in plain.envs  # the isolation label is part of the key
