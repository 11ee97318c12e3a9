"""The reconcilers this agent runs, and the feature gates they declare. Add a reconciler here (one line)
and its gates count as implemented (every koordlet gate is settable with `--feature-gates`; the others are
accepted and reported as not implemented).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from qos.blkio import BlkIO
from qos.cpu.burst import CPUBurst
from qos.eviction.cpu import CPUEvict
from qos.cpu.suppress import CPUSuppress
from qos.group_identity import GroupIdentity
from qos.isolation import CoreSched, OOMScoreAdj, PodResctrl, TCNetworkQoS
from hookserver.featuregates import FeatureGate, GateRegistry
from qos.eviction.memory import MemoryEvict
from qos.memory_qos import MemoryQoS
from qos.framework.reconciler import Reconciler
from qos.resctrl import Resctrl
from qos.settings import QoSSettings
from qos.system_config import SystemConfig

__all__ = ["RECONCILER_TYPES", "build_reconcilers", "gate_registry"]

# In koordlet's order (pkg/koordlet/qosmanager/plugins/register.go). Issue 10 appends CPU burst, memory
# QoS (CgroupReconcile), SystemConfig, BlkIOReconcile and RdtResctrl here.
RECONCILER_TYPES: list[Callable[..., Reconciler]] = [CPUSuppress, CPUEvict, MemoryEvict]
# Part 2 (issue 10): CPU burst, memory QoS (CgroupReconcile), system config, blkio, resctrl.
RECONCILER_TYPES += [CPUBurst, MemoryQoS, SystemConfig, BlkIO, Resctrl]
# Issue 20: CPU priority by class (bvt, or BE cpu.idle).
RECONCILER_TYPES += [GroupIdentity]
# Issue 38: isolation beyond CPU and memory (qos/isolation/).
RECONCILER_TYPES += [OOMScoreAdj, PodResctrl, TCNetworkQoS, CoreSched]


def build_reconcilers(
    settings: QoSSettings | None = None, *, types: Sequence[Callable[..., Reconciler]] | None = None
) -> list[Reconciler]:
    """One instance per type, with the per-reconciler interval and cool-down from `qos.reconcilers`."""
    settings = settings or QoSSettings()
    out: list[Reconciler] = []
    for factory in RECONCILER_TYPES if types is None else types:
        name = getattr(factory, "name", "")
        per = settings.reconcilers.get(name)
        out.append(factory(
            interval_s=per.interval_s if per is not None else None,
            cooldown_s=per.cooldown_s if per is not None else None,
        ))
    return out


def gate_registry(reconcilers: Sequence[Reconciler], *, also: Iterable[FeatureGate] = ()) -> GateRegistry:
    """Every gate every reconciler declares (a multi-mode reconciler declares one per mode in `gates`), plus
    `also` (gates other components implement, e.g. the BatchResource hook's), over koordlet's catalog of gates
    accepted but not implemented."""
    return GateRegistry([*(g for r in reconcilers for g in r.gates), *also])
