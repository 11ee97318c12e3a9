"""Every feature gate koordlet knows, with koordlet's default, so an operator's `-feature-gates=` list starts
hookserver unchanged.

koordlet registers two sets into one gate table: 28 agent gates (`pkg/features/koordlet_features.go`) and 11
runtime-hook gates (`pkg/koordlet/runtimehooks/config.go`), names and defaults as of koordinator a7a1b76b (after
v1.8.0). `since` is the first release that has the gate; "unreleased" marks the three that only HEAD has, so a
v1.8.0 koordlet would refuse them, but a newer chart may pass them and they are harmless to accept.

This module says which names exist; it does not say which ones hookserver implements. That is derived at
startup from what hookserver's components register (`qos.gates.GateRegistry`): a catalog gate nobody
registers is accepted with its value and reported as "accepted, not implemented". A name in neither is a typo
or a gate from another component, and stops startup.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

__all__ = ["KOORDLET_GATES", "KoordletGate", "closest_gate", "koordlet_gate"]


@dataclass(frozen=True, slots=True)
class KoordletGate:
    """One koordlet gate: its name and default there, the release that added it, and what it switches."""

    name: str
    default: bool
    since: str  # "v1.8", or "unreleased" (only on koordinator's main branch)
    kind: str  # "agent" (pkg/features) or "runtime-hook" (pkg/koordlet/runtimehooks)
    description: str
    stage: str = "alpha"  # koordlet's PreRelease: "alpha" or "beta" (what AllAlpha / AllBeta switch)


# koordlet's Beta gates (`PreRelease: featuregate.Beta` in both tables); every other gate there is Alpha.
_BETA = frozenset({"BECPUSuppress", "CPUBurst", "RdtResctrl", "NodeTopologyReport", "GroupIdentity",
                   "CPUSetAllocator", "BatchResource"})


def _agent(name: str, default: bool, since: str, description: str) -> KoordletGate:
    return KoordletGate(name, default, since, "agent", description, "beta" if name in _BETA else "alpha")


def _hook(name: str, default: bool, since: str, description: str) -> KoordletGate:
    return KoordletGate(name, default, since, "runtime-hook", description, "beta" if name in _BETA else "alpha")


KOORDLET_GATES: tuple[KoordletGate, ...] = (
    # pkg/features/koordlet_features.go (defaultKoordletFeatureGates)
    _agent("AuditEvents", False, "v0.1", "audit recent events"),
    _agent("AuditEventsHTTPHandler", False, "v0.1", "serve recent events on koordlet's port"),
    _agent("BECPUSuppress", True, "v0.1", "suppress BE pods' CPU by node usage"),
    _agent("BECPUManager", False, "v1.4", "manage the BE share pool's cpuset"),
    _agent("BECPUEvict", False, "v0.4", "evict BE pods whose CPU satisfaction is too low"),
    _agent("CPUEvict", False, "v1.7", "evict pods at or below a priority when node CPU usage is high"),
    _agent("CPUAllocatableEvict", False, "v1.8", "evict pods when their CPU requests exceed the batch/mid allocatable"),
    _agent("BEMemoryEvict", False, "v0.2", "evict BE pods by node memory usage"),
    _agent("MemoryEvict", False, "v1.7", "evict pods at or below a priority when node memory usage is high"),
    _agent("MemoryAllocatableEvict", False, "v1.8",
           "evict pods when their memory requests exceed the batch/mid allocatable"),
    _agent("CPUBurst", True, "v0.3", "CPU burst and quota scaling for LS pods"),
    _agent("SystemConfig", False, "v1.2", "node sysctls (min_free_kbytes, watermark_scale_factor, ...)"),
    _agent("RdtResctrl", True, "v0.3", "resctrl L3 CAT and MBA per QoS class"),
    _agent("ResctrlCollector", False, "v1.7", "collect resctrl LLC and memory bandwidth"),
    _agent("CgroupReconcile", False, "v0.2", "memory QoS and other cgroup reconciliation"),
    _agent("NodeTopologyReport", True, "v1.0", "report the NodeResourceTopology object"),
    _agent("Accelerators", False, "v0.6", "GPU devices and their Device object"),
    _agent("RDMADevices", False, "v1.6", "RDMA devices"),
    _agent("CPICollector", False, "v1.1", "collect cycles per instruction"),
    _agent("Libpfm4", False, "v1.4", "perf events through libpfm4"),
    _agent("PSICollector", False, "v1.1", "collect PSI (hookserver collects PSI without a gate)"),
    _agent("BlkIOReconcile", False, "v1.3", "block I/O QoS"),
    _agent("ColdPageCollector", False, "v1.4", "collect cold page usage"),
    _agent("HugePageReport", False, "v1.4", "report hugepages in the NodeResourceTopology"),
    _agent("PodResourcesProxy", False, "v1.6", "proxy kubelet's pod-resources API"),
    _agent("HamiCoreVGPUMonitor", False, "v1.7", "monitor HAMi-core vGPUs"),
    _agent("PerCPUMetric", False, "unreleased", "per-CPU share pool metrics"),
    _agent("NodeMetricPromMetrics", False, "unreleased", "Prometheus series of the NodeMetric usages"),
    # pkg/koordlet/runtimehooks/config.go (defaultRuntimeHooksFG)
    _hook("GroupIdentity", True, "v0.4", "hook: cpu group identity (bvt) by QoS"),
    _hook("CPUSetAllocator", True, "v0.5", "hook: cpusets from koord-scheduler's allocation"),
    _hook("GPUEnvInject", False, "v0.7", "hook: GPU environment from the allocation"),
    _hook("RDMADeviceInject", False, "v1.6", "hook: RDMA devices from the allocation"),
    _hook("BatchResource", True, "v1.1", "hook: BE pods' cgroups from their batch resources"),
    _hook("CPUNormalization", False, "v1.4", "hook: scale LS pods' CPU by the node's normalization ratio"),
    _hook("CoreSched", False, "v1.4", "hook: core scheduling cookies"),
    _hook("TerwayQoS", False, "v1.5", "hook: Terway network QoS"),
    _hook("TCNetworkQoS", False, "v1.6", "hook: tc network QoS"),
    _hook("Resctrl", False, "v1.6", "hook: pod-level resctrl"),
    _hook("OOMScoreAdj", False, "unreleased", "hook: oom_score_adj from pod annotations"),
)

_BY_NAME = {gate.name: gate for gate in KOORDLET_GATES}


def koordlet_gate(name: str) -> KoordletGate | None:
    """The catalog entry of `name` (exact, case-sensitive as koordlet's flag is), or None."""
    return _BY_NAME.get(name)


def closest_gate(name: str, known: list[str] | None = None) -> str:
    """The known name closest to a refused one (`BECpuEvict` -> `BECPUEvict`), or "" when none is close.
    Case is folded first: most typos of these names are case slips."""
    names = known if known is not None else list(_BY_NAME)
    folded = {n.lower(): n for n in names}
    if name.lower() in folded:
        return folded[name.lower()]
    match = difflib.get_close_matches(name.lower(), list(folded), n=1, cutoff=0.75)
    return folded[match[0]] if match else ""
