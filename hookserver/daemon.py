"""The daemon: builds the one store and starts every front door and loop, each named and owned here.

Startup order follows koordlet's: executor, then the hook servers, then the background loops, and the
runtime-proxy registration file last (the proxy server writes it once it listens). Shutdown: stop
event, stop accepting hooks (the registration file goes first, so the proxy stops calling us), give
the loops a grace period, cancel what is left, report.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from functools import partial
from typing import Any

from prometheus_client import CollectorRegistry

from collectors import CollectorScheduler, build_collectors
from hookserver import __version__
from hookserver.aio.gcpacer import GcPacer
from hookserver.aio.heapreserve import HeapReserve
from hookserver.aio.hotgate import GATE
from hookserver.aio.interpreter import InterpreterTuning
from hookserver.aio.periodic import run_every
from hookserver.aio.tasks import RootTasks
from hookserver.capacity import CapacityPublisher, link_numa_zones
from hookserver.config import Settings
from hookserver.debug import DebugServer
from hookserver.devices.publisher import DevicePublisher
from hookserver.dispatch import HookDispatcher
from hookserver.errors import RecorderUnavailable, SystemFileError
from hookserver.executor import build_executor
from hookserver.hooks import BreakerSettings, FailurePolicy, HookRegistry
from hookserver.hooks.plugins import default_plugins
from hookserver.informer import Informer, build_informer
from hookserver.koordlet_compat.flags import KoordletArgs
from hookserver.nri import NriPlugin
from hookserver.observability import HealthState, MetricsHttpServer
from hookserver.observability.gcpauses import GcPauses
from hookserver.observability.hotgate_metrics import HotGateMetrics
from hookserver.observability.koordlet_metrics import KoordletHookMetrics, register_store_series
from hookserver.observability.metrics import HookMetrics
from hookserver.predictor import NodeMetricReporter, PredictorService
from hookserver.proxy import ProxyServer
from hookserver.reconciler import PodReconciler, Reconciler, ReconcilerMetrics
from hookserver.recorder.wiring import build_recorder
from hookserver.recorder.writer import FlightRecorder
from hookserver.store import StateStore
from hookserver.system import SystemRoots
from hookserver.system.rdma import read_rdma_devices
from hookserver.system.topology import CpuInfo, read_cpu_topology
from hookserver.topology.publisher import TopologyPublisher
from hookserver.wiring.gates import koordlet_compat_report, log_koordlet_compat, resolve_feature_gates
from hookserver.wiring.hooks import group_identity_files
from hookserver.wiring.publishers import (
    build_capacity,
    build_predictor,
    build_topology,
    disabled_collectors_of,
    koord_manager_evidence_of,
    prod_reclaimable_of,
)
from hookserver.devices.inventory import GpuInventory
from hookserver.wiring.devices import build_allocation_warnings, build_devices, collector_settings
from hookserver.wiring.qos import build_qos
from hookserver.wiring.runtime import HotPathRuntime
from hookserver.wiring.systemd import systemd_status, unit_property_keeper
from hookserver.wiring.views import (
    capacity_status,
    debug_providers,
    devices_status,
    predictor_status,
    recorder_status,
)
from qos.cpu.burst_metrics import BurstMetricsCollector

__all__ = ["Daemon", "resolve_feature_gates"]

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 5.0
# The /readyz reason while the informer's first sync is pending.
FIRST_SYNC_PENDING = "first sync not done yet"


def _node_cpus(roots: SystemRoots) -> tuple[CpuInfo, ...]:
    """The node's CPUs from sysfs, read once at start (CPUSetAllocator's share pool and bound-cpuset check).
    Unreadable: none, said once; the hook then pins only scheduler-bound pods and reports the rest."""
    try:
        return read_cpu_topology(roots)
    except SystemFileError as exc:
        log.warning("CPU topology unreadable (%s): CPUSetAllocator will not compute the LS share pool", exc)
        return ()


class Daemon:
    def _kubelet_allocated_cpus(self) -> frozenset[int]:
        """The kubelet's exclusive CPUs as the NRT publisher last read them (`cpu_manager_state`); none before
        its first round or without it."""
        topology = getattr(self, "topology", None)
        kubelet = topology.kubelet if topology is not None else None
        return kubelet.allocated_cpus if kubelet is not None else frozenset()

    def __init__(self, settings: Settings, *, koordlet_args: KoordletArgs | None = None) -> None:
        self.settings = settings
        self.koordlet_args = koordlet_args or KoordletArgs()
        # Gates first: they decide which hooks act. An unknown name raises ConfigError before anything listens.
        self.qos_reconcilers, self.gates = resolve_feature_gates(settings)
        log_koordlet_compat(self.gates, self.koordlet_args)
        self.started_at = time.time()
        self.roots = SystemRoots(proc=settings.proc_root, sys=settings.sys_root, cgroup=settings.cgroup.root)
        self.store = StateStore()
        self.prometheus = CollectorRegistry(auto_describe=True)
        self.gc_pauses = GcPauses().register(self.prometheus)
        self.runtime = HotPathRuntime(settings.hook, self.gc_pauses)
        HotGateMetrics().register(self.prometheus)
        self.metrics = HookMetrics(
            self.prometheus, koordlet=KoordletHookMetrics(self.prometheus, node=settings.node_name)
        )
        self.health = HealthState(required=("proxy", "debug"))
        self.executor = build_executor(settings.cgroup, store=self.store, roots=self.roots, metrics=self.metrics)
        self.cpus = _node_cpus(self.roots)
        self.registry = HookRegistry(default_plugins(  # type: ignore[arg-type]
            self.gates.enabled, cpus=self.cpus, unset_cpu_quota=not settings.hook.disable_unset_cpu_quota,
            gpu=settings.hook.gpu,
            rdma=read_rdma_devices(self.roots) if self.gates.enabled("RDMADeviceInject") else None,
            rdma_reread=partial(read_rdma_devices, self.roots),
            cpu_priority_files=group_identity_files(settings.qos, self.executor.layout),
            kubelet_allocated=self._kubelet_allocated_cpus,
        ))
        # The GPUs GPUEnvInject checks allocations against, refreshed from the GPU collector's inventory; without
        # the hook nothing reads them, and the hooks' view skips the source altogether.
        self.gpus = GpuInventory(self.store) if self.gates.enabled("GPUEnvInject") else None
        self.registry.disable(settings.hook.disable_stages)
        self.policy = FailurePolicy(settings.hook.failure_policy)
        hook = settings.hook
        self.dispatcher = HookDispatcher(
            registry=self.registry, store=self.store, executor=self.executor, policy=self.policy, metrics=self.metrics,
            breaker_settings=BreakerSettings(
                budget_s=hook.hook_budget_ms / 1000, trip_after=hook.breaker_trip_after,
                stuck_s=hook.breaker_stuck_ms / 1000, cool_down_s=hook.breaker_cool_down_s,
                max_cool_down_s=max(300.0, hook.breaker_cool_down_s),
            ),
            gpus=self.gpus,
        )
        self.proxy = ProxyServer(settings.hook, dispatcher=self.dispatcher, registry=self.registry)
        self.nri: NriPlugin | None = None
        if settings.nri.enabled:
            self.nri = NriPlugin(
                settings.nri, dispatcher=self.dispatcher, store=self.store, registry=self.registry,
                failure_policy=self.policy, catch_up=self._nri_catch_up,
            )
        self.informer: Informer = build_informer(settings, store=self.store, registry=self.prometheus)
        self._gate_readiness_on_first_sync()
        self.collectors: CollectorScheduler = build_collectors(
            collector_settings(settings, self.gates), store=self.store, roots=self.roots, registry=self.prometheus
        )
        self.predictor: PredictorService | None = None
        self.reporter: NodeMetricReporter | None = None
        if settings.predictor.enabled:
            self.predictor, self.reporter = build_predictor(
                settings, store=self.store, informer=self.informer, prometheus=self.prometheus, gates=self.gates
            )
        parts = build_qos(
            settings, store=self.store, executor=self.executor, registry=self.registry,
            reconcilers=self.qos_reconcilers, gates=self.gates, informer=self.informer, prometheus=self.prometheus,
        )
        self.qos, self.qos_snapshots, self.knob_owners = parts.runner, parts.snapshots, parts.knob_owners
        self.originals, self.system_files = parts.originals, parts.system_files
        self.unit_keeper = unit_property_keeper(settings, executor=self.executor, originals=self.originals)
        self.recorder: FlightRecorder | None = None
        self.recorder_problem = ""
        if settings.recorder.enabled and settings.qos.enabled:
            try:
                self.recorder = build_recorder(
                    settings.recorder, state_dir=settings.state_dir, node_name=settings.node_name, store=self.store,
                    predictor=settings.predictor.model_dump(mode="json"),
                    reconcilers={r.name: {"interval_s": r.interval_s, "cooldown_s": r.cooldown_s}
                                 for r in self.qos.reconcilers.values()},
                )
            except RecorderUnavailable as exc:
                # A recording is for later; hooks and QoS are for now: never refuse to start over it.
                self.recorder_problem = str(exc)
                log.warning("%s; the agent runs without its flight recorder until it is restarted", exc)
            self.qos.recorder = self.recorder
        self.capacity: CapacityPublisher | None = None
        if settings.capacity.enabled:
            self.capacity = build_capacity(
                settings, store=self.store, informer=self.informer, prometheus=self.prometheus,
                prod_reclaimable=prod_reclaimable_of(lambda: self.reporter),
                disabled_collectors=disabled_collectors_of(lambda: self.collectors),
            )
            self.health.add_liveness_check("capacity", self.capacity.hung)
        self.topology: TopologyPublisher | None = None
        if settings.topology.enabled:
            self.topology = build_topology(
                settings, store=self.store, roots=self.roots, informer=self.informer, gates=self.gates
            )
        if self.capacity is not None and self.topology is not None:
            link_numa_zones(self.capacity, self.topology)  # NUMA-level batch capacity in the NRT's zones
        self.devices: DevicePublisher | None = build_devices(
            settings, store=self.store, roots=self.roots, informer=self.informer, gates=self.gates,
            koord_manager_evidence=koord_manager_evidence_of(self.informer, settings.node_name),
        )
        self.gpu_warnings = build_allocation_warnings(settings, store=self.store, informer=self.informer, gates=self.gates)
        self.prometheus.register(BurstMetricsCollector(lambda: self.qos.state_of("CPUBurst"), node=settings.node_name))
        self.reconciler: Reconciler | None = None
        if settings.reconciler.enabled:
            engine = PodReconciler(
                store=self.store, dispatcher=self.dispatcher, executor=self.executor, settings=settings.reconciler,
                lists_pod=self.informer.lists_pod, metrics=ReconcilerMetrics(self.prometheus),
            )
            self.reconciler = Reconciler(
                settings.reconciler, store=self.store, engine=engine, ready=self.informer.synced
            )
        register_store_series(
            self.prometheus, self.store, node=settings.node_name, started_at=self.started_at,
            nri_status=self.nri.status if self.nri is not None else None,
        )
        self.debug = DebugServer(settings.debug.socket, store=self.store, providers=debug_providers(self),
                                 info=self.info)
        self.http = MetricsHttpServer(settings.metrics.addr, self.prometheus, self.health,
                                      debug_views=self.debug.http_view if settings.debug.http_views else None)

    def koordlet_compat(self) -> dict[str, Any]:
        """For `hookctl status`: what of koordlet's command line and gates hookserver took, and what it did not."""
        return koordlet_compat_report(self.gates, self.koordlet_args)

    async def _refresh_gpus(self) -> None:
        if self.gpus is not None:
            self.gpus.refresh()

    def _nri_catch_up(self, uids: set[str], why: str) -> None:
        """What an NRI Synchronize could not finish in the runtime's budget: the reconciler, at once."""
        if self.reconciler is not None:
            self.reconciler.catch_up(uids, why)

    def _gate_readiness_on_first_sync(self) -> None:
        """With an apiserver or kubelet source, /readyz waits for the informer's first sync (pods, node and
        NodeSLO listed): until then the store holds default NodeSLO values and no listed pod, and the QoS
        runner and the reconciler wait, so a rolling update must not move on to the next node yet. Only the
        first sync counts: an unready DaemonSet pod during a later apiserver outage helps nobody. Standalone
        has no source, so nothing to wait for."""
        if not self.informer.sources:
            return
        self.health.set_ready("informer", False, FIRST_SYNC_PENDING)
        self.informer.on_first_sync(lambda: self.health.set_ready("informer", True))

    def info(self) -> dict[str, Any]:
        """Extra fields for `hookctl status`."""
        s = self.settings
        return {
            "version": __version__,
            "pid": os.getpid(),
            "uptime_s": round(time.time() - self.started_at, 1),
            "node": s.node_name,
            "mode": "standalone" if s.standalone else "cluster",
            "failure_policy": self.policy.value,
            "hook_socket": s.hook.socket,
            "stages": self.registry.stage_names(),
            "plugins": sorted(self.registry.plugins),
            "metrics_port": self.http.port,
            "cgroup": self.executor.layout.describe(),
            "systemd": systemd_status(s, self.unit_keeper, driver=self.executor.layout.driver),
            "nri": self.nri.status() if self.nri is not None else {"state": "disabled"},
            "hook_breakers": self.dispatcher.breaker_status(),
            "koordlet": self.koordlet_compat(),
            "informer": self.informer.status(),
            "collectors": self.collectors.status(),
            "predictor": predictor_status(self.predictor, self.reporter),
            "qos": {
                "enabled": s.qos.enabled, "dry_run": s.qos.dry_run, "evictor": self.qos.evictions.kind,
                "reconcilers": sorted(self.qos.reconcilers),
                "be_tier_missing": str(getattr(self.qos.snapshots, "tier_problem", "") or ""),
                "be_tier_controllers": str(getattr(self.qos.snapshots, "controllers_problem", "") or ""),
            },
            "reconciler": self.reconciler.status() if self.reconciler is not None else {"state": "disabled"},
            "capacity": capacity_status(self.capacity),
            "devices": devices_status(self.devices),
            "recorder": recorder_status(self.recorder, self.recorder_problem),
            "gc": self.gc_pauses.status(),
            "interpreter": self.interpreter.status() if self.interpreter is not None else {},
            "heap_reserve": self.heap_reserve.status() if self.heap_reserve is not None else {},
            "hot_gate": GATE.stats(),
            "gc_pacer": self.gc_pacer.status() if self.gc_pacer is not None else {"running": False},
        }

    # The hot path's tuning, for `hookctl status` and the tests (hookserver/wiring/runtime.py).
    @property
    def interpreter(self) -> InterpreterTuning | None:
        return self.runtime.interpreter

    @property
    def heap_reserve(self) -> HeapReserve | None:
        return self.runtime.heap_reserve

    @property
    def gc_pacer(self) -> GcPacer | None:
        return self.runtime.gc_pacer

    async def run(self, stop: asyncio.Event) -> int:
        """Serve until `stop` is set. Returns the exit code: 0 on a clean stop, 1 if a root task died."""
        tasks = RootTasks(stop)
        self.health.attach_loop(asyncio.get_running_loop())
        try:
            self.http.start()
            self.health.set_ready("proxy", False, "starting")
            await asyncio.to_thread(self.proxy.start)
            self.health.set_ready("proxy", True)
            await asyncio.to_thread(self.debug.start)
            self.health.set_ready("debug", True)
            self.runtime.start()
            if self.unit_keeper is not None:
                self.unit_keeper.start()
            if self.nri is not None:
                tasks.spawn("nri", self.nri.run(stop))
            tasks.spawn("informer", self.informer.run(stop))
            if self.reconciler is not None:
                tasks.spawn("reconciler", self.reconciler.run(stop))
            tasks.spawn("collectors", self.collectors.run(stop))
            if self.predictor is not None:
                tasks.spawn("predictor", self.predictor.run(stop))
            if self.reporter is not None:
                tasks.spawn("nodemetric-reporter", self.reporter.run(stop))
            if self.capacity is not None:
                tasks.spawn("capacity", self.capacity.run(stop))
            if self.settings.qos.enabled:
                tasks.spawn("qos", self.qos.run(stop))
            if self.topology is not None:
                tasks.spawn("topology", self.topology.run(stop))
            if self.devices is not None:
                tasks.spawn("devices", self.devices.run(stop))
            if self.gpu_warnings is not None:
                tasks.spawn("gpu-allocation-warnings", self.gpu_warnings.run(stop))
            if self.gpus is not None:
                tasks.spawn("gpu-inventory", run_every(
                    self.settings.collectors.gpu.interval_s, self._refresh_gpus, stop, name="gpu inventory"))
            log.info(
                "hookserver %s serving: hooks on %s (%s), debug on %s, metrics on port %s, nri %s",
                __version__, self.proxy.address, ",".join(self.registry.stage_names()), self.debug.address,
                self.http.port, self.settings.nri.socket if self.nri is not None else "disabled",
            )
            await stop.wait()
        finally:
            log.info("shutting down")
            self.health.set_ready("proxy", False, "shutting down")
            await asyncio.to_thread(self.proxy.stop, 2.0)
            stop.set()
            await tasks.shutdown(SHUTDOWN_GRACE_S)
            await asyncio.to_thread(self.debug.stop, 1.0)
            self.http.stop()
            self.runtime.stop()
            if self.unit_keeper is not None:
                await asyncio.to_thread(self.unit_keeper.stop)
            if self.recorder is not None:
                self.recorder.close()
            self.runtime.release_heap()
        if tasks.failed:
            log.error("stopped because: %s", "; ".join(f"{k}: {v}" for k, v in tasks.failed.items()))
            return 1
        return 0
