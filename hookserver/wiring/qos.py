"""The QoS runner as a running agent has it: one owner per knob (checked against the hooks that write),
the snapshot builder over the executor's layout, the system-file executor with the node's recorded
originals, and the eviction backend the mode allows."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry

from hookserver.config import Settings
from hookserver.executor.executor import CgroupExecutor
from hookserver.executor.coresched import CookieExecutor
from hookserver.executor.netcmd import TcExecutor
from hookserver.executor.sysfiles import SystemFileExecutor
from hookserver.featuregates import GateValues
from hookserver.hooks.registry import HookRegistry
from hookserver.informer import Informer
from hookserver.store import StateStore
from hookserver.store.originals import NodeOriginals
from qos.framework.evictions import EvictionGuard, ReportOnlyBackend
from qos.framework.knobs import check_running_features
from qos.framework.metrics import QoSMetrics
from qos.framework.reconciler import Reconciler
from qos.framework.runner import QoSRunner
from qos.snapshot import CgroupView, SnapshotBuilder
from qos.snapshot.tc_reader import TcReader

__all__ = ["QoSParts", "build_qos", "eviction_backend"]

# Hook plugins that write cgroup knobs, and the owner name each holds them under (qos/framework/knobs.py).
_WRITING_HOOKS = (("BatchResource", "batchresource"), ("CPUSetAllocator", "CPUSetAllocator"),
                  ("CPUNormalization", "CPUNormalization"))


@dataclass(frozen=True, slots=True)
class QoSParts:
    runner: QoSRunner
    snapshots: SnapshotBuilder
    originals: NodeOriginals
    system_files: SystemFileExecutor
    knob_owners: dict[str, list[str]]


def build_qos(
    settings: Settings,
    *,
    store: StateStore,
    executor: CgroupExecutor,
    registry: HookRegistry,
    reconcilers: list[Reconciler],
    gates: GateValues,
    informer: Informer,
    prometheus: CollectorRegistry,
) -> QoSParts:
    """One owner per knob first: a conflict refuses to start here, before anything listens (with
    BatchResource=false the hook writes nothing, so it owns nothing)."""
    hooks = [owner for plugin, owner in _WRITING_HOOKS
             if plugin in registry.plugins and getattr(registry.plugins[plugin], "enabled", False)]
    knob_owners = check_running_features(reconcilers, hooks)
    layout = executor.layout
    view = CgroupView(hierarchy_root=layout.hierarchy_root, v2=layout.writes_v2, driver=layout.driver,
                      runtime=layout.runtime)
    originals = NodeOriginals(settings.state_dir)
    system_files = SystemFileExecutor(
        {"proc_sys": os.path.join(settings.proc_root, "sys"), "sys": settings.sys_root,
         "resctrl": os.path.join(settings.sys_root, "fs", "resctrl"), "proc": settings.proc_root,
         "net_cls": layout.hierarchy_root("net_cls")},
        store=store, originals=originals,
    )
    collect_interval_s = max(
        settings.collectors.node_resource.interval_s, settings.collectors.pod_resource.interval_s,
        settings.collectors.be_resource.interval_s,
    )
    tc_reader = TcReader(proc_root=settings.proc_root, interface=settings.qos.network_interface)
    snapshots = SnapshotBuilder.for_node(
        store, view, proc_root=settings.proc_root, sys_root=settings.sys_root, originals=originals,
        gate_on=gates.enabled, collect_interval_s=collect_interval_s,
        tc=tc_reader,
    )
    guard = EvictionGuard(eviction_backend(settings, informer=informer, executor=executor, store=store),
                          cooldown_s=settings.qos.eviction_cooldown_s)
    runner = QoSRunner(
        reconcilers, gates=gates, snapshots=snapshots, store=store, executor=executor, evictions=guard,
        settings=settings.qos, metrics=QoSMetrics(prometheus, node=settings.node_name), ready=informer.synced,
        system_files=system_files, net_commands=TcExecutor(store=store, originals=originals, on_change=tc_reader.invalidate),
        cookies=CookieExecutor(snapshots.core_sched_kernel(), store=store),
    )
    return QoSParts(runner, snapshots, originals, system_files, knob_owners)


def eviction_backend(settings: Settings, *, informer: Informer, executor: CgroupExecutor,
                     store: StateStore) -> Any:
    """The Eviction API when the informer talks to an apiserver; in standalone mode report-only, or
    with `--evict-standalone=kill` the cgroup killer (freezer, then SIGKILL)."""
    transport = informer.transport
    if transport is not None and informer.mode != "standalone":
        from hookserver.informer.evictor import ApiEvictor

        return ApiEvictor(transport, node_name=settings.node_name, timeout_s=settings.qos.evict_timeout_s)
    if settings.qos.evict_standalone == "kill":
        from hookserver.executor.kill import CgroupKiller

        return CgroupKiller(executor.layout, store=store)
    return ReportOnlyBackend()
