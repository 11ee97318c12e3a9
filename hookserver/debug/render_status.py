"""`hookctl status`: one screen by default, everything with `-v`; and the status document's units.

Why: the full status is 200+ lines (every collector's counters, breakers, gates), which buries the few facts
an operator looks for first: is it up, what mode, is the informer synced, is NRI connected, are hooks or writes
failing, what the reconcilers last did. The summary picks those and names what is wrong; `-v` (and `-o json`)
keep the whole document. `status_units` makes times ISO-8601 and durations milliseconds everywhere in the
document, whatever the area that reported them used (epoch floats and `_s` durations rounded to 0 hid
sub-second runs).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hookserver.debug.encoding import format_ts
from hookserver.debug.render import render

__all__ = ["render_status", "status_units"]


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def status_units(doc: Any) -> Any:
    """A copy with every `*_at` epoch number as ISO-8601 UTC ("" for never) and every `*duration_s` as
    `*duration_ms` (3 decimals)."""
    if isinstance(doc, list):
        return [status_units(v) for v in doc]
    if not isinstance(doc, Mapping):
        return doc
    out: dict[str, Any] = {}
    for key, value in doc.items():
        k = str(key)
        if k.endswith("_at") and (value is None or _number(value)):
            out[k] = format_ts(float(value)) if value else ""
        elif k.endswith("duration_s") and (value is None or _number(value)):
            out[k[:-2] + "_ms"] = round(float(value) * 1000, 3) if value is not None else None
        else:
            out[k] = status_units(value)
    return out


def _get(doc: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(doc, Mapping):
            return None
        doc = doc.get(key)
    return doc


def _section(doc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = doc.get(key)
    return value if isinstance(value, Mapping) else {}


def _recorder(recorder: Mapping[str, Any]) -> str:
    """On or off, the file, its size, the frames and their span, the last write error."""
    state = _text(recorder.get("state"))
    if state != "recording":
        return state + (f": {recorder.get('reason')}" if recorder.get("reason") else "")
    size = recorder.get("bytes")
    mib = f"{float(size) / 2**20:.1f} MiB" if isinstance(size, int | float) else "-"
    line = (f"recording to {_text(recorder.get('file'))} ({mib}), {_text(recorder.get('frames'))} frames from "
            f"{_text(recorder.get('oldest_frame_at'))} to {_text(recorder.get('newest_frame_at'))}")
    if recorder.get("last_error"):
        line += f"; last error {_text(recorder.get('last_error_at'))}: {recorder.get('last_error')}"
    return line


def _text(value: Any, default: str = "-") -> str:
    if value is None or value == "":
        return default
    return str(value)


def _list(value: Any) -> str:
    return ", ".join(str(v) for v in value) or "-" if isinstance(value, list) else _text(value)


def _nri(doc: Mapping[str, Any]) -> str:
    nri = doc.get("nri")
    if not isinstance(nri, Mapping):
        return "off"
    state = _text(nri.get("state"))
    if state == "ready":  # nri.status.ConnState.READY: registered, synchronized, receiving events
        return f"ready: connected to {_text(_get(nri, 'runtime', 'name'))} {_text(_get(nri, 'runtime', 'version'), '')}".rstrip()
    error = nri.get("last_error")
    return f"{state} ({nri.get('reconnects', 0)} reconnects)" + (f"; last error: {error}" if error else "")


def _collectors(doc: Mapping[str, Any]) -> tuple[str, list[str]]:
    table = _get(doc, "collectors", "collectors")
    if not isinstance(table, Mapping):
        return "-", []
    rows = [r for r in table.values() if isinstance(r, Mapping)]
    on = [r for r in rows if r.get("enabled")]
    failing = [r for r in on if r.get("last_error")]
    slowest = max(on, key=lambda r: r.get("last_duration_ms") or 0, default=None)
    line = f"{len(on)} on, {len(rows) - len(on)} off, {len(failing)} failing"
    if slowest is not None and slowest.get("last_duration_ms") is not None:
        line += f"; slowest {slowest.get('name')} {slowest.get('last_duration_ms')} ms"
    problems = [f"collector {r.get('name')}: {r.get('last_error')}" for r in failing]
    return line, problems


def render_status(doc: Any, *, verbose: bool = False) -> str:
    """The summary (or, verbose, every field)."""
    if verbose or not isinstance(doc, Mapping):
        return render(doc)
    problems: list[str] = []
    informer = _section(doc, "informer")
    reconciler = _section(doc, "reconciler")
    qos = _section(doc, "qos")
    cgroup = _section(doc, "cgroup")
    collectors, collector_problems = _collectors(doc)
    problems += collector_problems
    last_pass = _section(reconciler, "last_pass")
    if doc.get("recent_hook_failures"):
        problems.append(f"{doc.get('recent_hook_failures')} of the recent hook calls failed (hookctl events)")
    if doc.get("recent_write_failures"):
        problems.append(f"{doc.get('recent_write_failures')} of the recent writes failed (hookctl writes)")
    if informer and not informer.get("synced"):
        problems.append("the informer has not synced yet")
    if doc.get("store_stale") or informer.get("stale"):
        problems.append("the store is stale: the last source went away; values may be old")
    if reconciler.get("last_error"):
        problems.append(f"reconciler: {reconciler.get('last_error')}")
    if doc.get("info_error"):
        problems.append(f"status: {doc.get('info_error')}")
    if qos.get("be_tier_missing"):
        problems.append(f"BE tier: {qos.get('be_tier_missing')} (a state, not an error)")
    if qos.get("be_tier_controllers"):
        problems.append(f"BE tier: {qos.get('be_tier_controllers')}")
    capacity = _section(doc, "capacity")
    predictor = _section(doc, "predictor")
    recorder = _section(doc, "recorder")
    if recorder.get("last_error"):
        problems.append(f"flight recorder: {recorder.get('last_error')}")
    lines = [
        f"hookserver {_text(doc.get('version'))}  pid {_text(doc.get('pid'))}  mode {_text(doc.get('mode'))}  "
        f"node {_text(doc.get('node'))}  up {_text(doc.get('uptime_s'))} s",
        f"store:       {doc.get('pods', 0)} pods, {doc.get('containers', 0)} containers; NodeSLO {_text(doc.get('node_slo'))}",
        f"hooks:       {doc.get('recent_hook_calls', 0)} recent calls, {doc.get('recent_hook_failures', 0)} failed, "
        f"last {_text(doc.get('last_hook_call'))}; plugins {_list(doc.get('plugins'))}; "
        f"policy {_text(doc.get('failure_policy'))}",
        f"writes:      {doc.get('recent_writes', 0)} recent, {doc.get('recent_write_failures', 0)} failed",
        f"informer:    {_text(informer.get('mode'))}, {'synced' if informer.get('synced') else 'not synced'}"
        f"{', stale' if informer.get('stale') else ''}; started {_text(informer.get('started_at'))}",
        f"nri:         {_nri(doc)}",
        f"reconciler:  {_text(reconciler.get('state'))}; last pass {_text(last_pass.get('at'))} "
        f"({_text(last_pass.get('trigger'))}, {_text(last_pass.get('duration_ms'))} ms); "
        f"{reconciler.get('corrections_total', 0)} corrections, {reconciler.get('errors_total', 0)} errors",
        f"qos:         {'on' if qos.get('enabled') else 'off'}{' (dry run)' if qos.get('dry_run') else ''}; "
        f"evictor {_text(qos.get('evictor'))}; {len(qos.get('reconcilers') or [])} reconcilers (hookctl qos)",
        f"collectors:  {collectors}",
        f"predictor:   {predictor.get('models', 0)} models; NodeMetric -> {_text(predictor.get('nodemetric_target'))} "
        f"(last: {_text(predictor.get('nodemetric_last_result'))})",
        f"capacity:    {_text(capacity.get('state'))}" + (f": {capacity.get('reason')}" if capacity.get("reason") else ""),
        f"recorder:    {_recorder(recorder)}",
        f"cgroup:      {_text(cgroup.get('version'))}, {_text(cgroup.get('driver'))} driver, writes "
        f"{_text(cgroup.get('writes'))}, runtime {_text(cgroup.get('runtime'))}",
    ]
    systemd = _section(doc, "systemd")
    if systemd:
        lines.append(f"systemd:     {_text(systemd.get('mode'))}")
    lines.append("problems:    " + ("none" if not problems else problems[0]))
    lines += ["             " + p for p in problems[1:]]
    lines.append("(hookctl status -v: every field; -o json: the document)")
    return "\n".join(lines)
