"""`hookctl devices` as text: where the Device object went and how, one line per device (type, minor, id,
health and why not, resources, NUMA node and bus), the GPU labels, and the GPU/RDMA share of the Node (values,
who publishes them, its state); `-o json` has the whole document."""

from __future__ import annotations

from typing import Any

from hookserver.debug.render_topology import delivery_lines

__all__ = ["render_devices"]


def _device_line(device: Any) -> str:
    if not isinstance(device, dict):
        return f"  {device!r}"
    health = "healthy" if device.get("health") else "UNHEALTHY"
    for condition in device.get("conditions") or []:
        if isinstance(condition, dict) and condition.get("status") == "False":
            health += f" ({condition.get('reason')}: {condition.get('message')}, since {condition.get('lastTransitionTime')})"
    resources = ", ".join(f"{k.rsplit('/', 1)[-1]} {v}" for k, v in sorted((device.get("resources") or {}).items()))
    topology = device.get("topology") or {}
    where = f"numa {topology.get('nodeID')} {topology.get('pcieID')} {topology.get('busID')}" if topology else "topology unknown"
    line = f"  {device.get('type')} {device.get('minor')}  {device.get('id')}  {health}  [{resources}]  {where}"
    vfs = [vf.get("busID") for group in device.get("vfGroups") or [] for vf in group.get("vfs") or []]
    if device.get("vfGroups"):
        line += f"  VFs: {', '.join(str(v) for v in vfs) or 'SR-IOV on, none listed'}"
    return line


def render_devices(doc: Any) -> str:
    if not isinstance(doc, dict):
        return str(doc)
    lines = delivery_lines(doc)
    document = doc.get("document") or {}
    devices = (document.get("spec") or {}).get("devices") or []
    lines.append("devices:" if devices else "devices: none")
    lines.extend(_device_line(d) for d in devices)
    labels = (document.get("metadata") or {}).get("labels") or {}
    if labels:
        lines.append("labels:")
        lines.extend(f"  {k}: {v}" for k, v in sorted(labels.items()))
    for problem in doc.get("problems") or []:
        lines.append(f"left out: {problem}")
    share = doc.get("node_resources")
    if isinstance(share, dict):
        values = share.get("values") or {}
        lines.append(f"node share: {share.get('state')} (publisher: {share.get('publisher')})"
                     + (f": {share['detail']}" if share.get("detail") else ""))
        lines.extend(f"  {k}: {v}" for k, v in sorted(values.items()))
        if not values:
            lines.append("  (no healthy GPU or RDMA device: nothing to offer)")
    return "\n".join(lines if document else [*lines, "(no document built yet)"])
