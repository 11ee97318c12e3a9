"""What the agent publishes about its node, each to the apiserver through the informer's writers when it
talks to one, else to a document under --state-dir: the predictor's NodeMetric status, batch and mid
capacity on the Node, and the NodeResourceTopology report."""

from __future__ import annotations

import os
from collections.abc import Callable

from prometheus_client import CollectorRegistry

from collectors import CollectorScheduler
from hookserver.capacity import (
    CapacityMetrics,
    CapacityPublisher,
    CapacitySink,
    LocalCapacitySink,
    NodeMetricKeeper,
    Pair,
)
from hookserver.config import Settings
from hookserver.featuregates import GateValues
from hookserver.informer import Informer
from hookserver.informer.nodemetric_status import NodeMetricStatusWriter
from hookserver.predictor import (
    NODE_METRIC_PROM_GATE,
    FileStatusSink,
    NodeMetricReporter,
    PredictorMetrics,
    PredictorService,
    StatusSink,
)
from hookserver.store import StateStore
from hookserver.system import SystemRoots
from hookserver.topology.publisher import HUGEPAGE_REPORT_GATE, LocalTopologySink, TopologyPublisher, TopologySink

__all__ = [
    "build_capacity",
    "build_predictor",
    "build_topology",
    "disabled_collectors_of",
    "koord_manager_evidence_of",
    "prod_reclaimable_of",
]

# The collectors whose fresh samples the capacity formula needs.
_CAPACITY_COLLECTORS = ("node_resource", "pod_resource", "system_resource")


def _local(informer: Informer) -> bool:
    return informer.transport is None or informer.mode == "standalone"


def build_predictor(
    settings: Settings, *, store: StateStore, informer: Informer, prometheus: CollectorRegistry, gates: GateValues
) -> tuple[PredictorService, NodeMetricReporter | None]:
    """The predictor, and its NodeMetric reporter: to the apiserver through the informer's client when it has
    one and watches NodeMetric, else to a file under --state-dir. koordlet's NodeMetricPromMetrics gate adds
    the reported NodeMetric's usages as Prometheus series."""
    ps = settings.predictor
    metrics = PredictorMetrics(prometheus, node=settings.node_name,
                               node_metric_prom=gates.enabled(NODE_METRIC_PROM_GATE))
    service = PredictorService(
        ps, store=store, checkpoint_dir=os.path.join(settings.state_dir, ps.checkpoint_subdir), metrics=metrics
    )
    if not ps.report_enabled:
        return service, None
    transport = informer.transport
    sink: StatusSink
    if transport is not None and settings.informer.watch_nodemetric:
        sink = NodeMetricStatusWriter(transport, node_name=settings.node_name, seen=informer.nodemetric_seen)
    else:
        sink = FileStatusSink(os.path.join(settings.state_dir, ps.status_file), node_name=settings.node_name)
    return service, NodeMetricReporter(service, sink, settings=ps, metrics=metrics)


def prod_reclaimable_of(reporter: Callable[[], NodeMetricReporter | None]) -> Callable[[], Pair | None]:
    """Mid capacity's input: the predictor's last published prod-reclaimable figure, None when none."""
    def prod_reclaimable() -> Pair | None:
        current = reporter()
        report = current.last_reclaimable if current is not None else None
        if report is None or not report.published.ok:
            return None
        return Pair(report.published.cpu_milli, report.published.memory_bytes)
    return prod_reclaimable


def disabled_collectors_of(collectors: Callable[[], CollectorScheduler]) -> Callable[[], list[str]]:
    """Collectors the capacity formula needs that are switched off: no fresh usage will ever come."""
    def disabled() -> list[str]:
        states = collectors().status().get("collectors", {})
        out = []
        for name in _CAPACITY_COLLECTORS:
            state = states.get(name)
            if isinstance(state, dict) and not state.get("enabled", True):
                out.append(f"{name}: {state.get('disabled_reason') or 'disabled'}")
        return out
    return disabled


def koord_manager_evidence_of(informer: Informer, node_name: str) -> Callable[[], str]:
    """What says koord-manager runs: a NodeSLO object for this node (koord-manager renders one per node)."""
    def evidence() -> str:
        for source in informer.status().get("sources", []):
            if isinstance(source, dict) and source.get("resource") == "nodeslo" and source.get("objects"):
                return f"a NodeSLO named {node_name} exists (koord-manager renders one per node)"
        return ""
    return evidence


def build_capacity(
    settings: Settings,
    *,
    store: StateStore,
    informer: Informer,
    prometheus: CollectorRegistry,
    prod_reclaimable: Callable[[], Pair | None],
    disabled_collectors: Callable[[], list[str]],
) -> CapacityPublisher:
    """The batch/mid capacity publisher: to the Node's status through the informer's server-side-apply writer
    when the agent talks to an apiserver, else to a document under --state-dir."""
    cs = settings.capacity
    metrics = CapacityMetrics(prometheus, node=settings.node_name)
    transport = informer.transport
    standalone = _local(informer)
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
        store=store, settings=cs, sink=sink, standalone=standalone, prod_reclaimable=prod_reclaimable,
        disabled_collectors=disabled_collectors,
        koord_manager_evidence=koord_manager_evidence_of(informer, settings.node_name),
        nodemetric=keeper, ready=informer.first_sync_done, document_path=document, metrics=metrics,
    )


def build_topology(
    settings: Settings, *, store: StateStore, roots: SystemRoots, informer: Informer, gates: GateValues
) -> TopologyPublisher:
    """The NodeResourceTopology report: to the apiserver through the informer's server-side-apply writer
    when there is one and the NodeTopologyReport gate is on (koordlet's default), else to the state dir."""
    ts = settings.topology
    transport = informer.transport
    document = os.path.join(settings.state_dir, ts.document_file)
    sink: TopologySink
    if transport is None or informer.mode == "standalone" or not gates.enabled("NodeTopologyReport"):
        sink = LocalTopologySink(document)
    else:
        from hookserver.informer.nrt import NodeResourceTopologyWriter

        sink = NodeResourceTopologyWriter(transport, node_name=settings.node_name,
                                          field_manager=ts.field_manager, timeout_s=ts.write_timeout_s)
    return TopologyPublisher(
        store=store, roots=roots, node_name=settings.node_name, sink=sink, interval_s=ts.interval_s,
        kubelet_cpu_manager_policy=ts.kubelet_cpu_manager_policy, document_path=document,
        ready=informer.first_sync_done, kubelet_root_dir=ts.kubelet_root_dir,
        hugepage_report=gates.enabled(HUGEPAGE_REPORT_GATE),
    )
