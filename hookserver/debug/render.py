"""Render any debug reply for a terminal: rows as a table, objects as `key: value` lines.

The server decides the shape (a list of flat row objects, or an object that may nest), and this
module needs no knowledge of any command, so a new field or a new provider-backed command shows up
in hookctl without a change here. Text from the store (annotations, error messages) is untrusted:
control characters are escaped so a crafted value cannot rewrite the user's terminal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hookserver.debug.encoding import format_age
from hookserver.debug.render_gpu import gpu_container_rows, gpu_node_lines, gpu_pod_cells, nodemetric_gpu_rows

__all__ = ["render", "render_nodemetric", "render_predict", "render_reclaimable", "render_table", "render_top"]

_INDENT = "  "
_NONE = "(none)"


def _clean(text: str) -> str:
    """One line, with control characters shown as escapes instead of being sent to the terminal."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def _scalar(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _float(value)
    return _clean(str(value))


def _float(value: float) -> str:
    """People read rates and sizes, not 17 digits: whole numbers as integers, others to 3 decimals.
    `-o json` keeps the exact value."""
    if value != value or value in (float("inf"), float("-inf")):
        return str(value)
    if value.is_integer():
        return str(int(value))
    return f"{value:.3f}".rstrip("0").rstrip(".")


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _cell(value: Any) -> str:
    """A table cell: scalars as is, small mappings as k=v pairs, lists comma-joined."""
    if isinstance(value, Mapping):
        return ",".join(f"{_clean(str(k))}={_cell(v)}" for k, v in value.items()) or "-"
    if isinstance(value, list):
        return ",".join(_cell(v) for v in value) or "-"
    return _scalar(value)


def _is_rows(items: Sequence[Any]) -> bool:
    """A list prints as a table when every item is an object of scalars."""
    return bool(items) and all(
        isinstance(item, Mapping) and all(_is_scalar(v) for v in item.values()) for item in items
    )


def render_table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Columns are the union of keys in first-seen order; headers upper-case, as kubectl does."""
    columns: list[str] = []
    for row in rows:
        for key in row:
            if key not in columns:
                columns.append(key)
    header = [_clean(c).upper() for c in columns]
    body = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(header[i]), *(len(r[i]) for r in body)) for i in range(len(columns))]
    lines = []
    for cells in [header, *body]:
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(cells)).rstrip())
    return lines


def _list_lines(items: Sequence[Any], pad: str) -> list[str]:
    if not items:
        return [pad + _NONE]
    if _is_rows(items):
        return [pad + line for line in render_table(items)]
    lines: list[str] = []
    for item in items:
        if isinstance(item, Mapping) and item:
            block = _object_lines(item, pad + _INDENT)
            block[0] = pad + "- " + block[0][len(pad) + len(_INDENT):]
            lines.extend(block)
        elif isinstance(item, list):
            lines.append(pad + "-")
            lines.extend(_list_lines(item, pad + _INDENT))
        else:
            lines.append(pad + "- " + _cell(item))
    return lines


def _object_lines(obj: Mapping[str, Any], pad: str) -> list[str]:
    if not obj:
        return [pad + _NONE]
    lines: list[str] = []
    for key, value in obj.items():
        name = _clean(str(key))
        if isinstance(value, Mapping):
            if value:
                lines.append(f"{pad}{name}:")
                lines.extend(_object_lines(value, pad + _INDENT))
            else:
                lines.append(f"{pad}{name}: -")
        elif isinstance(value, list):
            if value and all(_is_scalar(v) for v in value):
                lines.append(f"{pad}{name}: {', '.join(_scalar(v) for v in value)}")
            elif not value:
                lines.append(f"{pad}{name}: {_NONE}")
            else:
                lines.append(f"{pad}{name}:")
                lines.extend(_list_lines(value, pad + _INDENT))
        else:
            lines.append(f"{pad}{name}: {_scalar(value)}")
    return lines


def render(doc: Any) -> str:
    """The human form of a reply document (already decoded from JSON)."""
    if isinstance(doc, Mapping):
        lines = _object_lines(doc, "")
    elif isinstance(doc, list):
        lines = _list_lines(doc, "")
    else:
        lines = [_scalar(doc)]
    return "\n".join(lines)


def _bytes(value: Any) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "-"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return "-"  # unreachable: the loop returns at TiB


def _cores(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


def _now_p95(stat: Any, fmt: Any) -> tuple[str, str]:
    if not isinstance(stat, Mapping):
        return "-", "-"
    return fmt(stat.get("now")), fmt(stat.get("p95"))


def render_top(doc: Any) -> str:
    """`hookctl top` for people: a node line, then one row per pod with CPU and memory now and at p95. On a GPU
    node also a line per GPU, the pods' GPU use, and the containers on each GPU (render_gpu.py).

    Falls back to the generic rendering for a document of another shape (an older or newer server)."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("node"), Mapping) or not isinstance(doc.get("pods"), list):
        return render(doc)
    node = doc["node"]
    cpu, cpu95 = _now_p95(node.get("cpu_cores"), _cores)
    mem, mem95 = _now_p95(node.get("memory_bytes"), _bytes)
    sys_cpu, sys_cpu95 = _now_p95(node.get("system_cpu_cores"), _cores)
    be_cpu, be_cpu95 = _now_p95(node.get("be_cpu_cores"), _cores)
    window = doc.get("window_s")
    lines = [
        f"node: cpu {cpu} cores (p95 {cpu95}), memory {mem} (p95 {mem95}) of {_bytes(node.get('memory_total_bytes'))}",
        f"      system cpu {sys_cpu} (p95 {sys_cpu95}), best-effort cpu {be_cpu} (p95 {be_cpu95}); "
        f"p95 over {_scalar(window)}s",
        *gpu_node_lines(node, _bytes),
        "",
    ]
    gpu_pods = any(isinstance(pod, Mapping) and pod.get("gpus") for pod in doc["pods"])
    rows = []
    for pod in doc["pods"]:
        if not isinstance(pod, Mapping):
            continue
        pcpu, pcpu95 = _now_p95(pod.get("cpu_cores"), _cores)
        pmem, pmem95 = _now_p95(pod.get("memory_bytes"), _bytes)
        name = f"{pod.get('namespace')}/{pod.get('name')}" if pod.get("name") else str(pod.get("uid", "?"))
        row = {"pod": name, "qos": pod.get("qos") or "-", "priority": pod.get("priority_class") or "-",
               "cpu": pcpu, "cpu_p95": pcpu95, "memory": pmem, "memory_p95": pmem95}
        rows.append(row | gpu_pod_cells(pod, _bytes) if gpu_pods else row)
    lines.extend(render_table(rows) if rows else ["(no pod samples yet)"])
    containers = gpu_container_rows(doc["pods"], _bytes)
    if containers:
        lines.extend(["", "GPU use by container:", *render_table(containers)])
    return "\n".join(lines)


# -- predictor: `hookctl predict` and `hookctl reclaimable` --------------------------------------------------

_PCTS = ("p60", "p90", "p95", "p98", "max")


def _milli(value: Any) -> str:
    return _cores(value / 1000) if isinstance(value, int) and not isinstance(value, bool) else "-"


def _age(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool):
        return "-"
    return format_age(float(seconds))


def render_predict(doc: Any) -> str:
    """A row per model: CPU (cores) and memory percentiles, samples, age, cold; then training and checkpoints."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("models"), list):
        return render(doc)
    rows = []
    for model in doc["models"]:
        if not isinstance(model, Mapping):
            continue
        cpu = _mapping(model.get("cpu_milli"))
        mem = _mapping(model.get("memory_bytes"))
        cold = model.get("cold")
        row: dict[str, Any] = {
            "model": model.get("pod") or model.get("model"),
            "kind": model.get("kind"),
            "samples": model.get("samples"),
            "age": _age(model.get("age_s")),
            "cold": "-" if cold is None else ("yes" if cold else "no"),
        }
        row |= {f"cpu_{p}": _milli(cpu.get(p)) for p in _PCTS}
        row |= {f"mem_{p}": _bytes(mem.get(p)) for p in _PCTS}
        rows.append(row)
    lines = [f"models ({_scalar(doc.get('selector'))}): CPU in cores, memory in bytes"]
    lines.extend(render_table(rows) if rows else [f"  {_scalar(doc.get('note')) or _NONE}"])
    for section in ("training", "checkpoints"):
        value = doc.get(section)
        if isinstance(value, Mapping):
            lines.append("")
            lines.append(f"{section}:")
            lines.extend(_object_lines(value, _INDENT))
    return "\n".join(lines)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _cpu_mem(cpu_milli: Any, memory_bytes: Any) -> str:
    return f"cpu {_milli(cpu_milli)} cores, memory {_bytes(memory_bytes)}"


def render_reclaimable(doc: Any) -> str:
    """Each predictor's result, the published minimum, and why: the pods (cold ones at full request), their
    peaks with the margin, and the sums each predictor took, so the number can be checked by hand."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("predictors"), list):
        return render(doc)
    rows = []
    for r in doc["predictors"]:
        if isinstance(r, Mapping):
            rows.append({
                "predictor": r.get("predictor"),
                "cpu": _milli(r.get("cpu_milli")) if not r.get("error") else "-",
                "memory": _bytes(r.get("memory_bytes")) if not r.get("error") else "-",
                "peak_cpu": _milli(r.get("peak_cpu_milli")),
                "peak_memory": _bytes(r.get("peak_memory_bytes")),
                "error": r.get("error") or "",
            })
    lines = ["reclaimable (cores, bytes); published = minPredictor (the per-resource minimum)"]
    lines.extend(render_table(rows))
    why = _mapping(doc.get("why"))
    lines.append("")
    margin = why.get("margin_percent")
    lines.append(
        f"why: peak = p95 cpu / p98 memory x (1 + {_scalar(margin)}%); pods younger than "
        f"{_age(why.get('cold_start_s'))} count their full request as peak; usage window {_scalar(why.get('usage_window_s'))}s"
    )
    alloc = why.get("allocatable")
    if isinstance(alloc, Mapping):
        lines.append(f"  allocatable ({_scalar(alloc.get('source'))}): "
                     f"{_cpu_mem(alloc.get('cpu_milli'), alloc.get('memory_bytes'))}")
    else:
        lines.append("  allocatable: unknown")
    pods = []
    for p in why.get("pods") or []:
        if not isinstance(p, Mapping):
            continue
        predicted = p.get("counted_as") == "predicted"
        pods.append({
            "pod": f"{p.get('namespace')}/{p.get('name')}",
            "class": p.get("priority_class") or "none",
            "counted_as": p.get("counted_as"),
            "age": _age(p.get("age_s")),
            "req_cpu": _milli(p.get("request_cpu_milli")),
            "p95_cpu": _milli(p.get("p95_cpu_milli")) if predicted else "-",
            "peak_cpu": _milli(p.get("peak_cpu_milli")),
            "reclaim_cpu": _milli(p.get("reclaimable_cpu_milli")),
            "req_mem": _bytes(p.get("request_memory_bytes")),
            "p98_mem": _bytes(p.get("p98_memory_bytes")) if predicted else "-",
            "peak_mem": _bytes(p.get("peak_memory_bytes")),
            "reclaim_mem": _bytes(p.get("reclaimable_memory_bytes")),
        })
    lines.append("  pods:")
    if pods:
        lines.extend("    " + line for line in render_table(pods))
    else:
        lines.append("    (none)")
    for key in ("formulas", "pod_based", "priority_based", "minimum"):
        value = why.get(key)
        if isinstance(value, Mapping) and value:
            lines.append(f"  {key}:")
            lines.extend(_object_lines(value, "    "))
    return "\n".join(lines)


def _rm(value: Any) -> str:
    """A NodeMetric ResourceMap as `cpu X, memory Y`, or `-` when empty (not enough samples yet)."""
    resources = _mapping(_mapping(value).get("resources"))
    if not resources:
        return "-"
    return f"cpu {_scalar(resources.get('cpu'))}, memory {_scalar(resources.get('memory'))}"


def _rm_cell(value: Any) -> str:
    resources = _mapping(_mapping(value).get("resources"))
    return f"{_scalar(resources.get('cpu'))}/{_scalar(resources.get('memory'))}" if resources else "-"


def render_nodemetric(doc: Any) -> str:
    """Where the NodeMetric status goes and how the last report went, then the document as tables."""
    if not isinstance(doc, Mapping) or "target" not in doc:
        return render(doc)
    policy = _mapping(doc.get("policy"))
    durations = ", ".join(_age(d) for d in policy.get("durations_s") or []) or "-"
    lines = [
        f"NodeMetric status -> {_scalar(doc.get('target'))} {_scalar(doc.get('where'))}",
        f"last built {_scalar(doc.get('last_built_at'))}, last reported {_scalar(doc.get('last_reported_at'))}, "
        f"last result {_scalar(doc.get('last_result'))}; {_scalar(doc.get('reports'))} reports, "
        f"{_scalar(doc.get('failures'))} failed",
    ]
    if doc.get("last_error"):
        lines.append(f"last error ({_scalar(doc.get('last_error_at'))}): {_scalar(doc.get('last_error'))}")
    lines.append(
        f"policy ({'NodeMetric spec' if policy.get('from_spec') else 'defaults: no NodeMetric spec'}): report every "
        f"{_scalar(policy.get('report_interval_s'))}s, usage averaged over {_scalar(policy.get('aggregate_s'))}s, "
        f"aggregated over {durations}; memory {_scalar(policy.get('memory_policy'))}"
    )
    for problem in policy.get("problems") or []:
        lines.append(f"  spec problem: {_scalar(problem)}")
    status = _mapping(doc.get("status"))
    if not status:
        lines.append("status: (nothing built yet)")
        return "\n".join(lines)
    node = _mapping(status.get("nodeMetric"))
    lines += ["", f"status (updateTime {_scalar(status.get('updateTime'))}):",
              f"  node usage:   {_rm(node.get('nodeUsage'))}",
              f"  system usage: {_rm(node.get('systemUsage'))}"]
    numa = [{"numa": _mapping(n).get("numaNodeID"), "node": _rm_cell(_mapping(n).get("nodeUsage")),
             "system": _rm_cell(_mapping(n).get("systemUsage"))} for n in node.get("numaUsages") or []]
    if numa:
        lines.append("  NUMA usage (cpu/memory):")
        lines.extend("    " + line for line in render_table(numa))
    for key, title in (("aggregatedNodeUsages", "aggregated node usage"),
                       ("aggregatedSystemUsages", "aggregated system usage")):
        rows = []
        for entry in node.get(key) or []:
            usage = _mapping(_mapping(entry).get("usage"))
            rows.append({"duration": _mapping(entry).get("duration")} |
                        {agg: _rm_cell(usage.get(agg)) for agg in ("avg", "p50", "p90", "p95", "p99")})
        if rows:
            lines.append(f"  {title} (cpu/memory; '-' while the window holds too few samples):")
            lines.extend("    " + line for line in render_table(rows))
    pods = [{"pod": f"{_mapping(p).get('namespace')}/{_mapping(p).get('name')}",
             "usage": _rm_cell(_mapping(p).get("podUsage")), "priority": _mapping(p).get("priority"),
             "qos": _mapping(p).get("qos")} for p in status.get("podsMetric") or []]
    if pods:
        lines.append("  pods (cpu/memory):")
        lines.extend("    " + line for line in render_table(pods))
    else:
        lines.append("  pods: (none with samples)")
    gpus = nodemetric_gpu_rows(status)
    if gpus:
        lines.append("  GPUs (usage devices; core %, memory, memory %):")
        lines.extend("    " + line for line in render_table(gpus))
    apps = [{"app": _mapping(a).get("name"), "usage": _rm_cell(_mapping(a).get("usage")),
             "priority": _mapping(a).get("priority"), "qos": _mapping(a).get("qos")}
            for a in status.get("hostApplicationMetric") or []]
    if apps:
        lines.append("  host applications (cpu/memory):")
        lines.extend("    " + line for line in render_table(apps))
    lines.append(f"  prod reclaimable: {_rm(_mapping(status.get('prodReclaimableMetric')).get('resource'))}")
    lines.append(f"  prod peak:        {_rm(_mapping(status.get('prodPeakMetric')).get('resource'))}")
    return "\n".join(lines)
