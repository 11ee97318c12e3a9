"""What `hookctl predict` and `hookctl reclaimable` show: JSON documents, complete and exact (milli-cores and
bytes as integers); hookserver.debug.render turns them into tables for people."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from hookserver.errors import InputError
from hookserver.predictor.models import NODE_UID, PERCENTILES, SYSTEM_UID, Prediction, model_kind, priority_uid
from hookserver.predictor.predictors import PredictorResult, ReclaimableReport
from hookserver.podclass import KNOWN_PRIORITY_CLASSES, pod_priority_class
from hookserver.predictor.service import PredictorService
from hookserver.kubewire import iso_time

__all__ = ["predict_view", "reclaimable_view"]


def _class_name(klass: str) -> str:
    return klass or "none"


def predict_view(service: PredictorService, args: dict[str, Any]) -> dict[str, Any]:
    """One model (a pod, `--priority`, `--node`, `--system`) or, with no selector, every model."""
    now = service.clock()
    snapshot = service.store.snapshot()
    selector = "all"
    uids: list[str]
    if args.get("name"):
        pod = snapshot.pod_by_key(str(args.get("namespace", "")), str(args["name"]))
        if pod is None:
            raise InputError(f"no pod {args.get('namespace')}/{args['name']} on this node", field="pod")
        uids, selector = [pod.uid], f"pod {pod.key}"
    elif args.get("priority"):
        klass = str(args["priority"])
        klass = "" if klass == "none" else klass
        if klass not in KNOWN_PRIORITY_CLASSES:
            known = ", ".join(_class_name(k) for k in KNOWN_PRIORITY_CLASSES)
            raise InputError(f"unknown priority class {args['priority']!r} (known: {known})", field="--priority")
        uids, selector = [priority_uid(klass)], f"priority {_class_name(klass)}"
    elif args.get("node"):
        uids, selector = [NODE_UID], "node"
    elif args.get("system"):
        uids, selector = [SYSTEM_UID], "system"
    else:
        uids = sorted(service.table.uids(), key=lambda u: (_KIND_ORDER.get(model_kind(u), 9), u))
    predictions = service.table.predict_many(uids)
    rows = [_model_row(service, predictions[u], snapshot.pods, now) for u in uids if u in predictions]
    doc: dict[str, Any] = {"selector": selector, "at": iso_time(now), "models": rows}
    if not rows:
        doc["note"] = (f"no model yet for {selector}: models train every {service.settings.training_interval_s:g} s "
                       "from pods with CPU and memory samples")
    doc["training"] = _training(service)
    doc["checkpoints"] = _checkpoints(service)
    return doc


_KIND_ORDER = {"node": 0, "system": 1, "priority": 2, "pod": 3}


def _model_row(service: PredictorService, p: Prediction, pods: Any, now: float) -> dict[str, Any]:
    kind = model_kind(p.uid)
    row: dict[str, Any] = {"model": p.uid, "kind": kind}
    pod = pods.get(p.uid) if kind == "pod" else None
    cold: bool | None = None
    if pod is not None:
        created = min(x for x in (pod.created_at or pod.first_seen or now, p.first_sample or now))
        cold = now - created <= service.settings.cold_start_duration_s
        row |= {"pod": pod.key, "priority_class": _class_name(pod_priority_class(pod))}
    elif kind == "pod":
        row |= {"pod": "", "note": "pod no longer known (expires unless it is seen again)"}
    row |= {
        "samples": p.samples,
        "age_s": round(now - p.first_sample, 3) if p.first_sample else 0.0,
        "cold": cold,
        "first_sample": iso_time(p.first_sample),
        "last_updated": iso_time(p.last_updated),
        "last_checkpointed": iso_time(p.last_checkpointed),
        "cpu_milli": {name: p.cpu_milli[i] for i, (name, _) in enumerate(PERCENTILES)},
        "memory_bytes": {name: p.memory_bytes[i] for i, (name, _) in enumerate(PERCENTILES)},
    }
    return row


def _training(service: PredictorService) -> dict[str, Any]:
    r = service.last_training
    s = service.settings
    out: dict[str, Any] = {"interval_s": s.training_interval_s, "cold_start_s": s.cold_start_duration_s,
                           "cpu_half_life_s": s.cpu_half_life_s, "memory_half_life_s": s.memory_half_life_s,
                           "model_expiration_s": s.model_expiration_s, "models": len(service.table)}
    if r is not None:
        out |= {"last_round_at": iso_time(r.at), "last_round_duration_s": round(service.last_training_s, 6),
                "pods_trained": r.pods_trained, "pods_without_samples": r.pods_without_samples,
                "node_trained": r.node_trained}
    return out


def _checkpoints(service: PredictorService) -> dict[str, Any]:
    restored = dict(service.restored)
    last_round = dict(service.last_checkpoint_round)
    for part in (restored, last_round):
        if "at" in part:
            part["at"] = iso_time(part["at"])
    problems = [p | {"at": iso_time(p["at"])} for p in service.problem_list()]
    return {"dir": service.checkpointer.directory, "restored": restored, "last_round": last_round,
            "problems": problems}


def reclaimable_view(service: PredictorService, args: dict[str, Any], *, window_s: float = 300.0) -> dict[str, Any]:
    report = service.reclaimable(window_s=window_s)
    return reclaimable_doc(report, window_s=window_s)


def _result(r: PredictorResult) -> dict[str, Any]:
    return {"predictor": r.name, "cpu_milli": r.cpu_milli, "memory_bytes": r.memory_bytes,
            "peak_cpu_milli": r.peak_cpu_milli, "peak_memory_bytes": r.peak_memory_bytes, "error": r.error}


def reclaimable_doc(report: ReclaimableReport, *, window_s: float) -> dict[str, Any]:
    alloc = report.allocatable
    return {
        "at": iso_time(report.at),
        "published": _result(report.published),
        "predictors": [_result(r) for r in (report.pod_based, report.priority_based, report.published)],
        "why": {
            "margin_percent": report.margin_percent,
            "cold_start_s": report.cold_start_s,
            "usage_window_s": window_s,
            "allocatable": None if alloc is None else asdict(alloc),
            "pod_based": dict(report.pod_based.inputs),
            "priority_based": dict(report.priority_based.inputs),
            "minimum": dict(report.published.inputs),
            "formulas": _formulas(report),
            "pods": [asdict(line) for line in report.pods],
        },
    }


def _formulas(report: ReclaimableReport) -> dict[str, str]:
    """The arithmetic behind each number, in milli-cores and bytes, so it can be redone by hand."""
    alloc = report.allocatable
    pb, qb, pub = report.pod_based, report.priority_based, report.published
    margin = f"(1 + {report.margin_percent}%)"
    out: dict[str, str] = {}
    if alloc is not None and pb.ok:
        i = pb.inputs
        out["pod_based_cpu_milli"] = (f"min(max({alloc.cpu_milli} - {i['sum_peak_cpu_milli']}, 0), "
                                      f"{i['sum_reclaimable_cpu_milli']}) = {pb.cpu_milli}")
        out["pod_based_memory_bytes"] = (f"min(max({alloc.memory_bytes} - {i['sum_peak_memory_bytes']}, 0), "
                                         f"{i['sum_reclaimable_memory_bytes']}) = {pb.memory_bytes}")
    if alloc is not None and qb.ok:
        i = qb.inputs
        models = i.get("models", {})
        cpu_terms = " + ".join(str(m["p95_cpu_milli"]) for m in models.values())
        mem_terms = " + ".join(str(m["p98_memory_bytes"]) for m in models.values())
        out["priority_peak_cpu_milli"] = f"int(({cpu_terms}) x {margin}) = {qb.peak_cpu_milli}"
        out["priority_peak_memory_bytes"] = f"int(({mem_terms}) x {margin}) = {qb.peak_memory_bytes}"
        out["priority_based_cpu_milli"] = (f"min(max({alloc.cpu_milli} - {qb.peak_cpu_milli}, 0), "
                                           f"max({i['sum_request_cpu_milli']} - {qb.peak_cpu_milli}, 0)) = {qb.cpu_milli}")
        out["priority_based_memory_bytes"] = (
            f"min(max({alloc.memory_bytes} - {qb.peak_memory_bytes}, 0), "
            f"max({i['sum_request_memory_bytes']} - {qb.peak_memory_bytes}, 0)) = {qb.memory_bytes}")
    if pub.ok:
        out["published_cpu_milli"] = f"min({pb.cpu_milli}, {qb.cpu_milli}) = {pub.cpu_milli}"
        out["published_memory_bytes"] = f"min({pb.memory_bytes}, {qb.memory_bytes}) = {pub.memory_bytes}"
    return out
