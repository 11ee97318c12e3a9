"""`hookctl qos` and `hookctl qos plan NAME` for people: one row per reconciler, the gates and where each
value came from; a plan as its summary, numbers, writes and evictions. Any other shape (an older or newer
server) falls back to the generic rendering; `-o json` is always the server's document.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from hookserver.debug.render import render, render_table

__all__ = ["render_qos", "render_qos_plan"]


def _frees(releases: Any) -> str:
    """What evicting a pod frees, by every count of its round: `request/kubernetes.io/batch-cpu=2000 used/cpu=900`."""
    if not isinstance(releases, Mapping):
        return "-"
    return " ".join(f"{k}={v:g}" if isinstance(v, (int, float)) else f"{k}={v}" for k, v in releases.items()) or "-"


def _age(ts: Any, now: float) -> str:
    if not isinstance(ts, (int, float)) or isinstance(ts, bool) or ts <= 0:
        return "never"
    seconds = max(now - float(ts), 0.0)
    if seconds < 120:
        return f"{seconds:.0f}s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m ago"
    return f"{seconds / 3600:.1f}h ago"


def _short(text: Any, width: int = 70) -> str:
    value = " ".join(str(text or "-").split())
    return value if len(value) <= width else value[: width - 1] + "…"


def render_qos(doc: Any, *, now: float | None = None) -> str:
    if not isinstance(doc, Mapping) or not isinstance(doc.get("reconcilers"), list):
        return render(doc)
    now = time.time() if now is None else now
    rows = []
    for r in doc["reconcilers"]:
        if not isinstance(r, Mapping):
            continue
        gate: Mapping[str, Any] = r["gate"] if isinstance(r.get("gate"), Mapping) else {}
        state = "on" if r.get("enabled") else f"off: {r.get('reason') or '-'}"
        if r.get("dry_run"):
            state += " (dry run)"
        rows.append({
            "reconciler": r.get("name"),
            "gate": _gate_cell(r, gate),
            "state": _short(state, 48),
            "every": f"{r.get('interval_s')}s",
            "last run": _age(r.get("last_run"), now),
            "last plan": _short(r.get("last_summary")),
            "errors": r.get("errors", 0),
            "evicted/1h": r.get("evictions_last_hour", 0),
        })
    lines = render_table(rows) if rows else ["(no reconcilers)"]
    if doc.get("waiting"):
        lines.insert(0, f"not acting yet: {doc.get('waiting')}")
    if doc.get("enabled") is False:
        lines.insert(0, "QoS reconcilers are off (qos.enabled: false): nothing runs; `qos plan` still replays")
    lines.extend(_mode_lines(doc["reconcilers"]))
    errors = [r for r in doc["reconcilers"] if isinstance(r, Mapping) and r.get("last_error")]
    for r in errors:
        lines.append(f"last error of {r.get('name')} ({_age(r.get('last_error_at'), now)}): {_short(r.get('last_error'), 200)}")
    lines.append("")
    lines.append(f"evictions: {doc.get('evictor', '-')}, cool-down {doc.get('eviction_cooldown_s', '-')}s"
                 + ("; DRY RUN: nothing is written or evicted" if doc.get("dry_run") else ""))
    if doc.get("be_tier_missing"):
        lines.append(f"BE tier: {doc.get('be_tier_missing')}; the reconcilers that act on it wait for it")
    if doc.get("be_tier_controllers"):
        lines.append(f"BE tier: {doc.get('be_tier_controllers')} (a state, not an error)")
    lines.extend(_last_evictions(doc.get("last_evictions")))
    lines.extend(_gates(doc.get("gates")))
    lines.extend(_owners_and_originals(doc))
    return "\n".join(lines)


def _last_evictions(rows: Any) -> list[str]:
    """Whom the last evictions were for, when, why and what came of it (all of them: `hookctl events`)."""
    if not isinstance(rows, list) or not rows:
        return []
    table = [{"time": r.get("time"), "pod": r.get("pod"), "by": r.get("reconciler"), "reason": r.get("reason"),
              "result": r.get("status"), "numbers": _short(r.get("message"), 60)}
             for r in rows if isinstance(r, Mapping)]
    return ["last evictions (all: hookctl events):"] + ["  " + line for line in render_table(table)]


def _gates(gates: Any) -> list[str]:
    """The implemented gates as a table; koordlet's other gates (accepted, not implemented) as a second table of
    those that are on or were set, then one line naming the rest (off by default, untouched): 31 rows of
    "false default" would bury the few that matter."""
    if not isinstance(gates, list):
        return []
    rows = [g for g in gates if isinstance(g, Mapping)]
    done = [g for g in rows if g.get("implemented", True)]
    accepted = [g for g in rows if not g.get("implemented", True)]
    lines: list[str] = []

    def table(entries: list[Mapping[str, Any]]) -> list[str]:
        return ["  " + line for line in render_table([
            {"gate": g.get("name"), "value": g.get("enabled"), "from": g.get("source"), "default": g.get("default")}
            for g in entries
        ])]

    if done:
        lines.append("feature gates:")
        lines.extend(table(done))
    notable = [g for g in accepted if g.get("enabled") or g.get("source") != "default"]
    quiet = [g for g in accepted if g not in notable]
    if notable:
        lines.append("feature gates accepted, not implemented (koordlet's; hookserver does nothing for them):")
        lines.extend(table(notable))
    if quiet:
        lines.append(f"also accepted, not implemented, false by default: {', '.join(str(g.get('name')) for g in quiet)}")
    return lines


def _gate_cell(row: Mapping[str, Any], gate: Mapping[str, Any]) -> str:
    """`Name=true`, or every gate of a reconciler that carries several modes."""
    many = row.get("gates")
    if isinstance(many, list) and len(many) > 1:
        return ",".join(f"{g.get('name')}={'true' if g.get('enabled') else 'false'}" for g in many if isinstance(g, Mapping))
    return f"{gate.get('name')}={'true' if gate.get('enabled') else 'false'}"


def _mode_lines(rows: list[Any]) -> list[str]:
    """The eviction modes of the last round, one line each (the plan's notes: threshold, usage or requests vs
    allocatable, release target, pending release, how many it picked, or why it was skipped or held)."""
    lines: list[str] = []
    for r in rows:
        if not isinstance(r, Mapping) or not isinstance(r.get("gates"), list) or len(r["gates"]) < 2:
            continue
        notes = [n for n in r.get("last_notes") or [] if isinstance(n, str)]
        if notes:
            lines.append(f"{r.get('name')} modes, last round:")
            lines.extend(f"  {_short(n, 200)}" for n in notes)
    return lines


def _mode_numbers(numbers: Mapping[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """A round's numbers grouped by mode (`<mode>.<name>`), and the rest."""
    modes = [m for m in str(numbers.get("modes", "")).split(",") if m]
    if not modes:
        return [], dict(numbers)
    lines: list[str] = []
    rest = {k: v for k, v in numbers.items() if k != "modes" and not any(k.startswith(m + ".") for m in modes)}
    for mode in modes:
        own = {k[len(mode) + 1:]: v for k, v in numbers.items() if k.startswith(mode + ".")}
        lines.append(f"mode {mode}:" + ("" if own else " (no numbers)"))
        lines.extend(f"  {k}: {v}" for k, v in own.items())
    return lines, rest


def _owners_and_originals(doc: Mapping[str, Any]) -> list[str]:
    """Which feature owns how many knobs (the list: -o json), and the node values recorded before the agent
    first changed them: what `hookserver cleanup` puts back."""
    lines: list[str] = []
    owners = doc.get("knob_owners")
    if isinstance(owners, Mapping) and owners:
        counts = ", ".join(f"{name} ({len(k) if isinstance(k, list) else '?'})" for name, k in sorted(owners.items()))
        lines.append(f"knob owners: {counts}; the knobs: -o json")
    originals = doc.get("originals")
    if isinstance(originals, Mapping):
        entries = [f"  {kind} {key} = {value}" for kind, table in sorted(originals.items()) if isinstance(table, Mapping)
                   for key, value in sorted(table.items())]
        lines.append("originals (what `hookserver cleanup` restores):" + ("" if entries else " (none recorded)"))
        lines.extend(entries)
    return lines


def render_qos_plan(doc: Any) -> str:
    plan = doc.get("plan") if isinstance(doc, Mapping) else None
    if not isinstance(plan, Mapping):
        return render(doc)
    gate: Mapping[str, Any] = doc["gate"] if isinstance(doc.get("gate"), Mapping) else {}
    many = doc.get("gates")
    gates = (f"gates {_gate_cell(doc, gate)}" if isinstance(many, list) and len(many) > 1
             else f"gate {gate.get('name')}={'true' if gate.get('enabled') else 'false'} ({gate.get('source')})")
    lines = [
        f"{doc.get('reconciler')} under the NodeSLO from {doc.get('slo_origin')}: "
        f"{'enabled' if doc.get('enabled') else 'disabled'} ({doc.get('reason')}); {gates}",
        f"plan: {plan.get('summary')}",
    ]
    lines.extend(f"note: {n}" for n in doc.get("notes") or [])
    summary = str(plan.get("summary") or "")
    lines.extend(f"note: {n}" for n in plan.get("notes") or [] if str(n) not in summary)  # a round's mode lines are its summary
    numbers = plan.get("numbers")
    if isinstance(numbers, Mapping) and numbers:
        by_mode, rest = _mode_numbers(numbers)
        lines.extend(by_mode)
        if rest:
            lines.append("numbers:")
            lines.extend(f"  {k}: {v}" for k, v in rest.items())
    writes = plan.get("writes") or []
    if writes:
        lines.append("would write:")
        lines.extend("  " + line for line in render_table([
            {"level": w.get("level"), "cgroup": w.get("cgroup"), "file": w.get("file"), "value": w.get("value")}
            for w in writes if isinstance(w, Mapping)
        ]))
        reasons = sorted({str(w.get("reason")) for w in writes if isinstance(w, Mapping) and w.get("reason")})
        lines.extend(f"  why: {r}" for r in reasons)
    actions = plan.get("actions") or []
    if actions:
        lines.append("would also write:")
        lines.extend("  " + line for line in render_table([
            {"kind": a.get("kind"), "target": a.get("target"), "value": a.get("value"), "why": a.get("reason")}
            for a in actions if isinstance(a, Mapping)
        ]))
    evict = doc.get("would_evict") or []
    pending = [e for e in doc.get("pending_release") or [] if isinstance(e, Mapping)]
    if pending:
        lines.append("already on their way out (evicted within the cool-down or terminating), counted as released:")
        lines.extend("  " + line for line in render_table([
            {"pod": e.get("pod"), "mode": e.get("mode"), "frees": _frees(e.get("releases"))} for e in pending
        ]))
    if evict:
        lines.append("would evict, in order:")
        lines.extend("  " + line for line in render_table([
            {"pod": e.get("pod"), **({"mode": e.get("mode"), "frees": _frees(e.get("releases"))} if e.get("mode") else {}),
             "reason": e.get("reason"), **{k: v for k, v in (e.get("numbers") or {}).items() if k != "releases"}}
            for e in evict if isinstance(e, Mapping)
        ]))
        seen: set[Any] = set()
        for e in evict:
            if isinstance(e, Mapping) and e.get("mode") not in seen:
                seen.add(e.get("mode"))
                lines.append(f"  why{' (' + str(e.get('mode')) + ')' if e.get('mode') else ''}: {e.get('message')}")
    if not writes and not evict and not actions:
        lines.append("nothing would be written or evicted")
    lines.append("(replay: nothing was written or evicted)")
    return "\n".join(lines)
