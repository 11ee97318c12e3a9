"""`hookctl topology` as text: where the NodeResourceTopology went and how, the CPU pools (share pools, CPUs
bound to LSE/LSR pods, reserved, system-qos and kubelet-static CPUs), the kubelet's CPU manager policy and where
it was read, and the zones (with hugepages where reported); `-o json` has the whole document."""

from __future__ import annotations

from typing import Any

__all__ = ["delivery_lines", "render_topology"]


def _zone_line(zone: Any) -> str:
    resources = {r.get("name"): r.get("capacity") for r in zone.get("resources", []) if isinstance(r, dict)}
    batch = "".join(f", {name.rsplit('/', 1)[-1]} {resources[name]}" for name in
                    ("kubernetes.io/batch-cpu", "kubernetes.io/batch-memory") if name in resources)
    huge = "".join(f", {name} {resources[name]}" for name in ("hugepages-2Mi", "hugepages-1Gi")
                   if resources.get(name, "0") != "0")
    return (f"  {zone.get('name')}: cpu {resources.get('cpu', '?')}, memory {resources.get('memory', '?')}"
            f"{huge}{batch}")


def delivery_lines(doc: dict[str, Any]) -> list[str]:
    """A node document's delivery (`DocumentDelivery.view`): where it went, how, and how often."""
    lines = [
        f"node: {doc.get('node', '')}",
        f"report: {doc.get('last_result', '')} -> {doc.get('target', '')} {doc.get('where', '')}",
    ]
    if doc.get("last_detail"):
        lines.append(f"  {doc['last_detail']}")
    lines.append(f"writes: {doc.get('writes', 0)} in {doc.get('ticks', 0)} rounds (unchanged documents are not re-sent)")
    return lines


def render_topology(doc: Any) -> str:
    if not isinstance(doc, dict):
        return str(doc)
    lines = delivery_lines(doc)
    pools = doc.get("pools") or {}
    if pools:
        lines.append("pools:")
        for key, label in (("online", "online CPUs"), ("ls_share_pool", "LS share pool"),
                           ("be_share_pool", "BE share pool"), ("reserved", "reserved (node annotation)"),
                           ("system_exclusive", "system-qos exclusive"),
                           ("kubelet_exclusive", "kubelet static CPU manager")):
            lines.append(f"  {label}: {pools.get(key) or '-'}")
        for uid, bound in (pools.get("exclusive") or {}).items():
            lines.append(f"  bound to {bound.get('qos') or 'pod'} {uid}: {bound.get('cpuset')}")
        for problem in pools.get("problems") or []:
            lines.append(f"  problem: {problem}")
    kubelet = doc.get("kubelet_cpu_manager") or {}
    if kubelet:
        lines.append(f"kubelet CPU manager: {kubelet.get('policy')} (from {kubelet.get('source')})")
        if kubelet.get("problem"):
            lines.append(f"  problem: {kubelet['problem']}")
    document = doc.get("document") or {}
    zones = document.get("zones") or []
    if zones:
        lines.append("zones:")
        lines.extend(_zone_line(z) for z in zones)
    annotations = (document.get("metadata") or {}).get("annotations") or {}
    if annotations:
        lines.append("annotations:")
        for key, value in sorted(annotations.items()):
            text = value if len(value) <= 120 else value[:117] + "..."
            lines.append(f"  {key}: {text}")
    return "\n".join(lines if document else [*lines, "(no document built yet)"])
