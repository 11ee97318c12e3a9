"""What the debug server and `hookctl status` show of each part: the providers (one callable per view,
registered by name) and the status sections. Reads the agent's parts through `AgentParts`, the daemon's
shape as far as the views need it, so this room never imports the daemon."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from collectors import query_report, top_report
from hookserver.capacity import CapacityPublisher
from hookserver.config import Settings
from hookserver.devices.publisher import DevicePublisher
from hookserver.informer import Informer
from hookserver.nri import NriPlugin
from hookserver.predictor import NodeMetricReporter, PredictorService, predict_view, reclaimable_view
from hookserver.recorder.status import recorder_status
from hookserver.store import StateStore
from hookserver.store.originals import NodeOriginals
from hookserver.topology.publisher import TopologyPublisher
from hookserver.version import server_version
from qos.framework.debug import QoSProviders
from qos.framework.runner import QoSRunner
from qos.snapshot import SnapshotBuilder

__all__ = ["AgentParts", "capacity_status", "debug_providers", "devices_status", "predictor_status", "recorder_status"]

Provider = Callable[[dict[str, Any]], Any]


class AgentParts(Protocol):
    settings: Settings
    started_at: float
    store: StateStore
    informer: Informer
    nri: NriPlugin | None
    qos: QoSRunner
    qos_snapshots: SnapshotBuilder
    knob_owners: dict[str, list[str]]
    originals: NodeOriginals
    predictor: PredictorService | None
    reporter: NodeMetricReporter | None
    capacity: CapacityPublisher | None
    topology: TopologyPublisher | None
    devices: DevicePublisher | None


def _node_labels(store: StateStore) -> Callable[[], dict[str, str]]:
    def labels() -> dict[str, str]:
        node = store.snapshot().node
        return dict(node.labels) if node is not None else {}
    return labels


def debug_providers(parts: AgentParts) -> dict[str, Provider]:
    """The debug server's views by name; a part that is switched off has no view (hookctl says so)."""
    settings = parts.settings
    qos_views = QoSProviders(
        parts.qos, snapshot=parts.qos_snapshots.build, node_labels=_node_labels(parts.store),
        replay_snapshot=lambda gate: parts.qos_snapshots.build(replay_gate=gate),
    )
    providers: dict[str, Provider] = {
        "qos": lambda args: {**qos_views.report(args), "knob_owners": parts.knob_owners,
                             "originals": parts.originals.describe()},
        "qos_plan": qos_views.replay,
        "slo": lambda args: parts.informer.slo_report(),
        "top": lambda args: top_report(parts.store, window_s=float(args.get("window_seconds") or 300.0)),
        "metrics": lambda args: query_report(parts.store, str(args.get("query", ""))),
    }
    nri = parts.nri
    if nri is not None:
        providers["nri"] = lambda args: nri.status()
    predictor, reporter = parts.predictor, parts.reporter
    if predictor is not None:
        providers["predict"] = lambda args: predict_view(predictor, args)
        providers["reclaimable"] = lambda args: reclaimable_view(
            predictor, args, window_s=reporter.policy().aggregate_s if reporter is not None else 300.0
        )
        if reporter is not None:
            providers["nodemetric"] = lambda args: reporter.view()
    capacity = parts.capacity
    if capacity is not None:
        providers["capacity"] = lambda args: capacity.view()
    topology = parts.topology
    if topology is not None:
        providers["topology"] = lambda args: topology.view()
    devices = parts.devices
    if devices is not None:
        providers["devices"] = lambda args: devices.view()
    providers["version"] = lambda args: server_version(
        node=settings.node_name, started_at=parts.started_at,
        nri_status=nri.status() if nri is not None else None,
    )
    return providers


def capacity_status(capacity: CapacityPublisher | None) -> dict[str, Any]:
    if capacity is None:
        return {"state": "disabled"}
    last = capacity.last
    return {"state": last.state if last is not None else "starting", "reason": last.reason if last else "",
            "target": capacity.sink.target, "where": capacity.sink.where, "offer": dict(capacity.ours)}


def predictor_status(predictor: PredictorService | None, reporter: NodeMetricReporter | None) -> dict[str, Any]:
    if predictor is None:
        return {"state": "disabled"}
    out: dict[str, Any] = {"models": len(predictor.table), "checkpoint_dir": predictor.checkpointer.directory,
                           "checkpoint_problems": len(predictor.problem_list())}
    if reporter is not None:
        out |= {"nodemetric_target": reporter.sink.target, "nodemetric_where": reporter.sink.where,
                "nodemetric_last_result": reporter.last_result or None}
    return out


def devices_status(devices: DevicePublisher | None) -> dict[str, Any]:
    """`hookctl status`'s line on the Device report: where it goes and how the last delivery went."""
    if devices is None:
        return {"state": "disabled"}
    view = devices.view()
    spec = view.get("document", {}).get("spec", {}) if isinstance(view.get("document"), dict) else {}
    return {"state": view["last_result"] or "starting", "detail": view["last_detail"] or None,
            "target": view["target"], "where": view["where"], "devices": len(spec.get("devices", []))}
