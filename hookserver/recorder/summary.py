"""The side-by-side figures of two replays, and the plain-text summary for the terminal.

`compare` is what both the text and the HTML report print, so the page and the terminal never disagree.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from hookserver.recorder.replay import ReplayRun

__all__ = ["Comparison", "compare", "render_text"]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


@dataclass(frozen=True)
class Comparison:
    node: str
    start: float
    end: float
    frames: int
    recorded: ReplayRun
    proposed: ReplayRun
    rows: list[tuple[str, str, str, str]]  # figure, recorded, proposed, change
    proposal: tuple[str, ...] = ()  # the effective proposal, as a diff against the recording
    notes: tuple[str, ...] = ()  # what the figures cannot say, in words

    @property
    def no_capacity(self) -> bool:
        """Neither run offered anything because colocation was off (or no node facts): the batch series say
        nothing about the proposal."""
        return _no_colocation(self.recorded, self.proposed)

    @property
    def unchanged(self) -> bool:
        """Every series of the proposed run equals the recorded run's, frame for frame."""
        return _series(self.recorded) == _series(self.proposed)

    def diverged_frames(self) -> list[tuple[float, str]]:
        """(time, what the replay assumed) of each frame where the proposal's node is not the recorded one."""
        return [(ts, why) for ts, why in zip(self.proposed.frame_ts, self.proposed.diverged) if why]

    def describe(self) -> dict[str, Any]:
        return {"node": self.node, "start": self.start, "end": self.end, "frames": self.frames,
                "proposal": list(self.proposal), "unchanged": self.unchanged, "notes": list(self.notes),
                "diverged": [{"ts": ts, "assumed": why} for ts, why in self.diverged_frames()],
                "rows": [dict(zip(("figure", "recorded", "proposed", "change"), r)) for r in self.rows],
                "reproduced": {"matched": self.recorded.matched, "mismatched": len(self.recorded.mismatches)},
                "evictions": {"recorded": self.recorded.evictions, "proposed": self.proposed.evictions}}


def _present(values: list[Any]) -> list[float]:
    return [float(v) for v in values if v is not None]


def _figures(run: ReplayRun) -> dict[str, float]:
    cpu, mem = run.safety("cpu"), run.safety("memory")
    be = run.be_cpu_cores
    return {
        "ls_quota_mean": _mean(_present(run.ls_quota_cores)),
        "ls_burst_mean": _mean(_present(run.ls_burst_cores)),
        "burst_up": float(sum(run.burst_scaled_up)),
        "burst_down": float(sum(run.burst_scaled_down)),
        "memory_min_mean": _mean(_present(run.memory_min_bytes)) / 2**30,
        "memory_low_mean": _mean(_present(run.memory_low_bytes)) / 2**30,
        "memory_high_mean": _mean(_present(run.memory_high_bytes)) / 2**30,
        "batch_core_hours": run.core_hours(),
        "batch_gib_hours": run.gib_hours(),
        "batch_cpu_mean": _mean([v / 1000 for v in run.batch_cpu_milli]),
        "batch_cpu_min": min((v / 1000 for v in run.batch_cpu_milli), default=0.0),
        "be_cpu_mean": _mean(be),
        "be_cpu_min": min(be, default=0.0),
        "suppressed_fraction": (sum(1 for v in be if v < run.cpu_capacity_cores) / len(be)) if be else 0.0,
        "evictions": float(len(run.evictions)),
        "cpu_exceeded": cpu["exceeded_fraction"],
        "cpu_max_over": cpu["max_over"],
        "mem_exceeded": mem["exceeded_fraction"],
        "mem_max_over": mem["max_over"],
    }


_ROWS: tuple[tuple[str, str, str], ...] = (
    ("batch_core_hours", "batch-cpu offered (core-hours)", "{:.1f}"),
    ("batch_gib_hours", "batch-memory offered (GiB-hours)", "{:.1f}"),
    ("batch_cpu_mean", "batch-cpu offered, mean (cores)", "{:.2f}"),
    ("batch_cpu_min", "batch-cpu offered, lowest (cores)", "{:.2f}"),
    ("be_cpu_mean", "BE CPU after suppress, mean (cores)", "{:.2f}"),
    ("be_cpu_min", "BE CPU after suppress, lowest (cores)", "{:.2f}"),
    ("suppressed_fraction", "time BE was suppressed", "{:.1%}"),
    ("evictions", "evictions", "{:.0f}"),
    ("cpu_exceeded", "LS CPU above the predicted peak (time)", "{:.2%}"),
    ("cpu_max_over", "LS CPU above the predicted peak, worst (cores)", "{:.2f}"),
    ("mem_exceeded", "LS memory above the predicted peak (time)", "{:.2%}"),
    ("mem_max_over", "LS memory above the predicted peak, worst (GiB)", "{:.2f}"),
    ("ls_quota_mean", "LS CFS quota after CPU burst, mean (cores)", "{:.2f}"),
    ("ls_burst_mean", "LS CFS burst (cfs_burst_us) after CPU burst, mean (cores)", "{:.2f}"),
    ("burst_up", "CPU burst quota scale-ups (containers x rounds)", "{:.0f}"),
    ("burst_down", "CPU burst quota scale-downs (containers x rounds)", "{:.0f}"),
    ("memory_min_mean", "memory.min given to pods, mean (GiB)", "{:.2f}"),
    ("memory_low_mean", "memory.low given to pods, mean (GiB)", "{:.2f}"),
    ("memory_high_mean", "memory.high of the pods it limits, mean (GiB)", "{:.2f}"),
)


def _precise(fmt: str, *values: float) -> str:
    """`fmt` ("{:.1f}", "{:.2%}") with as many more decimals (at most 4) as it takes to show every value that is
    not zero, the change included, with two significant digits: never "0.0" for a change, never "0.3 -> 0.3
    (+0.1)"."""
    if not fmt.startswith("{:.") or fmt == "{:.0f}":
        return fmt
    percent = fmt.endswith("%}")
    decimals = int(fmt[3:-2])
    scale = 100.0 if percent else 1.0
    for v in values:
        if v:
            decimals = max(decimals, min(4, 1 - math.floor(math.log10(abs(v) * scale))))
    return f"{{:.{decimals}{'%' if percent else 'f'}}}"


def _series(run: ReplayRun) -> tuple[Any, ...]:
    return (run.frame_ts, run.be_cpu_cores, run.suppress_budget_cores, run.capacity_ts, run.batch_cpu_milli,
            run.batch_memory_bytes, run.predicted_cpu_milli, run.predicted_memory_bytes,
            [(e["ts"], e["uid"]) for e in run.evictions], run.ls_quota_cores, run.ls_burst_cores, run.burst_scaled_up,
            run.burst_scaled_down, run.memory_min_bytes, run.memory_low_bytes, run.memory_high_bytes)


_CAPACITY_ROWS = {"batch_core_hours", "batch_gib_hours", "batch_cpu_mean", "batch_cpu_min"}
_PREDICTION_ROWS = {"cpu_exceeded", "cpu_max_over", "mem_exceeded", "mem_max_over"}
_BURST_ROWS = {"ls_quota_mean", "ls_burst_mean", "burst_up", "burst_down"}
_MEMORY_QOS_ROWS = {"memory_min_mean", "memory_low_mean", "memory_high_mean"}


def _no_prediction(*runs: ReplayRun) -> bool:
    """No run ever held a predicted peak above zero: the predictor had nothing to predict for (no prod pod
    with a request reached it, as with pods created through the proxy in standalone mode)."""
    return all(not p for run in runs for p in run.predicted_cpu_milli)


def _no_colocation(*runs: ReplayRun) -> bool:
    """Every report tick of every run had colocation-config disabled (or there was none)."""
    return all(run.capacity_off == len(run.capacity_ts) for run in runs)


def compare(node: str, recorded: ReplayRun, proposed: ReplayRun, *, proposal: list[str] | None = None) -> Comparison:
    a, b = _figures(recorded), _figures(proposed)
    meaningless = _no_prediction(recorded, proposed)
    no_containers = all(q is None for run in (recorded, proposed) for q in run.ls_quota_cores)
    no_memory_qos = all(v is None for run in (recorded, proposed) for v in run.memory_min_bytes)
    no_colocation = _no_colocation(recorded, proposed)
    rows = []
    for key, label, fmt in _ROWS:
        if ((meaningless and key in _PREDICTION_ROWS) or (no_containers and key in _BURST_ROWS)
                or (no_memory_qos and key in _MEMORY_QOS_ROWS) or (no_colocation and key in _CAPACITY_ROWS)):
            rows.append((label, "n/a", "n/a", ""))
            continue
        delta = b[key] - a[key]
        shown = _precise(fmt, a[key], b[key], delta)
        change = "±0" if delta == 0 else ("+" if delta > 0 else "−") + shown.format(abs(delta))
        rows.append((label, shown.format(a[key]), shown.format(b[key]), change))
    notes = []
    if no_colocation:
        notes.append("batch capacity: n/a; colocation-config is disabled (enable: false) in both runs, so nothing is "
                     "offered to batch pods (try --colocation with {\"enable\": true})"
                     if any(run.capacity_ts for run in (recorded, proposed)) else
                     "batch capacity: n/a; the recording has no node facts to compute it from")
    if meaningless:
        notes.append("LS above the predicted peak: not meaningful here; the predictor held back no peak for prod "
                     "pods (none with a request reached it, e.g. pods created through the proxy), so there is "
                     "nothing to compare their usage with")
    if not meaningless and not recorded.modelled_rounds and not proposed.modelled_rounds:
        cold = max(recorded.cold_start_s, proposed.cold_start_s)
        notes.append(f"predicted peak: every prod pod was in its cold start (younger than cold_start_duration_s, "
                     f"{cold:.0f} s) or had no model in both runs, so the predicted peak is their requests; a "
                     "--predictor proposal changes it here only through cold_start_duration_s")
    if no_containers:
        notes.append("CPU burst: not meaningful here; the recording has no container facts (a format-1 recording, "
                     "or an agent that read none), so there is no CFS quota to replay")
    if no_memory_qos:
        notes.append("memory QoS: n/a; it planned nothing in either run (off in both, or no container facts)")
    if proposed.kept_pods:
        notes.append(f"evictions proposed may undercount: {len(proposed.kept_pods)} pod(s) the agent evicted were "
                     "kept by the proposal, and the recording has no usage of them after the agent's eviction "
                     "(they are absent from its later frames, so nothing could evict them again)")
    ts = recorded.frame_ts
    return Comparison(node, ts[0] if ts else 0.0, ts[-1] if ts else 0.0, len(ts), recorded, proposed, rows,
                      tuple(proposal or ()), tuple(notes))


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _first_and_count(frames: list[tuple[float, str]]) -> dict[str, tuple[float, int]]:
    out: dict[str, tuple[float, int]] = {}
    for ts, why in frames:
        first, n = out.get(why, (ts, 0))
        out[why] = (first, n + 1)
    return out


def _reasons(run: ReplayRun) -> str:
    counts = Counter(e["reason"] for e in run.evictions)
    return ", ".join(f"{n} {reason}" for reason, n in counts.most_common()) or "none"


def render_text(cmp: Comparison, *, max_evictions: int = 8) -> str:
    hours = (cmp.end - cmp.start) / 3600
    lines = [
        f"replay of {cmp.node or 'a node'}: {_when(cmp.start)} to {_when(cmp.end)} UTC "
        f"({hours:.1f} h, {cmp.frames} frames)",
        f"as recorded: {cmp.recorded.matched} recorded decisions reproduced, "
        f"{len(cmp.recorded.mismatches)} not" + (" (see -o json)" if cmp.recorded.mismatches else ""),
        "",
    ]
    lines.append("proposal:")
    lines += [f"  {line}" for line in cmp.proposal or ["(not given)"]]
    if cmp.unchanged:
        lines.append("no change: every series of the proposed run equals the recorded one, frame for frame")
    diverged = cmp.diverged_frames()
    if diverged:
        lines.append(f"counterfactual: {len(diverged)} of {cmp.frames} frames are not the recorded node; "
                     "the replay assumed there:")
        for why, (first, n) in _first_and_count(diverged).items():
            lines.append(f"  {n} frames from {_when(first)}: {why}")
    lines += [f"note: {note}" for note in cmp.notes]
    lines.append("")
    width = max(len(r[0]) for r in cmp.rows)
    lines.append(f"{'':<{width}}  {cmp.recorded.label:>12}  {cmp.proposed.label:>12}  {'change':>10}")
    for label, a, b, change in cmp.rows:
        lines.append(f"{label:<{width}}  {a:>12}  {b:>12}  {change:>10}")
    lines.append("")
    for run in (cmp.recorded, cmp.proposed):
        lines.append(f"evictions {run.label}: {_reasons(run)}")
        for e in run.evictions[:max_evictions]:
            # The whole message: a cut one ended mid-number ("pod uses 24622530" for 2462253056 bytes).
            lines.append(f"  {_when(e['ts'])}  {e['pod']}  {e['reason']}: {e['message']}")
        if len(run.evictions) > max_evictions:
            lines.append(f"  ... and {len(run.evictions) - max_evictions} more")
    return "\n".join(lines)
