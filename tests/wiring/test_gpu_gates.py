"""koordlet's GPU and RDMA gates switch hookserver's parts on: the Device report (Accelerators, RDMADevices), the
injection hooks (GPUEnvInject, RDMADeviceInject) and the HAMi-core vGPU collector (HamiCoreVGPUMonitor), and none
of them is left "accepted, not implemented"."""

from __future__ import annotations

from hookserver.config import load_settings
from hookserver.wiring.devices import collector_settings, device_settings
from hookserver.wiring.gates import resolve_feature_gates

GPU_GATES = ("Accelerators", "RDMADevices", "HamiCoreVGPUMonitor", "GPUEnvInject", "RDMADeviceInject")


def _gates(text: str) -> tuple[object, object]:
    settings = load_settings(overrides={"standalone": True, "feature_gates": text,
                                        "hook": {"gpu": {"hami_core_library_path": "/opt/hami/lib/libvgpu.so"}}},
                             environ={})
    _, gates = resolve_feature_gates(settings)
    return settings, gates


def test_every_gpu_gate_is_implemented_and_off_by_default() -> None:
    settings, gates = _gates("")
    for name in GPU_GATES:
        assert gates.values[name].implemented and not gates.enabled(name), name  # type: ignore[attr-defined]
    assert not collector_settings(settings, gates).collectors.hami_vgpu.enabled  # type: ignore[arg-type]
    ds = device_settings(settings, gates)  # type: ignore[arg-type]
    assert (ds.enabled, ds.rdma) == (False, False)


def test_the_gates_turn_the_report_and_the_vgpu_collector_on() -> None:
    settings, gates = _gates("Accelerators=true,RDMADevices=true,HamiCoreVGPUMonitor=true")
    ds = device_settings(settings, gates)  # type: ignore[arg-type]
    assert (ds.enabled, ds.rdma) == (True, True)
    collectors = collector_settings(settings, gates).collectors  # type: ignore[arg-type]
    assert collectors.hami_vgpu.enabled
    assert collectors.hami_vgpu_dir == "/opt/hami/lib/containers"  # where GPUEnvInject mounts from
    assert gates.not_implemented_line().count("HamiCoreVGPUMonitor") == 0  # type: ignore[attr-defined]
