"""The daemon: builds the one store and starts every front door and loop, each named and owned here.

Startup order follows koordlet's: executor, then the hook servers, then the background loops, and the
runtime-proxy registration file last (the proxy server writes it once it listens). Shutdown: stop
event, stop accepting hooks (the registration file goes first, so the proxy stops calling us), give
the loops a grace period, cancel what is left, report.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import time
from typing import Any

from prometheus_client import CollectorRegistry

from collectors import CollectorScheduler, build_collectors, query_report, top_report
from hookserver import __version__
from hookserver.aio.gcpacer import GcPacer
from hookserver.aio.hotgate import GATE
from hookserver.aio.heapreserve import HeapReserve, reserve_heap
from hookserver.aio.interpreter import InterpreterTuning, apply_tuning
from hookserver.aio.tasks import RootTasks
from hookserver.capacity import (
    CapacityMetrics,
    CapacityPublisher,
    CapacitySink,
    LocalCapacitySink,
    NodeMetricKeeper,
    Pair,
)
from hookserver.config import Settings
from hookserver.debug import DebugServer
from hookserver.dispatch import HookDispatcher
from hookserver.executor import build_executor
from hookserver.hooks import BreakerSettings, FailurePolicy, HookRegistry
from hookserver.hooks.plugins import default_plugins, plugin_gates
from hookserver.informer import Informer, build_informer
from hookserver.informer.nodemetric_status import NodeMetricStatusWriter
from hookserver.nri import NriPlugin
from hookserver.observability import HealthState, MetricsHttpServer
from hookserver.observability.gcpauses import GcPauses, freeze_startup_heap
from hookserver.observability.hotgate_metrics import HotGateMetrics
from hookserver.observability.koordlet_metrics import KoordletHookMetrics, register_store_series
from hookserver.observability.metrics import HookMetrics
from hookserver.predictor import (
    FileStatusSink,
    NodeMetricReporter,
    PredictorMetrics,
    PredictorService,
    StatusSink,
    predict_view,
    reclaimable_view,
)
from hookserver.proxy import ProxyServer
from hookserver.recorder.wiring import build_recorder
from hookserver.recorder.writer import FlightRecorder
from hookserver.reconciler import PodReconciler, Reconciler, ReconcilerMetrics
from hookserver.store import StateStore
from hookserver.version import server_version
from hookserver.system import SystemRoots
from hookserver.koordlet_compat.flags import KoordletArgs
from qos import EvictionGuard, QoSRunner, ReportOnlyBackend, build_reconcilers, gate_registry
from hookserver.featuregates import GateValues, koordlet_catalog
from qos.framework.reconciler import Reconciler as QoSReconciler
from hookserver.executor.sysfiles import SystemFileExecutor
from hookserver.store.originals import NodeOriginals
from hookserver.system.cgroupnames import ContainerRuntime
from hookserver.system.topology import CpuInfo, read_cpu_topology
from hookserver.topology.publisher import LocalTopologySink, TopologyPublisher, TopologySink
from hookserver.errors import RecorderUnavailable, SystemFileError
from qos.cpu.burst_metrics import BurstMetricsCollector
from qos.framework.debug import QoSProviders
from qos.snapshot.kernel_reader import KernelReader
from qos.framework.knobs import check_running_features
from qos.framework.metrics import QoSMetrics
from qos.snapshot.builder import CgroupView, SnapshotBuilder

__all__ = ["Daemon", "resolve_feature_gates"]

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 5.0
# The /readyz reason while the informer's first sync is pending.
FIRST_SYNC_PENDING = "first sync not done yet"


def resolve_feature_gates(settings: Settings) -> tuple[list[QoSReconciler], GateValues]:
    """The QoS reconcilers and every gate's value. Implemented = registered by a reconciler (each one's
    `gates`) or by a default hook plugin (`plugin_gates()`, with koordlet's default); the rest of
    koordlet's catalog is accepted, not implemented; any other name raises ConfigError."""
    reconcilers = build_reconcilers(settings.qos)
    catalog = {g.name: g for g in koordlet_catalog()}
    hook_gates = [catalog[name] for name in (*plugin_gates(), "NodeTopologyReport")]
    return reconcilers, gate_registry(reconcilers, also=hook_gates).resolve(settings.gate_layers())


def _node_cpus(roots: SystemRoots) -> tuple[CpuInfo, ...]:
    """The node's CPUs from sysfs, read once at start (CPUSetAllocator's share pool and bound-cpuset check).
    Unreadable: none, said once; the hook then pins only scheduler-bound pods and reports the rest."""
    try:
        return read_cpu_topology(roots)
    except SystemFileError as exc:
        log.warning("CPU topology unreadable (%s): CPUSetAllocator will not compute the LS share pool", exc)
        return ()


class Daemon:
    def __init__(self, settings: Settings, *, koordlet_args: KoordletArgs | None = None) -> None:
        self.settings = settings
        self.koordlet_args = koordlet_args or KoordletArgs()
        # Gates first: they decide which hooks act. An unknown name raises ConfigError before anything listens.
        self.qos_reconcilers, self.gates = resolve_feature_gates(settings)
        self._log_koordlet_compat()
        self.started_at = time.time()
        self.interpreter: InterpreterTuning | None = None
        self.heap_reserve: HeapReserve | None = None
        self.gc_pacer: GcPacer | None = None
        self.roots = SystemRoots(proc=settings.proc_root, sys=settings.sys_root, cgroup=settings.cgroup.root)
        self.store = StateStore()
        self.prometheus = CollectorRegistry(auto_describe=True)
        self.gc_pauses = GcPauses().register(self.prometheus)
        HotGateMetrics().register(self.prometheus)
        self.metrics = HookMetrics(
            self.prometheus, koordlet=KoordletHookMetrics(self.prometheus, node=settings.node_name)
        )
        self.health = HealthState(required=("proxy", "debug"))
        self.executor = build_executor(settings.cgroup, store=self.store, roots=self.roots, metrics=self.metrics)
        self.cpus = _node_cpus(self.roots)
        self.registry = HookRegistry(default_plugins(  # type: ignore[arg-type]
            self.gates.enabled, cpus=self.cpus, unset_cpu_quota=not settings.hook.disable_unset_cpu_quota,
        ))
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
            settings, store=self.store, roots=self.roots, registry=self.prometheus
        )
        self.predictor: PredictorService | None = None
        self.reporter: NodeMetricReporter | None = None
        if settings.predictor.enabled:
            self.predictor, self.reporter = self._build_predictor(settings)
        self.qos = self._build_qos(settings)
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
            self.capacity = self._build_capacity(settings)
            self.health.add_liveness_check("capacity", self.capacity.hung)
        self.topology: TopologyPublisher | None = None
        if settings.topology.enabled:
            self.topology = self._build_topology(settings)
        self.prometheus.register(BurstMetricsCollector(lambda: self.qos.state_of("CPUBurst"), node=settings.node_name))
        qos_providers = QoSProviders(
            self.qos, snapshot=self.qos_snapshots.build,
            node_labels=self._node_labels,
            replay_snapshot=lambda gate: self.qos_snapshots.build(replay_gate=gate),
        )
        self.reconciler: Reconciler | None = None
        if settings.reconciler.enabled:
            engine = PodReconciler(
                store=self.store, dispatcher=self.dispatcher, executor=self.executor, settings=settings.reconciler,
                lists_pod=self.informer.lists_pod, metrics=ReconcilerMetrics(self.prometheus),
            )
            self.reconciler = Reconciler(
                settings.reconciler, store=self.store, engine=engine, ready=self.informer.synced
            )
        providers: dict[str, Any] = {
            "qos": lambda args: {**qos_providers.report(args), "knob_owners": self.knob_owners,
                                 "originals": self.originals.describe()},
            "qos_plan": qos_providers.replay,
            "slo": lambda args: self.informer.slo_report(),
            "top": lambda args: top_report(self.store, window_s=float(args.get("window_seconds") or 300.0)),
            "metrics": lambda args: query_report(self.store, str(args.get("query", ""))),
        }
        if self.nri is not None:
            nri = self.nri
            providers["nri"] = lambda args: nri.status()
        if self.predictor is not None:
            predictor, reporter = self.predictor, self.reporter
            providers["predict"] = lambda args: predict_view(predictor, args)
            providers["reclaimable"] = lambda args: reclaimable_view(
                predictor, args, window_s=reporter.policy().aggregate_s if reporter is not None else 300.0
            )
            if reporter is not None:
                providers["nodemetric"] = lambda args: reporter.view() if reporter is not None else {}
        if self.capacity is not None:
            capacity = self.capacity
            providers["capacity"] = lambda args: capacity.view()
        if self.topology is not None:
            topology = self.topology
            providers["topology"] = lambda args: topology.view()
        providers["version"] = lambda args: server_version(
            node=settings.node_name, started_at=self.started_at,
            nri_status=self.nri.status() if self.nri is not None else None,
        )
        register_store_series(
            self.prometheus, self.store, node=settings.node_name, started_at=self.started_at,
            nri_status=self.nri.status if self.nri is not None else None,
        )
        self.debug = DebugServer(settings.debug.socket, store=self.store, providers=providers, info=self.info)
        self.http = MetricsHttpServer(settings.metrics.addr, self.prometheus, self.health,
                                      debug_views=self.debug.http_view if settings.debug.http_views else None)

    def _log_koordlet_compat(self) -> None:
        """Once, at startup: koordlet gates accepted but not implemented, and koordlet flags mapped or ignored.
        A warning when the operator set something hookserver will not do; else information."""
        line = self.gates.not_implemented_line()
        if line:
            asked = any(v.source != "default" for v in self.gates.not_implemented())
            log.log(logging.WARNING if asked else logging.INFO, "feature gates %s", line)
        for text in self.koordlet_args.log_lines():
            log.log(logging.WARNING if self.koordlet_args.ignored else logging.INFO, "%s", text)

    def koordlet_compat(self) -> dict[str, Any]:
        """For `hookctl status`: what of koordlet's command line and gates hookserver took, and what it did not."""
        return {
            "gates_not_implemented": [
                {"name": v.name, "value": v.enabled, "source": v.source} for v in self.gates.not_implemented()
                if v.enabled or v.source != "default"
            ],
            "flags": self.koordlet_args.describe(),
        }

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

    def _build_predictor(self, settings: Settings) -> tuple[PredictorService, NodeMetricReporter | None]:
        """The predictor, and its NodeMetric reporter: to the apiserver through the informer's client when it has
        one, else to a file under --state-dir."""
        ps = settings.predictor
        metrics = PredictorMetrics(self.prometheus, node=settings.node_name)
        service = PredictorService(
            ps, store=self.store, checkpoint_dir=os.path.join(settings.state_dir, ps.checkpoint_subdir), metrics=metrics
        )
        if not ps.report_enabled:
            return service, None
        transport = self.informer.transport
        sink: StatusSink
        if transport is not None and settings.informer.watch_nodemetric:
            sink = NodeMetricStatusWriter(transport, node_name=settings.node_name, seen=self.informer.nodemetric_seen)
        else:
            sink = FileStatusSink(os.path.join(settings.state_dir, ps.status_file), node_name=settings.node_name)
        return service, NodeMetricReporter(service, sink, settings=ps, metrics=metrics)

    def _build_capacity(self, settings: Settings) -> CapacityPublisher:
        """The batch/mid capacity publisher: to the Node's status through the informer's server-side-apply writer
        when the agent talks to an apiserver, else to a document under --state-dir."""
        cs = settings.capacity
        metrics = CapacityMetrics(self.prometheus, node=settings.node_name)
        transport = self.informer.transport
        standalone = transport is None or self.informer.mode == "standalone"
        sink: CapacitySink
        keeper: NodeMetricKeeper | None = None
        document = ""
        if standalone or transport is None:
            document = os.path.join(settings.state_dir, cs.status_file)
            sink = LocalCapacitySink(document)
        else:
            from hookserver.informer.node_capacity import NodeCapacityWriter
            from hookserver.informer.nodemetric_spec import NodeMetricSpecWriter

            sink = NodeCapacityWriter(transport, node_name=settings.node_name, field_manager=cs.field_manager,
                                      timeout_s=cs.write_timeout_s)
            if cs.manage_nodemetric:
                keeper = NodeMetricKeeper(
                    NodeMetricSpecWriter(transport, node_name=settings.node_name, field_manager=cs.field_manager,
                                         timeout_s=cs.write_timeout_s),
                    watched=settings.informer.watch_nodemetric, on_result=metrics.record_nodemetric,
                )
        return CapacityPublisher(
            store=self.store, settings=cs, sink=sink, standalone=standalone, prod_reclaimable=self._prod_reclaimable,
            disabled_collectors=self._disabled_collectors, koord_manager_evidence=self._koord_manager_evidence,
            nodemetric=keeper, ready=self.informer.first_sync_done, document_path=document, metrics=metrics,
        )

    def _build_topology(self, settings: Settings) -> TopologyPublisher:
        """The NodeResourceTopology report: to the apiserver through the informer's server-side-apply writer
        when there is one and the NodeTopologyReport gate is on (koordlet's default), else to the state dir."""
        ts = settings.topology
        transport = self.informer.transport
        document = os.path.join(settings.state_dir, ts.document_file)
        sink: TopologySink
        if transport is None or self.informer.mode == "standalone" or not self.gates.enabled("NodeTopologyReport"):
            sink = LocalTopologySink(document)
        else:
            from hookserver.informer.nrt import NodeResourceTopologyWriter

            sink = NodeResourceTopologyWriter(transport, node_name=settings.node_name,
                                              field_manager=ts.field_manager, timeout_s=ts.write_timeout_s)
        return TopologyPublisher(
            store=self.store, roots=self.roots, node_name=settings.node_name, sink=sink, interval_s=ts.interval_s,
            kubelet_cpu_manager_policy=ts.kubelet_cpu_manager_policy, document_path=document,
            ready=self.informer.first_sync_done,
        )

    def _prod_reclaimable(self) -> Pair | None:
        """The predictor's last published prod-reclaimable figure (mid capacity's input), None when none."""
        report = self.reporter.last_reclaimable if self.reporter is not None else None
        if report is None or not report.published.ok:
            return None
        return Pair(report.published.cpu_milli, report.published.memory_bytes)

    def _disabled_collectors(self) -> list[str]:
        """Collectors the capacity formula needs that are switched off: no fresh usage will ever come."""
        states = self.collectors.status().get("collectors", {})
        out = []
        for name in ("node_resource", "pod_resource", "system_resource"):
            state = states.get(name)
            if isinstance(state, dict) and not state.get("enabled", True):
                out.append(f"{name}: {state.get('disabled_reason') or 'disabled'}")
        return out

    def _koord_manager_evidence(self) -> str:
        """What says koord-manager runs: a NodeSLO object for this node (koord-manager renders one per node)."""
        for source in self.informer.status().get("sources", []):
            if isinstance(source, dict) and source.get("resource") == "nodeslo" and source.get("objects"):
                return f"a NodeSLO named {self.settings.node_name} exists (koord-manager renders one per node)"
        return ""

    def _build_qos(self, settings: Settings) -> QoSRunner:
        """The reconcilers, their gates (an unknown --feature-gates name raises ConfigError here, before
        anything listens), the snapshot builder over the executor's layout, and the eviction backend."""
        reconcilers, gates = self.qos_reconcilers, self.gates
        # One owner per knob (qos/framework/knobs.py): a conflict refuses to start here, before anything listens. With
        # BatchResource=false the hook writes nothing, so it owns nothing.
        hooks = [owner for plugin, owner in (("BatchResource", "batchresource"), ("CPUSetAllocator", "CPUSetAllocator"),
                                             ("CPUNormalization", "CPUNormalization"))
                 if plugin in self.registry.plugins and getattr(self.registry.plugins[plugin], "enabled", False)]
        self.knob_owners = check_running_features(reconcilers, hooks)
        layout = self.executor.layout
        view = CgroupView(hierarchy_root=layout.hierarchy_root, v2=layout.writes_v2, driver=layout.driver,
                          runtime=layout.runtime)
        self.originals = NodeOriginals(settings.state_dir)
        self.system_files = SystemFileExecutor(
            {"proc_sys": os.path.join(settings.proc_root, "sys"), "sys": settings.sys_root,
             "resctrl": os.path.join(settings.sys_root, "fs", "resctrl")},
            store=self.store, originals=self.originals,
        )
        kernel = KernelReader(
            view, runtime=ContainerRuntime(settings.cgroup.runtime), proc_root=settings.proc_root,
            sys_root=settings.sys_root, originals=self.originals, enabled=gates.enabled,
        )
        self.qos_snapshots = SnapshotBuilder(
            self.store,
            cgroups=view,
            collect_interval_s=max(
                settings.collectors.node_resource.interval_s, settings.collectors.pod_resource.interval_s,
                settings.collectors.be_resource.interval_s,
            ),
            kernel=kernel,
        )
        guard = EvictionGuard(self._eviction_backend(settings), cooldown_s=settings.qos.eviction_cooldown_s)
        return QoSRunner(
            reconcilers, gates=gates, snapshots=self.qos_snapshots, store=self.store, executor=self.executor,
            evictions=guard, settings=settings.qos, metrics=QoSMetrics(self.prometheus, node=settings.node_name),
            ready=self.informer.synced,
            system_files=self.system_files,
        )

    def _node_labels(self) -> dict[str, str]:
        node = self.store.snapshot().node
        return dict(node.labels) if node is not None else {}

    def _eviction_backend(self, settings: Settings) -> Any:
        """The Eviction API when the informer talks to an apiserver; in standalone mode report-only, or
        with `--evict-standalone=kill` the cgroup killer (freezer, then SIGKILL)."""
        transport = self.informer.transport
        if transport is not None and self.informer.mode != "standalone":
            from hookserver.informer.evictor import ApiEvictor

            return ApiEvictor(transport, node_name=settings.node_name, timeout_s=settings.qos.evict_timeout_s)
        if settings.qos.evict_standalone == "kill":
            from hookserver.executor.kill import CgroupKiller

            return CgroupKiller(self.executor.layout, store=self.store)
        return ReportOnlyBackend()

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
            "nri": self.nri.status() if self.nri is not None else {"state": "disabled"},
            "hook_breakers": self.dispatcher.breaker_status(),
            "koordlet": self.koordlet_compat(),
            "informer": self.informer.status(),
            "collectors": self.collectors.status(),
            "predictor": self._predictor_status(),
            "qos": {
                "enabled": s.qos.enabled, "dry_run": s.qos.dry_run, "evictor": self.qos.evictions.kind,
                "reconcilers": sorted(self.qos.reconcilers),
                "be_tier_missing": str(getattr(self.qos.snapshots, "tier_problem", "") or ""),
            },
            "reconciler": self.reconciler.status() if self.reconciler is not None else {"state": "disabled"},
            "capacity": self._capacity_status(),
            "recorder": self._recorder_status(),
            "gc": self.gc_pauses.status(),
            "interpreter": self.interpreter.status() if self.interpreter is not None else {},
            "heap_reserve": self.heap_reserve.status() if self.heap_reserve is not None else {},
            "hot_gate": GATE.stats(),
            "gc_pacer": self.gc_pacer.status() if self.gc_pacer is not None else {"running": False},
        }

    def _recorder_status(self) -> dict[str, Any]:
        if self.recorder is not None:
            return {"state": "recording", "file": self.recorder.path, "frames": self.recorder.frames,
                    "errors": self.recorder.errors, "last_error": self.recorder.last_error or None}
        if self.recorder_problem:
            return {"state": "unavailable", "reason": self.recorder_problem}
        return {"state": "disabled"}

    def _capacity_status(self) -> dict[str, Any]:
        if self.capacity is None:
            return {"state": "disabled"}
        last = self.capacity.last
        return {"state": last.state if last is not None else "starting", "reason": last.reason if last else "",
                "target": self.capacity.sink.target, "where": self.capacity.sink.where,
                "offer": dict(self.capacity.ours)}

    def _predictor_status(self) -> dict[str, Any]:
        if self.predictor is None:
            return {"state": "disabled"}
        out: dict[str, Any] = {"models": len(self.predictor.table), "checkpoint_dir": self.predictor.checkpointer.directory,
                               "checkpoint_problems": len(self.predictor.problem_list())}
        if self.reporter is not None:
            out |= {"nodemetric_target": self.reporter.sink.target, "nodemetric_where": self.reporter.sink.where,
                    "nodemetric_last_result": self.reporter.last_result or None}
        return out

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
            # Everything imported and built: keep full collections off the start-up heap (gcpauses.py). The
            # freeze's own collection is logged, not counted: the metrics show the pauses of a running agent.
            freeze_startup_heap()
            self.gc_pauses.attach()
            # The hot path shares the GIL with every background thread: bound how long it waits for one.
            self.interpreter = apply_tuning(switch_interval_s=self.settings.hook.switch_interval_ms / 1000)
            # On the loop's thread, whose heap takes every NRI frame: a sync is read and decoded without faults.
            self.heap_reserve = reserve_heap(self.settings.hook.heap_reserve_mib << 20)
            # Background threads step aside while hooks are answered, and collections wait for a quiet moment
            # (hookserver/aio/hotgate.py, gcpacer.py). The loop thread serves NRI: it never pauses itself.
            hook = self.settings.hook
            GATE.configure(enabled=hook.background_yield, linger_s=hook.yield_linger_ms / 1000,
                           max_defer_s=hook.yield_max_defer_ms / 1000)
            GATE.exempt_current_thread()
            if hook.gc_pace_ms > 0:
                self.gc_pacer = GcPacer(interval_s=hook.gc_pace_ms / 1000, young=hook.gc_pace_young,
                                        quiet_wait_s=hook.gc_quiet_wait_ms / 1000,
                                        freeze_survivors=hook.gc_freeze_survivors,
                                        deep_every_s=hook.gc_deep_every_s)
                self.gc_pacer.start()
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
            self.gc_pauses.detach()
            if self.gc_pacer is not None:
                self.gc_pacer.stop()
            GATE.configure(enabled=False, linger_s=GATE.linger_s, max_defer_s=GATE.max_defer_s)
            if self.interpreter is not None:
                self.interpreter.restore()
            if self.recorder is not None:
                self.recorder.close()
            gc.unfreeze()  # a process that goes on (tests, an embedding) collects that heap again
        if tasks.failed:
            log.error("stopped because: %s", "; ".join(f"{k}: {v}" for k, v in tasks.failed.items()))
            return 1
        return 0
