"""Hook plugins. Each defines only the stage methods it handles (see hookserver.hooks.registry)."""

from collections.abc import Callable

from hookserver.hooks.plugins.batchresource import BatchResourcePlugin
from hookserver.hooks.plugins.cpunormalization import CPUNormalizationPlugin
from hookserver.hooks.plugins.cpuset import CPUSetAllocatorPlugin
from hookserver.hooks.plugins.gpu_env import GPUEnvInjectPlugin, GpuEnvSettings
from hookserver.hooks.plugins.group_identity import CPU_PRIORITY_FILES, GroupIdentityPlugin
from hookserver.hooks.plugins.rdma_inject import RDMADeviceInjectPlugin
from hookserver.system.rdma import RdmaDevices
from hookserver.system.topology import CpuInfo

__all__ = [
    "BatchResourcePlugin",
    "CPUNormalizationPlugin",
    "CPUSetAllocatorPlugin",
    "CPU_PRIORITY_FILES",
    "GPUEnvInjectPlugin",
    "GpuEnvSettings",
    "GroupIdentityPlugin",
    "RDMADeviceInjectPlugin",
    "default_plugins",
    "plugin_gates",
]


def plugin_gates() -> list[str]:
    """The koordlet runtime-hook gates the default plugins implement (registered as implemented, so a
    `BatchResource=false` is honoured rather than reported as not implemented)."""
    return [
        BatchResourcePlugin.feature_gate, CPUSetAllocatorPlugin.feature_gate, CPUNormalizationPlugin.feature_gate,
        GPUEnvInjectPlugin.feature_gate, RDMADeviceInjectPlugin.feature_gate,
    ]


def default_plugins(
    gate_enabled: Callable[[str], bool] | None = None,
    *,
    cpus: tuple[CpuInfo, ...] = (),
    unset_cpu_quota: bool = True,
    gpu: GpuEnvSettings | None = None,
    rdma: RdmaDevices | None = None,
    rdma_reread: Callable[[], RdmaDevices] | None = None,
    cpu_priority_files: frozenset[str] = frozenset(),
    kubelet_allocated: Callable[[], frozenset[int]] | None = None,
) -> list[object]:
    """The plugins the daemon registers by default (koordlet's default gates that apply here), each told
    whether its gate is on (all on when no gate values are given). `cpus` is the node's CPU topology (the
    share pool and the check of a bound cpuset need it); `unset_cpu_quota` is koordlet's
    `--disable-unset-cpu-quota` negated. `gpu` is the GPU injection's settings, `rdma` the node's RDMA device
    table (`hookserver.system.rdma.read_rdma_devices`, read at start) and `rdma_reread` how to read it again
    when an allocation names a device the table lacks (a VF created since). `cpu_priority_files` are the
    CPU-priority files the kernel has (`cpu.bvt_warp_ns`, `cpu.idle`: `hookserver.wiring.hooks.
    cpu_priority_files`); with any of them the GroupIdentity hook applies a new pod's priority at
    PreRunPodSandbox, gated by `GroupIdentity` as the QoS reconciler is (that gate is the reconciler's)."""

    def on(name: str) -> bool:
        return True if gate_enabled is None else gate_enabled(name)

    # CPUNormalization is off by default (koordlet's default) and stands down while CPUBurst owns LS quota
    # (koordinator#2306/#3176): with no gate values it is built off.
    normalization = gate_enabled is not None and gate_enabled("CPUNormalization") and not gate_enabled("CPUBurst")
    # GPUEnvInject, RDMADeviceInject and HamiCoreVGPUMonitor are off by default in koordlet: off too when no gate
    # values are given. An injection hook whose gate is off is not registered at all: subscribed, it would run on
    # every CreateContainer of a CPU node (the default plugin set is not memoizable) to say "off".
    def off_by_default(name: str) -> bool:
        return gate_enabled is not None and gate_enabled(name)

    plugins: list[object] = [
        BatchResourcePlugin(enabled=on(BatchResourcePlugin.feature_gate)),
        CPUNormalizationPlugin(enabled=normalization),
        CPUSetAllocatorPlugin(
            enabled=on(CPUSetAllocatorPlugin.feature_gate), cpus=cpus, unset_cpu_quota=unset_cpu_quota,
            kubelet_allocated=kubelet_allocated,
        ),
    ]
    # Registered only where the kernel has a file to write: elsewhere it could only say "unsupported" on every pod.
    if cpu_priority_files & frozenset(CPU_PRIORITY_FILES):
        plugins.append(GroupIdentityPlugin(
            enabled=on(GroupIdentityPlugin.feature_gate), kernel_files=cpu_priority_files
        ))
    if off_by_default(GPUEnvInjectPlugin.feature_gate):
        plugins.append(GPUEnvInjectPlugin(vgpu_monitor=off_by_default("HamiCoreVGPUMonitor"), settings=gpu))
    if off_by_default(RDMADeviceInjectPlugin.feature_gate):
        plugins.append(RDMADeviceInjectPlugin(devices=rdma, reread=rdma_reread))
    return plugins
