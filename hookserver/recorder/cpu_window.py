"""The CPU evictors' averaging window under a proposal that changes it (`cpuEvictTimeWindowSeconds`).

The agent averages BE CPU usage, request and limit (BE satisfaction, gate BECPUEvict) and node CPU usage
(the CPUEvict node-usage mode) over `cpuEvictTimeWindowSeconds` of its per-second samples, and a frame keeps
only those averages and the latest samples. A replay under another window must average again. Before, it
kept the recorded averages: a proposal of a 30 s window on a recording made with 1 s showed the new window in
its diff and ran with the old one.

`EvictWindow` keeps each frame's latest samples and, where the proposal's window is not the recorded one,
averages them over the proposal's window: each frame's sample stands for the time since the frame before (a
frame every 10 s stands for 10 of the agent's samples), and the sample count is the number of the agent's
samples that window held (the recording's start cuts it short, as the agent's start did). Where the window is
the recorded one the frame is left alone, so a null proposal stays bit for bit. What the replay assumed is
said per frame (`ASSUMED`): the averages are over frames, not over the agent's per-second samples.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace

from qos.snapshot.builder import be_window_s
from qos.snapshot.model import BEStats, QoSSnapshot

__all__ = ["ASSUMED", "EvictWindow"]

ASSUMED = ("CPU-evict averages over the proposal's {window:.0f}s window are of the recorded frames' samples, not of "
           "the agent's per-second ones")


@dataclass(frozen=True, slots=True)
class _Sample:
    """One frame's latest samples: BE usage, request and limit (milli-cores) and the node's CPU (cores)."""

    now: float
    weight: float  # seconds this sample stands for
    be: tuple[float, float, float] | None
    node_cpu: float | None


def _mean(pairs: list[tuple[float, float]]) -> float | None:
    total = sum(w for w, _ in pairs)
    return sum(w * v for w, v in pairs) / total if total > 0 else None


class EvictWindow:
    """The frames' latest CPU samples, averaged again over a window the proposal changed (module docstring)."""

    def __init__(self) -> None:
        self.samples: deque[_Sample] = deque()
        self.first: float | None = None  # the recording's first frame: no sample before it
        self.longest = 0.0  # the longest window asked for so far: samples are kept that long

    def add(self, snap: QoSSnapshot) -> None:
        """Keep `snap`'s latest samples (the recorded frame, before any proposal)."""
        be = snap.be
        last = self.samples[-1].now if self.samples else None
        weight = snap.collect_interval_s if last is None else max(snap.now - last, snap.collect_interval_s)
        if self.first is None:
            self.first = snap.now
        sample_be = None
        if be.last_usage_milli is not None and be.last_request_milli is not None and be.last_limit_milli is not None:
            sample_be = (be.last_usage_milli, be.last_request_milli, be.last_limit_milli)
        self.samples.append(_Sample(snap.now, weight, sample_be, snap.usage.cpu_cores))
        while self.samples and self.samples[0].now <= snap.now - max(self.longest, 3600.0):
            self.samples.popleft()

    def snapshot(self, recorded: QoSSnapshot, snap: QoSSnapshot) -> tuple[QoSSnapshot, str]:
        """`snap` (the frame under the proposal's NodeSLO) with its CPU-evict averages over the proposal's window
        where that is not the window the agent used under the `recorded` frame's NodeSLO, and what the replay
        assumed there ("" where nothing changed)."""
        interval = snap.collect_interval_s if snap.collect_interval_s > 0 else 1.0
        window = be_window_s(snap.slo, interval)
        if window == be_window_s(recorded.slo, interval):
            return snap, ""
        self.longest = max(self.longest, window)
        start = snap.now - window
        be: list[tuple[float, tuple[float, float, float]]] = []
        node: list[tuple[float, float]] = []
        for s in self.samples:
            if s.now <= start or s.now > snap.now:
                continue
            weight = min(s.weight, s.now - start)
            if s.be is not None:
                be.append((weight, s.be))
            if s.node_cpu is not None:
                node.append((weight, s.node_cpu))
        covered = snap.now - max(start, (self.first if self.first is not None else snap.now) - interval)
        count = max(0, min(int(round(window / interval)), int(round(covered / interval))))
        stats = snap.be
        if be:
            avgs = [_mean([(w, v[i]) for w, v in be]) or 0.0 for i in range(3)]
            stats = replace(stats, window_s=window, avg_usage_milli=avgs[0], avg_request_milli=avgs[1],
                            avg_limit_milli=avgs[2], count=count)
        else:
            stats = BEStats(window_s=window, last_usage_milli=stats.last_usage_milli,
                            last_request_milli=stats.last_request_milli, last_limit_milli=stats.last_limit_milli)
        node_avg = _mean(node)
        usage = replace(snap.usage, cpu_cores_avg=node_avg, cpu_avg_count=count if node else 0, cpu_window_s=window)
        return replace(snap, be=stats, usage=usage), ASSUMED.format(window=window)
