"""`hookctl capacity` as text: the offer, the state and why, each resource's formula with its terms and sources,
the NUMA zones' batch figures beside the node's, the pods and how each was counted, and the last and next write. `-o json` prints the whole document instead."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hookserver.debug.render import _bytes, _mapping, _milli, render, render_table

__all__ = ["render_capacity"]


def _value(resource: str, value: Any) -> str:
    if not isinstance(value, int):
        return "-"
    return _bytes(value) if resource.endswith("memory") else f"{value}m ({_milli(value)} cores)"


def _pair(value: Any, memory: bool) -> str:
    if not isinstance(value, Mapping):
        return "-"
    return _bytes(value.get("memory_bytes")) if memory else _milli(value.get("cpu_milli"))


def _milli_bytes(value: Any) -> str:
    return _bytes(value / 1000) if isinstance(value, int) and not isinstance(value, bool) else "-"


def _zone_lines(zones: Mapping[str, Any]) -> list[str]:
    """A row per NUMA zone (computed now, and what the NodeResourceTopology carries), their sum beside the
    node's figure, and each zone's two formulas."""
    computed = [z for z in zones.get("computed") or [] if isinstance(z, Mapping)]
    if not computed:
        return ["zones: none computed (no NodeResourceTopology zones with cpu/memory)"]
    published = _mapping(zones.get("published"))
    rows = []
    for zone in computed:
        carried = _mapping(published.get(str(zone.get("zone"))))
        rows.append({"zone": zone.get("zone"), "batch-cpu": _milli(zone.get("batch_cpu_milli")),
                     "batch-memory": _milli_bytes(zone.get("batch_memory_milli_bytes")),
                     "in the NRT": ", ".join(f"{k.rsplit('/', 1)[-1]} {v}" for k, v in carried.items()) or "-"})
    total, node = _mapping(zones.get("sum")), _mapping(zones.get("node"))
    lines = ["zones (NodeResourceTopology, koord-manager's NUMA-level formula; cores, bytes):"]
    lines.extend("  " + row for row in render_table(rows))
    lines.append(f"  sum of zones: cpu {_milli(total.get('batch_cpu_milli'))}, memory "
                 f"{_milli_bytes(total.get('batch_memory_milli_bytes'))}; node before normalization and third-party: "
                 f"cpu {_milli(node.get('batch_cpu_milli'))}, memory {_milli_bytes(node.get('batch_memory_milli_bytes'))}")
    for zone in computed:
        lines.append(f"  {zone.get('zone')} cpu:    {zone.get('cpu_formula')}")
        lines.append(f"  {zone.get('zone')} memory: {zone.get('memory_formula')}")
    return lines


def render_capacity(doc: Any) -> str:
    if not isinstance(doc, Mapping) or "state" not in doc:
        return render(doc)
    publisher = _mapping(doc.get("publisher"))
    destination = _mapping(doc.get("destination"))
    policy = _mapping(doc.get("policy"))
    lines = [
        f"state:     {doc.get('state')}: {doc.get('reason')}",
        f"publisher: {publisher.get('setting')} ({publisher.get('why') or '-'}); field manager "
        f"{publisher.get('field_manager')}; writes to {destination.get('kind')} {destination.get('where')}",
        f"policy:    colocation {'on' if policy.get('enabled') else 'off'}; cpu {policy.get('cpu')}, memory "
        f"{policy.get('memory')}; reclaim thresholds cpu {policy.get('cpu_reclaim_threshold_percent')} % memory "
        f"{policy.get('memory_reclaim_threshold_percent')} %; mid {policy.get('mid_reclaim_mode')}; usage window "
        f"{policy.get('report_window_s')} s, fast window {policy.get('fast_window_s')} s",
        f"           from: {'; '.join(str(x) for x in policy.get('layers') or []) or 'defaults'}",
    ]
    for note in policy.get("notes") or []:
        lines.append(f"           note: {note}")
    offer = _mapping(doc.get("offer"))
    computed = _mapping(doc.get("computed"))
    held = _mapping(doc.get("target"))
    rows = []
    for resource in sorted(set(offer) | set(computed)):
        rows.append({"resource": resource, "offered (this agent)": offer.get(resource, "-"),
                     "computed now": computed.get(resource, "-"),
                     "target (growth hold)": held.get(resource, "-")})
    lines.append("")
    lines.extend(render_table(rows) if rows else ["(nothing computed yet)"])
    for outcome in doc.get("formula") or []:
        if not isinstance(outcome, Mapping):
            continue
        resource = str(outcome.get("resource"))
        lines.append("")
        lines.append(f"{resource} ({outcome.get('policy')}): {outcome.get('formula')}")
        for term in outcome.get("terms") or []:
            if isinstance(term, Mapping):
                how = f"  [{term.get('how')}]" if term.get("how") else ""
                lines.append(f"  {term.get('name'):<30} {_value(resource, term.get('value')):>24}{how}")
    lines.append("")
    lines.extend(_zone_lines(_mapping(doc.get("zones"))))
    pods = []
    for line in doc.get("pods") or []:
        if isinstance(line, Mapping):
            pods.append({
                "pod": line.get("pod"), "class": line.get("priority_class") or "none", "qos": line.get("qos") or "-",
                "counted_as": line.get("counted_as"), "req_cpu": _pair(line.get("request"), False),
                "used_cpu": _pair(line.get("used"), False), "req_mem": _pair(line.get("request"), True),
                "used_mem": _pair(line.get("used"), True), "window": line.get("usage_set_by") or "-",
            })
    lines.append("")
    lines.append("pods (cores, bytes):")
    lines.extend("  " + row for row in (render_table(pods) if pods else ["(none)"]))
    samples = _mapping(doc.get("samples"))
    lines.append("")
    lines.append(f"samples:    newest {samples.get('newest_at') or '-'} (age {samples.get('age_s')} s), "
                 f"history {samples.get('history_s')} s")
    last = _mapping(doc.get("last_write"))
    if last:
        lines.append(f"last write: {last.get('at')} {last.get('action')} -> {last.get('result')}: {last.get('reason')}")
    else:
        lines.append("last write: none by this process")
    lines.append(f"next write: {doc.get('next_write')}")
    lines.append(f"writes in the last hour: {doc.get('writes_last_hour')}; ticks {doc.get('ticks')}, "
                 f"errors {doc.get('errors')}")
    nodemetric = doc.get("nodemetric")
    if isinstance(nodemetric, Mapping) and nodemetric.get("last_result"):
        lines.append(f"nodemetric: {nodemetric.get('where')}: {nodemetric.get('last_result')}"
                     + (f" ({nodemetric.get('last_detail')})" if nodemetric.get("last_detail") else ""))
    for note in doc.get("notes") or []:
        lines.append(f"note: {note}")
    return "\n".join(lines)
