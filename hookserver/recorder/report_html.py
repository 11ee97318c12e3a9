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
CHARTS = ("batch-cpu", "batch-memory", "be-cpu", "prediction", "evictions", "overshoot", "be-distribution")


def _x(ts: list[float]) -> list[str]:
    return [dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S") for t in ts]


def _thin(ts: list[float], *series: list[Any]) -> tuple[list[float], ...]:
    """At most _MAX_POINTS points: the page stays small and fast; each kept point is a real sample."""
    step = max(1, len(ts) // _MAX_POINTS)
    return (ts[::step], *(s[::step] for s in series))


def _color(run: ReplayRun) -> str:
    return _COLORS.get(run.label, "#2ca02c")


def _figures(cmp: Comparison) -> list[tuple[str, str, Any]]:
    import plotly.graph_objects as go

    runs = (cmp.recorded, cmp.proposed)
    layout: dict[str, Any] = {"height": 340, "margin": {"l": 60, "r": 20, "t": 40, "b": 40},
                              "legend": {"orientation": "h", "y": -0.2}, "template": "plotly_white"}
    out = []

    for resource, key, unit, scale in (("batch-cpu", "batch_cpu_milli", "cores", 1000.0),
                                       ("batch-memory", "batch_memory_bytes", "GiB", float(2**30))):
        fig = go.Figure()
        for run in runs:
            ts, values = _thin(run.capacity_ts, getattr(run, key))
            fig.add_trace(go.Scatter(x=_x(ts), y=[v / scale for v in values], name=run.label, mode="lines",
                                     line={"color": _color(run), "shape": "hv"}))
        fig.update_layout(title=f"{resource} offered to batch pods ({unit})", yaxis_title=unit, **layout)
        out.append((resource, f"The batch offer over time: what the capacity formula would publish ({unit}).", fig))

    fig = go.Figure()
    ts, ls, node = _thin(cmp.recorded.frame_ts, cmp.recorded.ls_cpu_cores, cmp.recorded.node_cpu_cores)
    fig.add_trace(go.Scatter(x=_x(ts), y=node, name="node CPU used", mode="lines", line={"color": "#999", "width": 1}))
    fig.add_trace(go.Scatter(x=_x(ts), y=ls, name="LS pods' CPU used", mode="lines", line={"color": "#ff7f0e", "width": 1}))
    for run in runs:
        t2, be = _thin(run.frame_ts, run.be_cpu_cores)
        fig.add_trace(go.Scatter(x=_x(t2), y=be, name=f"BE CPUs allowed, {run.label}", mode="lines",
                                 line={"color": _color(run), "shape": "hv"}))
    fig.update_layout(title="BE CPU suppression: CPUs BE may use (cores)", yaxis_title="cores", **layout)
    out.append(("be-cpu", "What CPU suppress leaves BE pods, against what LS pods and the node really used.", fig))

    fig = go.Figure()
    ts, actual = _thin(cmp.recorded.frame_ts, cmp.recorded.actual_prod_cpu_milli)
    fig.add_trace(go.Scatter(x=_x(ts), y=[a / 1000 for a in actual], name="LS (prod) CPU used", mode="lines",
                             line={"color": "#ff7f0e", "width": 1}))
    for run in runs:
        t2, pred = _thin(run.frame_ts, run.predicted_cpu_milli)
        fig.add_trace(go.Scatter(x=_x(t2), y=[None if p is None else p / 1000 for p in pred],
                                 name=f"predicted peak, {run.label}", mode="lines",
                                 line={"color": _color(run), "shape": "hv"}))
    fig.update_layout(title="Predicted LS peak against the usage that followed (cores)", yaxis_title="cores", **layout)
    out.append(("prediction", "Where the orange line rises above a prediction, LS used more than was held back for it.", fig))

    fig = go.Figure()
    for i, run in enumerate(runs):
        fig.add_trace(go.Scatter(
            x=_x([e["ts"] for e in run.evictions]), y=[run.label] * len(run.evictions), mode="markers",
            name=f"{run.label} ({len(run.evictions)})", marker={"color": _color(run), "size": 9, "symbol": "x"},
            text=[f"{e['pod']}: {e['reason']}" for e in run.evictions], hoverinfo="x+text"))
    fig.update_layout(title="Evictions", **{**layout, "height": 220})
    out.append(("evictions", "Each eviction either configuration would have made (hover for the pod and reason).", fig))

    fig = go.Figure()
    for run in runs:
        over = [(a - p) / 1000 for p, a in zip(run.predicted_cpu_milli, run.actual_prod_cpu_milli) if p is not None]
        fig.add_trace(go.Histogram(x=over, name=run.label, opacity=0.6, marker={"color": _color(run)}, nbinsx=60))
    fig.update_layout(title="LS CPU used minus predicted peak (cores; right of 0 = above the prediction)",
                      barmode="overlay", xaxis_title="cores", **layout)
    fig.add_vline(x=0, line={"color": "black", "dash": "dash"})
    out.append(("overshoot", "The distribution behind the safety number.", fig))

    fig = go.Figure()
    for run in runs:
        fig.add_trace(go.Histogram(x=run.be_cpu_cores, name=run.label, opacity=0.6, marker={"color": _color(run)}))
    fig.update_layout(title="How many CPUs BE had, over the time recorded", barmode="overlay", xaxis_title="CPUs",
                      **layout)
    out.append(("be-distribution", "The distribution of the suppress level.", fig))
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
