"""The HTML report: one self-contained page (plotly.js inlined, no network) with the side-by-side table, time
series of the batch offer, BE suppression, the predicted peak against real use, the evictions, and the
distributions behind the safety number.

Plotly is an optional extra (`pip install 'hookserver[report]'`), imported only here: the agent never loads it.
It was chosen over matplotlib because its pages are interactive (zoom into the hour that matters, hover for a
value) and still a single file that opens offline; matplotlib would give static images.
"""

from __future__ import annotations

import datetime as dt
import html
from typing import Any

from hookserver.recorder.replay import ReplayRun
from hookserver.recorder.summary import Comparison

__all__ = ["CHARTS", "render_html", "write_report"]

_MAX_POINTS = 2000
_COLORS = {"recorded": "#1f77b4", "proposed": "#d62728"}
# The charts a report holds, in order (the browser test counts them).
CHARTS = ("batch-cpu", "batch-memory", "be-cpu", "prediction", "evictions", "overshoot", "be-distribution",
          "cpu-burst", "memory-qos")


def _x(ts: list[float]) -> list[str]:
    return [dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S") for t in ts]


def _thin(ts: list[float], *series: list[Any]) -> tuple[list[float], ...]:
    """At most _MAX_POINTS points: the page stays small and fast; each kept point is a real sample."""
    step = max(1, len(ts) // _MAX_POINTS)
    return (ts[::step], *(s[::step] for s in series))


def _color(run: ReplayRun) -> str:
    return _COLORS.get(run.label, "#2ca02c")


def _line(run: ReplayRun) -> dict[str, Any]:
    """Recorded solid and wide, proposed dashed and narrow on top: where the two are equal both stay visible."""
    proposed = run.label != "recorded"
    return {"color": _color(run), "shape": "hv", "width": 1.5 if proposed else 3, "dash": "dash" if proposed else "solid"}


def _diverged_spans(cmp: Comparison, *, gap_frames: int = 2, limit: int = 200) -> list[tuple[float, float]]:
    """Runs of frames where the proposal's node is not the recorded one (joined across short gaps)."""
    ts, why = cmp.proposed.frame_ts, cmp.proposed.diverged
    step = (ts[-1] - ts[0]) / (len(ts) - 1) if len(ts) > 1 else 10.0
    spans: list[tuple[float, float]] = []
    for t, w in zip(ts, why):
        if not w:
            continue
        if spans and t - spans[-1][1] <= gap_frames * step:
            spans[-1] = (spans[-1][0], t)
        else:
            spans.append((t, t))
    return spans[:limit]


def _mark_counterfactual(fig: Any, cmp: Comparison) -> None:
    for lo, hi in _diverged_spans(cmp):
        fig.add_vrect(x0=_x([lo])[0], x1=_x([hi])[0], fillcolor="#f4cccc", opacity=0.35, line_width=0, layer="below")


def _empty(fig: Any, text: str) -> None:
    fig.add_annotation(text=text, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5, font={"size": 14})
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)


def _figures(cmp: Comparison) -> list[tuple[str, str, Any]]:
    import plotly.graph_objects as go

    runs = (cmp.recorded, cmp.proposed)
    layout: dict[str, Any] = {"height": 380, "margin": {"l": 60, "r": 20, "t": 40, "b": 90},
                              "legend": {"orientation": "h", "y": -0.3}, "template": "plotly_white"}
    span = [_x([cmp.start])[0], _x([cmp.end])[0]]
    shaded = " Shaded: frames where the proposal's node is not the recorded one (see above)." if any(
        cmp.proposed.diverged) else ""
    out = []

    for resource, key, unit, scale in (("batch-cpu", "batch_cpu_milli", "cores", 1000.0),
                                       ("batch-memory", "batch_memory_bytes", "GiB", float(2**30))):
        fig = go.Figure()
        if cmp.no_capacity:
            _empty(fig, "Colocation is disabled in both runs (or no node facts): nothing is offered to batch pods.")
            text = "Not meaningful here (see the note above): nothing is plotted as zero."
        else:
            for run in runs:
                ts, values = _thin(run.capacity_ts, getattr(run, key))
                fig.add_trace(go.Scatter(x=_x(ts), y=[v / scale for v in values], name=run.label, mode="lines",
                                         line=_line(run)))
            _mark_counterfactual(fig, cmp)
            fig.update_layout(xaxis_title="time (UTC)", yaxis_title=unit)
            text = f"The batch offer over time: what the capacity formula would publish ({unit})." + shaded
        fig.update_layout(title=f"{resource} offered to batch pods ({unit})", **layout)
        out.append((resource, text, fig))

    fig = go.Figure()
    ts, ls, node = _thin(cmp.recorded.frame_ts, cmp.recorded.ls_cpu_cores, cmp.recorded.node_cpu_cores)
    fig.add_trace(go.Scatter(x=_x(ts), y=node, name="node CPU used", mode="lines", line={"color": "#999", "width": 1}))
    fig.add_trace(go.Scatter(x=_x(ts), y=ls, name="LS pods' CPU used", mode="lines", line={"color": "#ff7f0e", "width": 1}))
    t2, be_used = _thin(cmp.recorded.frame_ts, cmp.recorded.be_used_cores)
    fig.add_trace(go.Scatter(x=_x(t2), y=be_used, name="BE pods' CPU used (recorded)", mode="lines",
                             line={"color": "#9467bd", "width": 1}))
    for run in runs:
        t2, be = _thin(run.frame_ts, run.be_cpu_cores)
        fig.add_trace(go.Scatter(x=_x(t2), y=be, name=f"BE CPUs allowed, {run.label}", mode="lines", line=_line(run)))
    _mark_counterfactual(fig, cmp)
    fig.update_layout(title="BE CPU suppression: CPUs BE may use, and what BE used (cores)", xaxis_title="time (UTC)",
                      yaxis_title="cores", **layout)
    out.append(("be-cpu", "What CPU suppress leaves BE pods, against what BE, LS and the node really used." + shaded,
                fig))

    fig = go.Figure()
    predicted = any(p for run in runs for p in run.predicted_cpu_milli)
    if predicted:
        ts, actual = _thin(cmp.recorded.frame_ts, cmp.recorded.actual_prod_cpu_milli)
        fig.add_trace(go.Scatter(x=_x(ts), y=[a / 1000 for a in actual], name="LS (prod) CPU used", mode="lines",
                                 line={"color": "#ff7f0e", "width": 1}))
        for run in runs:
            t2, pred = _thin(run.frame_ts, run.predicted_cpu_milli)
            fig.add_trace(go.Scatter(x=_x(t2), y=[None if p is None else p / 1000 for p in pred],
                                     name=f"predicted peak, {run.label}", mode="lines", line=_line(run)))
        fig.update_layout(xaxis_title="time (UTC)", yaxis_title="cores")
    else:
        _empty(fig, "No predicted peak in this recording: no prod pod with a request reached the predictor.")
    fig.update_layout(title="Predicted LS peak against the usage that followed (cores)", **layout)
    out.append(("prediction", "Where the orange line rises above a prediction, LS used more than was held back for it."
                if predicted else "Not meaningful here (see the note above): nothing is plotted as zero.", fig))

    fig = go.Figure()
    for run in runs:
        fig.add_trace(go.Scatter(
            x=_x([e["ts"] for e in run.evictions]), y=[run.label] * len(run.evictions), mode="markers",
            name=f"{run.label} ({len(run.evictions)})", marker={"color": _color(run), "size": 9, "symbol": "x"},
            text=[f"{e['pod']}: {e['reason']}" for e in run.evictions], hoverinfo="x+text"))
    if not any(run.evictions for run in runs):
        fig.add_annotation(text="no evictions in either run", showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    _mark_counterfactual(fig, cmp)
    fig.update_layout(title="Evictions over the whole recording", xaxis={"range": span, "title": "time (UTC)"},
                      yaxis={"title": "run", "categoryorder": "array", "categoryarray": [r.label for r in runs]},
                      **{**layout, "height": 240})
    out.append(("evictions", "Each eviction either configuration would have made (hover for the pod and reason)."
                + shaded, fig))

    fig = go.Figure()
    if predicted:
        for run in runs:
            over = [(a - p) / 1000 for p, a in zip(run.predicted_cpu_milli, run.actual_prod_cpu_milli) if p is not None]
            fig.add_trace(go.Histogram(x=over, name=run.label, opacity=0.6, marker={"color": _color(run)}, nbinsx=60))
        fig.add_vline(x=0, line={"color": "black", "dash": "dash"})
        fig.update_layout(xaxis_title="cores", yaxis_title="frames")
    else:
        _empty(fig, "No predicted peak in this recording: no distribution to show.")
    fig.update_layout(title="LS CPU used minus predicted peak (cores; right of 0 = above the prediction)",
                      barmode="overlay", **layout)
    out.append(("overshoot", "The distribution behind the safety number.", fig))

    fig = go.Figure()
    for run in runs:
        fig.add_trace(go.Histogram(x=run.be_cpu_cores, name=run.label, opacity=0.6, marker={"color": _color(run)}))
    fig.update_layout(title="How many CPUs BE had, over the time recorded", barmode="overlay", xaxis_title="CPUs",
                      yaxis_title="frames", **layout)
    out.append(("be-distribution", "The distribution of the suppress level.", fig))
    out += _part2_figures(cmp, layout, shaded)
    return out


def _part2_figures(cmp: Comparison, layout: dict[str, Any], shaded: str) -> list[tuple[str, str, Any]]:
    """CPU burst (the LS containers' CFS quota and burst) and memory QoS (memory.min and memory.low given to pods)."""
    import plotly.graph_objects as go

    runs = (cmp.recorded, cmp.proposed)
    out = []
    fig = go.Figure()
    if any(q is not None for run in runs for q in run.ls_quota_cores):
        ts, used = _thin(cmp.recorded.frame_ts, cmp.recorded.ls_cpu_cores)
        fig.add_trace(go.Scatter(x=_x(ts), y=used, name="LS pods' CPU used (recorded)", mode="lines",
                                 line={"color": "#ff7f0e", "width": 1}))
        for run in runs:
            t2, quota = _thin(run.frame_ts, run.ls_quota_cores)
            fig.add_trace(go.Scatter(x=_x(t2), y=quota, name=f"LS CFS quota, {run.label}", mode="lines", line=_line(run)))
            t2, burst = _thin(run.frame_ts, run.ls_burst_cores)
            fig.add_trace(go.Scatter(x=_x(t2), y=burst, name=f"LS CFS burst, {run.label}", mode="lines",
                                     line={**_line(run), "dash": "dot"}))
        _mark_counterfactual(fig, cmp)
        fig.update_layout(xaxis_title="time (UTC)", yaxis_title="cores")
        text = ("What CPU burst lets LS containers use (their CFS quota together, and the CFS burst they may run "
                "over it), against what LS used." + shaded)
    else:
        _empty(fig, "No container facts in this recording: CPU burst could not be replayed.")
        text = "Not meaningful here: the recording has no container facts (an older format, or none were read)."
    fig.update_layout(title="CPU burst: LS containers' CFS quota and CFS burst (cores)", **layout)
    out.append(("cpu-burst", text, fig))

    fig = go.Figure()
    if any(v is not None for run in runs for v in run.memory_min_bytes):
        for run in runs:
            for key, what in (("memory_min_bytes", "memory.min"), ("memory_low_bytes", "memory.low"),
                              ("memory_high_bytes", "memory.high (limited pods)")):
                t2, values = _thin(run.frame_ts, getattr(run, key))
                fig.add_trace(go.Scatter(x=_x(t2), y=[None if v is None else v / 2**30 for v in values],
                                         name=f"{what}, {run.label}", mode="lines", line=_line(run)))
        _mark_counterfactual(fig, cmp)
        fig.update_layout(xaxis_title="time (UTC)", yaxis_title="GiB")
        text = ("The memory every pod is guaranteed (memory.min) and protected (memory.low), together, and where "
                "the pods it limits are throttled (memory.high, together)." + shaded)
    else:
        _empty(fig, "Memory QoS planned nothing in this recording (off, or no container facts).")
        text = "Not meaningful here: memory QoS skipped every frame in both runs."
    fig.update_layout(title="Memory QoS: memory.min, memory.low and memory.high given to pods (GiB)", **layout)
    out.append(("memory-qos", text, fig))
    return out


def _table(cmp: Comparison) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(label)}</td><td>{html.escape(a)}</td><td>{html.escape(b)}</td>"
        f"<td>{html.escape(change)}</td></tr>" for label, a, b, change in cmp.rows)
    return (f"<table class='summary'><thead><tr><th></th><th>{html.escape(cmp.recorded.label)}</th>"
            f"<th>{html.escape(cmp.proposed.label)}</th><th>change</th></tr></thead><tbody>{rows}</tbody></table>")


def _eviction_table(run: ReplayRun, limit: int = 50) -> str:
    if not run.evictions:
        return f"<p>{html.escape(run.label)}: no evictions.</p>"
    rows = "".join(
        f"<tr><td>{_x([e['ts']])[0]}</td><td>{html.escape(e['pod'])}</td><td>{html.escape(e['reason'])}</td>"
        f"<td>{html.escape(e['message'])}</td></tr>" for e in run.evictions[:limit])
    more = f"<p>... and {len(run.evictions) - limit} more</p>" if len(run.evictions) > limit else ""
    return (f"<h3>Evictions, {html.escape(run.label)} ({len(run.evictions)})</h3><table class='evictions'>"
            f"<thead><tr><th>when (UTC)</th><th>pod</th><th>reason</th><th>why</th></tr></thead><tbody>{rows}"
            f"</tbody></table>{more}")


def _proposal(cmp: Comparison) -> str:
    """The effective proposal as a diff against the recording, and what the replay assumed: a saved page says
    what "proposed" was."""
    items = "".join(f"<li><code>{html.escape(line)}</code></li>" for line in cmp.proposal or ["(not given)"])
    out = f"<section class='proposal'><h2>Proposal</h2><ul>{items}</ul>"
    if cmp.unchanged:
        out += "<p class='unchanged'><b>No change:</b> every series of the proposed run equals the recorded one.</p>"
    diverged = cmp.diverged_frames()
    if diverged:
        kinds: dict[str, list[float]] = {}
        for ts, why in diverged:
            kinds.setdefault(why, []).append(ts)
        rows = "".join(f"<li>{len(tss)} frames from {_x([tss[0]])[0]} UTC: {html.escape(why)}</li>"
                       for why, tss in kinds.items())
        out += (f"<p class='counterfactual'><b>Counterfactual:</b> {len(diverged)} of {cmp.frames} frames are not "
                f"the recorded node; the replay assumed there:</p><ul>{rows}</ul>")
    out += "".join(f"<p class='note'>{html.escape(note)}</p>" for note in cmp.notes)
    return out + "</section>"


def render_html(cmp: Comparison, *, title: str = "hookserver replay") -> str:
    parts = []
    for i, (name, caption, fig) in enumerate(_figures(cmp)):
        div = fig.to_html(full_html=False, include_plotlyjs=(i == 0), div_id=f"chart-{name}",
                          config={"displaylogo": False})
        parts.append(f"<section class='chart' data-chart='{name}'>{div}<p class='caption'>{html.escape(caption)}</p></section>")
    span = f"{_x([cmp.start])[0]} to {_x([cmp.end])[0]} UTC, {cmp.frames} frames"
    reproduced = (f"Replayed as recorded: {cmp.recorded.matched} of the agent's recorded decisions reproduced, "
                  f"{len(cmp.recorded.mismatches)} not.")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 24px; color: #222; max-width: 1200px; }}
table {{ border-collapse: collapse; margin: 8px 0 16px; }}
td, th {{ border-bottom: 1px solid #ddd; padding: 4px 10px; text-align: right; font-size: 14px; }}
td:first-child, th:first-child {{ text-align: left; }}
table.evictions td {{ text-align: left; font-size: 12px; }}
table.evictions td:nth-child(-n+3) {{ white-space: nowrap; }}
.caption {{ color: #555; font-size: 13px; margin-top: 0; }}
</style></head>
<body>
<h1>{html.escape(title)}</h1>
<p>Node <b>{html.escape(cmp.node or '?')}</b>: {span}. {html.escape(reproduced)}</p>
{_proposal(cmp)}
{_table(cmp)}
{''.join(parts)}
{_eviction_table(cmp.recorded)}
{_eviction_table(cmp.proposed)}
</body></html>
"""


def write_report(cmp: Comparison, path: str, *, title: str = "hookserver replay") -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(render_html(cmp, title=title))
